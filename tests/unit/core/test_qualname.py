"""The test ids of the plugin's items, read back by the one parser the pytest layer uses (the baseline, the
recorder, the reuse store, the collection): :func:`conformance.core.qualname.split_id`, the inverse of
:func:`~conformance.core.qualname.node_id`."""

from __future__ import annotations

import pytest

from conformance.core.qualname import item_of_id, node_id, qualname_of_id, split_id


@pytest.mark.parametrize("qualname, item, expected", [
    ("samples::TensorQueue", "agreement[pop]", ("torchbind[samples.TensorQueue]", "agreement", "pop")),
    ("samples::Counter", "coverage", ("torchbind[samples.Counter]", "coverage", "")),
    ("fp8.Recipe", "matrix[qdq.backward-aot_eager]", ("torchbind[py:fp8.Recipe]", "matrix", "qdq.backward-aot_eager")),
])
def test_an_item_id_splits_into_collector_check_and_target(qualname, item, expected):
    nodeid = node_id(qualname, item)
    assert split_id(nodeid) == expected
    assert item_of_id(nodeid) == item and qualname_of_id(nodeid) == qualname


def test_an_id_of_no_class_item_has_no_check():
    # A user's own test in the same run: no check, so no baseline label or reuse entry reads one into it.
    assert split_id("tests/test_user.py::test_a") == ("tests/test_user.py::test_a", "", "")
    assert item_of_id("tests/test_user.py::test_a") == ""
