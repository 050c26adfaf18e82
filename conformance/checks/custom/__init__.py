"""Checks of Python custom classes: one module per check, each a function ``(CustomClassContext, target)`` of the
check's name, declared by its row of :data:`conformance.core.names.CHECKS` (see :mod:`conformance.checks`)."""
