"""Checks of TorchBind classes: one module per check, each a function ``(ClassContext, target)`` of the check's
name, declared by its row of :data:`conformance.core.names.CHECKS` (see :mod:`conformance.checks`)."""
