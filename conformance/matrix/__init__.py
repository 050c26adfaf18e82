"""The coverage matrix: each row of a class (a program using its objects) through each backend, compared with
plain eager.

The kind-neutral part is here: ``backends/`` (one module per column, each carrying its reproducer lines),
:mod:`~conformance.matrix.cell` (the one skeleton that runs a cell of either kind and turns what it did into a
verdict, with the rule ids of a failed cell), :mod:`~conformance.matrix.limitations` (the one table of known torch
limitations) and :mod:`~conformance.matrix.explain` (what every cell's messages share). Each kind of class has a
folder of its own: ``torchbind/`` (the rows, scenarios, messages and reproducers of a TorchBind class) and
``custom/`` (the rows of a Python custom class: its ops, called with a sequence of objects). Each kind's ``run``
module gives the skeleton its :class:`~conformance.matrix.cell.Rows`; :mod:`conformance.checks.matrix` picks them by
the class's kind.
"""
