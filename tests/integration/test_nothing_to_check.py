"""A selected class with nothing to check under the run's filters says so (it used to collect 0 items and end with
exit status 5 and no word). On torch's own classes: profiling::SourceRef takes part in no custom op, c10d::Work is
not bound with def_pickle; c10d::ReduceOp is taken by ops (allreduce_, reduce_, ...)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.process  # pytest runs in a subprocess: the warnings summary is what a user sees


def test_a_class_with_no_item_is_named_with_the_reason(pytester):
    result = pytester.runpytest_subprocess("--torchbind-class=profiling::SourceRef", "--torchbind-checks=custom_op",
                                           "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED  # pytest's own status for "nothing ran" ...
    out = result.stdout.str()
    # ... now with the reason, in the warnings summary, located at the class's collector
    assert "PytestCollectionWarning: torchbind[profiling.SourceRef]: nothing to check in profiling::SourceRef: the " \
           "checks selected (--torchbind-checks=custom_op) have no item for it (custom_op: no custom op takes a " \
           "profiling::SourceRef argument)" in out, out


def test_only_the_classes_without_items_are_named(pytester):
    result = pytester.runpytest_subprocess("--torchbind-class=c10d::[RW]*", "--torchbind-checks=custom_op,deepcopy",
                                           "--collect-only", "-q", "-p", "no:randomly", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    assert "torchbind[c10d.ReduceOp]::custom_op[allreduce_]" in out
    assert "nothing to check in c10d::Work: the checks selected (--torchbind-checks=custom_op,deepcopy) have no " \
           "item for it (custom_op: no custom op takes a c10d::Work argument; deepcopy does not apply to it)" in out
    assert "nothing to check in c10d::ReduceOp" not in out
