"""``--torchbind-load`` under faults: the dynamic loader's own reason for a library that does not load, a library
whose static initializers crash (or exit) the process, and a directory where a library or module was expected."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.process.loading import LoadError, apply_load_spec

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a small shared library")
needs_fork = pytest.mark.skipif(not (hasattr(os, "fork") and sys.platform.startswith("linux")),
                                reason="libraries are tried in a forked child on Linux only")

SOURCES = {
    # A static initializer that dereferences a null pointer, as a broken TORCH_LIBRARY block or global would.
    "libboom.so": "__attribute__((constructor)) static void boom(void) { *(volatile int *)0 = 0; }\n",
    # One that ends the process.
    "libbye.so": "#include <stdlib.h>\n__attribute__((constructor)) static void bye(void) { exit(3); }\n",
    # A symbol the loader cannot resolve (bound at load time), as in a library built against another torch.
    "libundef.so": ("extern int tbl_not_defined_anywhere(void);\n"
                    "int use_it(void) { return tbl_not_defined_anywhere(); }\n"),
}


@pytest.fixture
def build(tmp_path, monkeypatch):
    """Compile one of :data:`SOURCES` into ``tmp_path`` (made the CWD); returns its path."""
    monkeypatch.chdir(tmp_path)

    def make(name: str) -> Path:
        source = tmp_path / (name.removesuffix(".so") + ".c")
        source.write_text(SOURCES[name])
        subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-z,now", "-o", name, source.name], cwd=tmp_path,
                       check=True)
        return tmp_path / name

    return make


@pytest.mark.process
@needs_gcc
def test_the_dynamic_loaders_reason_is_shown(build):
    path = build("libundef.so")
    with pytest.raises(LoadError) as info:
        apply_load_spec("libundef.so", path.parent)
    message = str(info.value)
    assert message.startswith("--torchbind-load='libundef.so': loading the library failed:\n"
                              f"OSError: Could not load this library: {path}\n")
    assert f"caused by: OSError: {path}: undefined symbol: tbl_not_defined_anywhere" in message


@pytest.mark.process
def test_the_reason_for_a_file_that_is_no_library_is_shown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libjunk.so").write_bytes(b"not an ELF file at all, nothing like one" * 4)
    with pytest.raises(LoadError) as info:
        apply_load_spec("libjunk.so", tmp_path)
    assert "\ncaused by: OSError: " in str(info.value) and "invalid ELF header" in str(info.value)


@pytest.mark.process
@needs_gcc
@needs_fork
def test_a_library_whose_initializers_crash_is_named_instead_of_ending_the_process(build):
    path = build("libboom.so")
    with pytest.raises(LoadError) as info:
        apply_load_spec("libboom.so", path.parent)
    assert str(info.value).startswith(
        f"--torchbind-load='libboom.so': loading {path} crashed the process: killed by SIGSEGV (Segmentation "
        "fault); the library's static initializers (TORCH_LIBRARY blocks, globals) crashed")


@pytest.mark.process
@needs_gcc
@needs_fork
def test_a_library_whose_initializers_exit_is_named_too(build):
    path = build("libbye.so")
    with pytest.raises(LoadError, match=r"loading .*libbye\.so exited the process with status 3; the library's static "
                                        r"initializers \(TORCH_LIBRARY blocks, globals\) called exit\(\)"):
        apply_load_spec("libbye.so", path.parent)


@pytest.mark.process
@needs_gcc
@needs_fork
def test_pytest_reports_the_crashing_library_as_a_usage_error(pytester):
    (pytester.path / "boom.c").write_text(SOURCES["libboom.so"])
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "libboom.so", "boom.c"], cwd=pytester.path, check=True)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=libboom.so",
                                           "--torchbind-class=boom::*")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # not 139 (SIGSEGV) with nothing said
    err = result.stderr.str()
    assert "libboom.so crashed the process: killed by SIGSEGV" in err
    assert "Traceback" not in err and "Fatal Python error" not in err


@pytest.mark.process
def test_a_directory_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tblf_build" / "lib.so").mkdir(parents=True)
    for spec in ("tblf_build", "tblf_build/", "tblf_build/lib.so", str(tmp_path / "tblf_build")):
        with pytest.raises(LoadError, match=r"tblf_build(/lib\.so)? is a directory; name the library file \(\.so\) "
                                            r"in it, a \.py file, or an importable module"):
            apply_load_spec(spec, tmp_path)


def test_a_package_directory_named_as_a_module_is_imported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd())])
    (tmp_path / "tblf_pkg").mkdir()
    (tmp_path / "tblf_pkg" / "__init__.py").write_text("LOADED = True\n")
    try:
        apply_load_spec("tblf_pkg", tmp_path)
        assert sys.modules["tblf_pkg"].LOADED
    finally:
        sys.modules.pop("tblf_pkg", None)


# ----- a load module (or .py file) that ends the process ---------------------------------------------------------

MODULES = {
    "tblf_exits": "import os\nos._exit(0)\n",  # at import, with status 0: once a silent exit 0 of pytest
    "tblf_setup_exits": "import os\nLOADED = True\n\ndef setup():\n    os._exit(5)\n",
    "tblf_swallows": ("import os\ntry:\n    os._exit(2)\nexcept BaseException:\n    pass\nREACHED = True\n"),
    "tblf_raises": "raise ValueError('no fakes today')\n",
}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """:data:`MODULES` written to ``tmp_path`` (the CWD, off ``sys.path``); dropped from ``sys.modules`` after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", os.getcwd())])
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(text)
    yield tmp_path
    for name in MODULES:
        sys.modules.pop(name, None)


def test_a_load_module_that_calls_os_exit_is_named(modules):
    real_exit = os._exit
    with pytest.raises(LoadError) as info:
        apply_load_spec("tblf_exits", modules)
    assert str(info.value) == (
        "--torchbind-load='tblf_exits': importing tblf_exits called os._exit(0), which would have ended pytest with "
        "status 0 with no output: a module given to --torchbind-load must report an error by raising an exception, "
        "not end the program")
    assert "tblf_exits" not in sys.modules and os._exit is real_exit
    with pytest.raises(LoadError, match=r"^--torchbind-load='tblf_setup_exits:setup': calling tblf_setup_exits\.setup\(\) "
                                        r"called os\._exit\(5\), which would have ended pytest with status 5:"):
        apply_load_spec("tblf_setup_exits:setup", modules)
    with pytest.raises(LoadError, match=r"^--torchbind-load='tblf_exits\.py': importing .*tblf_exits\.py called "
                                        r"os\._exit\(0\)"):
        apply_load_spec("tblf_exits.py", modules)
    # Caught by the module's own `except BaseException`: still refused (the real call would not have returned).
    with pytest.raises(LoadError, match=r"importing tblf_swallows called os\._exit\(2\)"):
        apply_load_spec("tblf_swallows", modules)
    assert os._exit is real_exit and "load_library" not in vars(__import__("torch").ops)
    with pytest.raises(LoadError, match=r"^--torchbind-load='tblf_raises': importing tblf_raises failed:\n"
                                        r"ValueError: no fakes today$"):
        apply_load_spec("tblf_raises", modules)


@pytest.mark.process
@needs_gcc
@needs_fork
@pytest.mark.parametrize("library, said", [("libbye.so", "exited the process with status 3"),
                                           ("libboom.so", "crashed the process: killed by SIGSEGV")])
def test_a_library_whose_initializers_end_the_process_loaded_by_a_module_is_named(build, tmp_path, monkeypatch,
                                                                                 library, said):
    path = build(library)
    name = f"tblf_loads_{path.stem}"
    (tmp_path / f"{name}.py").write_text("import torch\n\ntorch.ops.load_library(" + repr(library) + ")\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    try:
        with pytest.raises(LoadError) as info:
            apply_load_spec(name, tmp_path)
    finally:
        sys.modules.pop(name, None)
    assert str(info.value).startswith(
        f"--torchbind-load='{name}': importing {name}, which loads {path} with torch.ops.load_library: "
        f"loading {path} {said}"), str(info.value)


@pytest.mark.process
@needs_gcc
@needs_fork
def test_pytest_reports_a_load_module_that_exits_as_a_usage_error_as_for_a_library(pytester):
    (pytester.path / "bye.c").write_text(SOURCES["libbye.so"])
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", "libbye.so", "bye.c"], cwd=pytester.path, check=True)
    pytester.makepyfile(tblf_quits="import os\nos._exit(0)\n",
                        tblf_loads_bye="import torch\ntorch.ops.load_library('libbye.so')\n")
    for spec, said in (("tblf_quits", "importing tblf_quits called os._exit(0)"),
                       ("tblf_loads_bye", "importing tblf_loads_bye, which loads "),
                       ("libbye.so", "loading ")):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--torchbind-load={spec}",
                                               "--torchbind-class=samples::Counter")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, spec  # not 0 (or 3) with nothing said
        err = result.stderr.str()
        assert f"--torchbind-load='{spec}': {said}" in err, err
        assert "Traceback" not in err


@pytest.mark.process
def test_a_load_module_that_crashes_its_process_is_named_by_the_crash_stack(pytester):
    """A crash while the module's own code runs cannot become a usage error without running the module twice (its
    side effects too): the process ends by the signal, not 0, and faulthandler's stack names the module, where
    pytest would otherwise end without a word (its own faulthandler starts after configuration)."""
    pytester.makepyfile(tblf_crashes="import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--torchbind-load=tblf_crashes",
                                           "--torchbind-class=samples::Counter")
    assert result.ret not in (0, pytest.ExitCode.TESTS_FAILED)
    err = result.stderr.str()
    assert "Fatal Python error: Segmentation fault" in err and "tblf_crashes.py\", line 2 in <module>" in err, err
