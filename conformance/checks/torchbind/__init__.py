"""Checks of TorchBind classes: one module per check, each registered with :func:`conformance.checks.check`."""
