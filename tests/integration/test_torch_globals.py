"""With ``--torchbind-isolation=none`` the plugin's items run in the pytest process: a fake (or the class's code)
that changes torch's process-wide defaults must not change the user's own tests that run after it. The defaults
are put back after each item, and the run warns naming the item and what it changed (conformance.plugin.torch_globals)."""

from __future__ import annotations

import pytest
import torch

from conformance.plugin import torch_globals
from conftest import run_inprocess

CHANGING_FAKE = """
import torch

from sample_classes.fakes import FakeCounter, register_fake_classes


class ChangingCounter(FakeCounter):
    @classmethod
    def __obj_unflatten__(cls, flattened):
        return cls(**dict(flattened))

    def value(self):
        torch.set_default_dtype(torch.float64)
        torch.set_grad_enabled(False)
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        return self.count


register_fake_classes({"samples::Counter": ChangingCounter}, force=True)
"""

USER_TESTS = """
import torch


def test_zz_the_users_own_test_sees_torch_as_it_was():
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()
    assert torch.get_num_threads() == {threads}
    assert not torch.are_deterministic_algorithms_enabled()
"""


RUN_THE_USERS_TESTS_LAST = """
import pytest


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.nodeid.startswith("test_user.py"))
"""


def test_defaults_a_fake_changed_are_put_back_and_named(pytester):
    import sample_classes  # noqa: F401 - builds (cached) and loads the library

    before = torch_globals.snapshot()
    pytester.makepyfile(changing=CHANGING_FAKE, test_user=USER_TESTS.format(threads=torch.get_num_threads()))
    pytester.makeconftest(RUN_THE_USERS_TESTS_LAST)
    try:
        result = run_inprocess(pytester, "--torchbind-load=changing.py", "--torchbind-class=samples::Counter",
                               "--torchbind-checks=agreement", "-k", "value or users_own", "-p", "no:randomly")
    finally:
        changed = torch_globals.put_back(before)  # this test process, whatever the run did
        # The changing fake stays registered for samples::Counter in this process: every later test that called
        # the fake's value() (a matrix cell's fake replay) turned grad mode off, float64 on, ... for the tests
        # after it on the same xdist worker. The sample's correct fake back.
        from sample_classes import fakes

        fakes.register_fake_classes({"samples::Counter": fakes.FAKE_CLASSES["samples::Counter"]}, force=True)
    assert changed == {}, changed
    result.assert_outcomes(passed=2)  # agreement[value] (the values agree) and the user's own test
    out = result.stdout.str()
    assert out.index("torchbind[samples.Counter] .") < out.index("test_user.py .")
    result.stdout.fnmatch_lines([
        "*torchbind[[]samples.Counter[]]::agreement[[]value[]] changed torch's process-wide defaults, which every "
        "test after it in this process would have seen (--torchbind-isolation=none runs the plugin's items in the "
        "pytest process); put back after the item: the default dtype (torch.set_default_dtype): torch.float32 -> "
        "torch.float64; grad mode (torch.set_grad_enabled): True -> False; the number of threads "
        f"(torch.set_num_threads): {torch.get_num_threads()} -> 1; deterministic algorithms "
        "(torch.use_deterministic_algorithms; on, warn only): (False, False) -> (True, False).*"])


def test_put_back_restores_each_default_and_says_what_changed():
    before = torch_globals.snapshot()
    try:
        torch.set_default_device("meta")
        torch.set_float32_matmul_precision("medium")
        torch.autograd.set_detect_anomaly(True)
        changed = torch_globals.put_back(before)
    finally:
        torch_globals.put_back(before)
    assert set(changed) == {"the default device (torch.set_default_device)",
                            "float32 matmul precision (torch.set_float32_matmul_precision)",
                            "anomaly detection (torch.autograd.set_detect_anomaly; on, check NaN)"}
    assert torch.empty(1).device == torch.device("cpu") and torch_globals.snapshot() == before
    assert torch_globals.put_back(before) == {}
