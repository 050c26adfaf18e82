"""Checks of Python custom classes: one module per check, each registered with :func:`conformance.checks.check`."""
