"""Repository-level pytest configuration for the project's own test suite."""

pytest_plugins = ["pytester"]
