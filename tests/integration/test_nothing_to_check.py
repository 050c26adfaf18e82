"""A selected class with nothing to check under the run's filters says so (it used to collect 0 items and end with
exit status 5 and no word). On torch's own classes: profiling::SourceRef takes part in no custom op, c10d::Work is
not bound with def_pickle; c10d::ReduceOp is taken by ops (allreduce_, reduce_, ...)."""

from __future__ import annotations

import pytest

from conftest import REGISTRATION_SOURCE

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


#: A constant custom class that no op takes (its library defines the ops elsewhere, or not yet).
NO_OPS = REGISTRATION_SOURCE + '''
@constant
class Lonely:
    def __init__(self, n: int):
        self.n = n
    def __eq__(self, other):
        return isinstance(other, Lonely) and other.n == self.n
    def __hash__(self):
        return hash(self.n)
    def __fx_repr__(self):
        return f"Lonely({self.n!r})", {"Lonely": Lonely}
'''


def test_a_custom_class_no_op_takes_says_where_the_ops_were_looked_for(pytester):
    """A new user's class whose ops were not found got "2 passed" (eq_hash, fx_repr) and not a word of its ops."""
    pytester.makepyfile(lonely_mod=NO_OPS)
    result = pytester.runpytest_subprocess("--torchbind-load=lonely_mod", "--torchbind-class=lonely_mod.Lonely",
                                           "--torchbind-isolation=none", "-p", "no:randomly", "-p",
                                           "no:cacheprovider")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, out
    assert "PytestCollectionWarning: torchbind[py:lonely_mod.Lonely]: no op takes a lonely_mod.Lonely argument, so " \
           "the checks of its ops (fake_kernel, guards, recompiles, baked, the coverage matrix) have nothing to run; " \
           "looked in the registered operators (torch._C._jit_get_all_schemas())" in " ".join(out.split()), out
