"""Where users are: the torch versions the plugin is tested with, the device option, and the version-aware
expectations of this suite."""

from __future__ import annotations

import json

import pytest
import torch

from conformance.core.versions import TESTED, torch_release, untested_warning
from conftest import TORCH_SPEC, run_inprocess, needs_torch_testlib

FOO = ("--torchbind-load=" + TORCH_SPEC, "--torchbind-class=_TorchScriptTesting::_Foo")


def test_a_newer_torch_gets_one_warning_not_an_error():
    assert torch_release("2.14.1+cu130") == torch_release("2.14.1")
    assert untested_warning("2.13.0+cpu") is None and untested_warning("2.14.1+cu130") is None
    assert untested_warning("2.15.0+cu132") is None
    assert untested_warning("2.16.0.dev20261101+cpu").startswith("torch 2.16.0.dev20261101+cpu is newer than")
    assert untested_warning("not a version") is None
    assert TESTED == ("2.13", "2.14", "2.15")


def test_the_running_torch_is_a_tested_one():
    release = torch_release(torch.__version__)
    assert f"{release.major}.{release.minor}" in TESTED


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@needs_torch_testlib
def test_cuda_without_a_cuda_device_is_a_usage_error(pytester):
    result = run_inprocess(pytester, *FOO, "--torchbind-device=cuda")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchbind-device=cuda: this torch has no CUDA device here" in result.stderr.str()


@needs_torch_testlib
def test_an_unknown_device_is_a_usage_error(pytester):
    result = run_inprocess(pytester, *FOO, "--torchbind-device=abacus")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--torchbind-device=abacus: not a device torch knows" in result.stderr.str()


@needs_torch_testlib
def test_the_report_is_labelled_with_the_device(pytester):
    pytester.makeini("[pytest]\ntorchbind_device = cpu\n")
    result = run_inprocess(pytester, *FOO, "--torchbind-checks=fake_class", "--torchbind-report=r.json")
    assert result.ret == 0
    assert json.loads((pytester.path / "r.json").read_text())["run"]["device"] == "cpu"
