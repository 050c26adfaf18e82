"""``--torchbind-load`` specs: each form applied by the loader, the lines a reproducer script uses for it, and the
``pytest`` console script (which, unlike ``python -m pytest``, does not put the current directory on sys.path)."""

from __future__ import annotations

import builtins
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.engine.loading import file_module_name, parse_spec, renamed_files, repro_lines
from conformance.process.loading import LoadError, apply_load_spec
from conftest import TORCH_SPEC, needs_torch_testlib

PREFIX = "tbl_"  # every module these tests create is named so, and is removed from sys.modules afterwards


@pytest.fixture(autouse=True)
def clean_imports(monkeypatch):
    """A sys.path of this test's own, with no entry meaning the CWD ("" or "."), so nothing but the loader can make
    a module in the CWD importable; afterwards the modules the test created are dropped from sys.modules."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".") and p != os.getcwd()])
    yield
    for name in [n for n in sys.modules if n.startswith((PREFIX, f"_torchbind_load_{PREFIX}"))]:
        del sys.modules[name]


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    """Three directories side by side: ``cwd`` (made the CWD), ``root`` (the rootdir) and ``elsewhere``."""
    made = {name: tmp_path / name for name in ("cwd", "root", "elsewhere")}
    for path in made.values():
        path.mkdir()
    monkeypatch.chdir(made["cwd"])
    return made


def write_fakes(directory: Path, name: str) -> Path:
    """A fake-class module that counts its imports and has a ``setup`` function that records its call."""
    path = directory / f"{name}.py"
    path.write_text(
        "import builtins\n"
        "builtins.tbl_imports = getattr(builtins, 'tbl_imports', 0) + 1\n"
        "CALLS = []\n"
        "def setup():\n"
        "    CALLS.append('setup')\n"
        "def explode():\n"
        "    raise RuntimeError('setup exploded')\n"
        "NOT_CALLABLE = 3\n"
    )
    return path


# ----- parsing ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec, parsed", [
    ("build/libfoo.so", ("library", "build/libfoo.so", "")),
    ("libfoo.so.1", ("library", "libfoo.so.1", "")),
    ("path/to/fakes.py", ("file", "path/to/fakes.py", "")),
    ("path/to/fakes.py:setup", ("file", "path/to/fakes.py", "setup")),
    ("fakes.py:setup", ("file", "fakes.py", "setup")),
    ("/abs/dir.v2/fakes.py:setup", ("file", "/abs/dir.v2/fakes.py", "setup")),
    (r"C:\proj\fakes.py", ("file", r"C:\proj\fakes.py", "")),
    (r"C:\proj\fakes.py:setup", ("file", r"C:\proj\fakes.py", "setup")),
    ("mylib", ("module", "mylib", "")),
    ("mylib.fakes", ("module", "mylib.fakes", "")),
    ("mylib.fakes:setup", ("module", "mylib.fakes", "setup")),
])
def test_parse(spec, parsed):
    assert parse_spec(spec) == parsed


# ----- modules beside the invocation directory or the rootdir ----------------------------------------------------
def test_module_in_the_invocation_directory_is_found(dirs):
    write_fakes(dirs["cwd"], "tbl_cwd")
    apply_load_spec("tbl_cwd:setup", dirs["root"])
    assert sys.modules["tbl_cwd"].CALLS == ["setup"]
    assert sys.path[0] == str(dirs["cwd"])


def test_module_beside_the_rootdir_is_found(dirs):
    write_fakes(dirs["root"], "tbl_root")
    apply_load_spec("tbl_root", dirs["root"])
    assert "tbl_root" in sys.modules
    assert sys.path[0] == str(dirs["root"])


def test_invocation_directory_comes_before_the_rootdir(dirs):
    write_fakes(dirs["cwd"], "tbl_both")
    write_fakes(dirs["root"], "tbl_both")
    apply_load_spec("tbl_both", dirs["root"])
    assert sys.modules["tbl_both"].__file__ == str(dirs["cwd"] / "tbl_both.py")


def test_package_directory_and_submodule_are_found(dirs):
    package = dirs["root"] / "tbl_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_fakes(package, "fakes")
    apply_load_spec("tbl_pkg.fakes:setup", dirs["root"])
    assert sys.modules["tbl_pkg.fakes"].CALLS == ["setup"]


def test_directory_is_inserted_once(dirs):
    write_fakes(dirs["cwd"], "tbl_once")
    write_fakes(dirs["cwd"], "tbl_once_too")
    apply_load_spec("tbl_once", dirs["cwd"])
    del sys.modules["tbl_once"]
    apply_load_spec("tbl_once", dirs["cwd"])
    apply_load_spec("tbl_once_too", dirs["cwd"])
    assert sys.path.count(str(dirs["cwd"])) == 1


def test_reproducers_insert_a_directory_once(dirs):
    from conformance.engine.loading import load_lines

    write_fakes(dirs["cwd"], "tbl_twice")
    write_fakes(dirs["cwd"], "tbl_twice_too")
    where = repr(str(dirs["cwd"]))
    assert load_lines(["tbl_twice", "tbl_twice_too"], dirs["root"]) == [
        "import sys", f"sys.path.insert(0, {where})", "import tbl_twice", "import tbl_twice_too"]


def test_module_on_sys_path_adds_nothing(dirs):
    before = list(sys.path)
    apply_load_spec("json", dirs["root"])
    assert sys.path == before
    assert repro_lines("json", dirs["root"]) == ["import json"]
    assert repro_lines(TORCH_SPEC, dirs["root"]) == [
        "import torch.testing._internal.torchbind_impls",
        "torch.testing._internal.torchbind_impls.init_torchbind_implementations()"]


def test_module_found_nowhere_says_where_it_looked(dirs):
    before = list(sys.path)
    with pytest.raises(LoadError) as info:
        apply_load_spec("tbl_nowhere:setup", dirs["root"])
    message = str(info.value)
    assert message.startswith("--torchbind-load='tbl_nowhere:setup': no module named 'tbl_nowhere'")
    assert "not on sys.path" in message and str(dirs["cwd"]) in message and str(dirs["root"]) in message
    assert sys.path == before


def test_missing_import_inside_the_module_is_reported_as_is(dirs):
    (dirs["cwd"] / "tbl_inner.py").write_text("import tbl_not_installed_anywhere\n")
    with pytest.raises(LoadError, match=r"importing tbl_inner .*failed:\nModuleNotFoundError: No module named "
                                        r"'tbl_not_installed_anywhere'"):
        apply_load_spec("tbl_inner", dirs["root"])


def test_module_that_raises_on_import(dirs):
    (dirs["root"] / "tbl_raises.py").write_text("raise ValueError('boom at import')\n")
    with pytest.raises(LoadError, match="ValueError: boom at import"):
        apply_load_spec("tbl_raises", dirs["root"])


@pytest.mark.parametrize("func, message", [
    ("missing", "tbl_funcs has no function 'missing'"),
    ("NOT_CALLABLE", "tbl_funcs has no function 'NOT_CALLABLE'"),
    ("explode", r"calling tbl_funcs.explode\(\) failed:\nRuntimeError: setup exploded"),
])
def test_module_function_errors(dirs, func, message):
    write_fakes(dirs["cwd"], "tbl_funcs")
    with pytest.raises(LoadError, match=rf"--torchbind-load='tbl_funcs:{func}': {message}"):
        apply_load_spec(f"tbl_funcs:{func}", dirs["root"])


@pytest.mark.parametrize("spec", ["not a module", "a..b", "mod:fn:extra", "mod:", "1abc", "fakes.py:not-a-name"])
def test_spec_of_no_known_form(dirs, spec):
    with pytest.raises(LoadError, match="expected a .so path, a .py path, path/to/file.py:function"):
        apply_load_spec(spec, dirs["root"])


# ----- .py files, with and without a function ------------------------------------------------------------------------
def file_lines(path: Path, name: str) -> list[str]:
    """The reproducer lines importing the file ``path`` as the module ``name``, as the plugin did."""
    module = f"sys.modules[{name!r}]"
    return ["import importlib.util", "import sys", f"if {name!r} not in sys.modules:",
            f"    {module} = importlib.util.module_from_spec(importlib.util.spec_from_file_location({name!r}, "
            f"{str(path)!r}))",
            f"    {module}.__spec__.loader.exec_module({module})"]


def test_python_file_relative_to_the_rootdir(dirs):
    path = write_fakes(dirs["root"], "tbl_file")
    apply_load_spec("tbl_file.py", dirs["root"])
    assert sys.modules["tbl_file"].__file__ == str(path)  # named by its stem
    assert repro_lines("tbl_file.py", dirs["root"]) == file_lines(path, "tbl_file")
    assert repro_lines("tbl_file", dirs["root"]) == file_lines(path, "tbl_file")  # a class's module: the same


def test_python_file_with_a_function(dirs):
    sub = dirs["cwd"] / "sub"
    sub.mkdir()
    path = write_fakes(sub, "tbl_filefunc")
    apply_load_spec("sub/tbl_filefunc.py:setup", dirs["root"])
    module = sys.modules["tbl_filefunc"]
    assert module.__file__ == str(path) and module.CALLS == ["setup"]
    apply_load_spec("sub/tbl_filefunc.py:setup", dirs["root"])  # imported once, called once per spec
    assert module.CALLS == ["setup", "setup"]
    assert repro_lines("sub/tbl_filefunc.py:setup", dirs["root"]) == [
        *file_lines(path, "tbl_filefunc"), "sys.modules['tbl_filefunc'].setup()"]


# ----- the module name of a .py file: the same on every run -----------------------------------------------------------
def test_a_file_whose_stem_is_free_is_imported_under_its_stem_once(dirs):
    path = write_fakes(dirs["cwd"], "tbl_stem")
    assert file_module_name(path, dirs["root"]) == "tbl_stem"
    before = getattr(builtins, "tbl_imports", 0)
    apply_load_spec(str(path), dirs["root"])
    apply_load_spec("tbl_stem.py", dirs["root"])  # the same file by another spelling: not imported again
    assert sys.modules["tbl_stem"].__file__ == str(path)
    assert builtins.tbl_imports == before + 1


def digest_name(stem: str, path: Path) -> str:
    return f"_torchbind_load_{stem}_{hashlib.sha256(os.fsencode(str(path.resolve()))).hexdigest()[:12]}"


@pytest.mark.parametrize("stem, name, why", [
    ("json", "json", "the module 'json' is already imported (from "),  # the standard library's
    ("tbl_taken", "tbl_taken", "the module 'tbl_taken' is already imported (from "),  # another file's, in sys.modules
    # another file's, beside the invocation directory (a module spec would import it)
    ("tbl_beside", "tbl_beside", "'tbl_beside' would import "),
    ("tbl-dash", "tbl_dash", "'tbl-dash' is not a Python module name"),  # no identifier
    ("class", "class", "'class' is not a Python module name"),  # a keyword
])
def test_a_file_whose_stem_another_module_has_gets_a_name_from_its_path(dirs, stem, name, why):
    if stem == "tbl_taken":
        write_fakes(dirs["elsewhere"], "tbl_taken")
        sys.path.insert(0, str(dirs["elsewhere"]))
        import tbl_taken  # noqa: F401
        sys.path.remove(str(dirs["elsewhere"]))
    if stem == "tbl_beside":
        write_fakes(dirs["cwd"], "tbl_beside")
    sub = dirs["root"] / "sub"
    sub.mkdir()
    path = write_fakes(sub, stem)
    before = sys.modules.get(stem)
    apply_load_spec(str(path), dirs["root"])
    expected = digest_name(name, path)
    assert sys.modules[expected].__file__ == str(path)
    assert sys.modules.get(stem) is before  # the other module keeps its name
    assert file_module_name(path, dirs["root"]) == expected  # and the file its own
    assert renamed_files()[path.resolve()] == (expected, renamed_files()[path.resolve()][1])
    assert renamed_files()[path.resolve()][1].startswith(why)  # said in the run's header (test_path_loaded_modules)
    sys.modules.pop(expected)


@pytest.mark.parametrize("func, message", [
    ("missing", "has no function 'missing'"),
    ("NOT_CALLABLE", "has no function 'NOT_CALLABLE'"),
    ("explode", r"calling .*tbl_fileerr\.py:explode\(\) failed:\nRuntimeError: setup exploded"),
])
def test_python_file_function_errors(dirs, func, message):
    write_fakes(dirs["cwd"], "tbl_fileerr")
    with pytest.raises(LoadError, match=rf"--torchbind-load='tbl_fileerr.py:{func}': .*{message}"):
        apply_load_spec(f"tbl_fileerr.py:{func}", dirs["root"])


def test_missing_python_file_with_a_function(dirs):
    with pytest.raises(LoadError, match=r"--torchbind-load='nowhere/tbl_x.py:setup': Python file not found"):
        apply_load_spec("nowhere/tbl_x.py:setup", dirs["root"])


# ----- libraries -----------------------------------------------------------------------------------------------------
@pytest.mark.process
def test_library_paths(dirs):
    (dirs["root"] / "libtbl.so").write_bytes(b"not an ELF file")
    assert repro_lines("libtbl.so", dirs["root"]) == [f"torch.ops.load_library({str(dirs['root'] / 'libtbl.so')!r})"]
    with pytest.raises(LoadError, match="--torchbind-load='libtbl.so': loading the library failed"):
        apply_load_spec("libtbl.so", dirs["root"])
    with pytest.raises(LoadError, match="library file not found"):
        apply_load_spec("nowhere/libtbl.so", dirs["root"])


# ----- reproducer lines run from any directory ---------------------------------------------------------------------
def run_repro(lines: list[str], check: list[str], script_dir: Path, cwd: Path) -> subprocess.CompletedProcess:
    script = script_dir / "repro.py"
    script.write_text("\n".join(lines + check) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env=env)


@pytest.mark.process
@pytest.mark.parametrize("home", ["cwd", "root"])
def test_reproducer_imports_a_module_beside_the_cwd_or_rootdir_from_anywhere(dirs, home):
    write_fakes(dirs[home], "tbl_repro")
    lines = repro_lines("tbl_repro:setup", dirs["root"])
    assert lines == ["import sys", f"sys.path.insert(0, {str(dirs[home])!r})", "import tbl_repro",
                     "tbl_repro.setup()"]
    apply_load_spec("tbl_repro:setup", dirs["root"])
    assert repro_lines("tbl_repro:setup", dirs["root"]) == lines  # the same once imported
    proc = run_repro(lines, ["print('ok', tbl_repro.CALLS)"], dirs["elsewhere"], dirs["elsewhere"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok ['setup']"


@pytest.mark.process
def test_reproducer_imports_a_package_submodule_from_anywhere(dirs):
    package = dirs["cwd"] / "tbl_rpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_fakes(package, "fakes")
    lines = repro_lines("tbl_rpkg.fakes:setup", dirs["root"])
    assert lines[:2] == ["import sys", f"sys.path.insert(0, {str(dirs['cwd'])!r})"]
    proc = run_repro(lines, ["print('ok', tbl_rpkg.fakes.CALLS)"], dirs["elsewhere"], dirs["elsewhere"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok ['setup']"


@pytest.mark.process
def test_reproducer_runs_a_python_file_function_from_anywhere(dirs):
    path = dirs["cwd"] / "tbl_rfile.py"
    path.write_text("import os\ndef setup():\n    print('ok', os.getcwd())\n")
    lines = repro_lines("tbl_rfile.py:setup", dirs["root"])
    assert lines == [*file_lines(path, "tbl_rfile"), "sys.modules['tbl_rfile'].setup()"]
    proc = run_repro(lines, [], dirs["elsewhere"], dirs["elsewhere"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"ok {dirs['elsewhere']}"


# ----- the pytest console script -------------------------------------------------------------------------------------
def console(pytester, *args) -> subprocess.CompletedProcess:
    """Run the ``pytest`` console script in ``pytester.path``. Not ``pytester.run``: its ``popen`` puts the CWD on
    PYTHONPATH, which would import a module beside it whatever the loader does."""
    script = Path(sys.executable).with_name("pytest")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(script), "-p", "no:cacheprovider", *args], cwd=pytester.path, capture_output=True,
                          text=True, timeout=300, env=env)


MYFAKES = """
with open("imported.txt", "a") as f:
    f.write("imported\\n")

def setup():
    with open("called.txt", "w") as f:
        f.write("yes")
"""


@needs_torch_testlib
@pytest.mark.process
@pytest.mark.parametrize("spec", ["myfakes:setup", "myfakes.py:setup"])
def test_console_script_loads_a_module_beside_the_invocation_directory(pytester, spec):
    pytester.makepyfile(myfakes=MYFAKES)
    proc = console(pytester, f"--torchbind-load={spec}", "--torchbind-class=_TorchScriptTesting::_Foo",
                   f"--torchbind-load={TORCH_SPEC}", "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (pytester.path / "called.txt").read_text() == "yes"
    assert (pytester.path / "imported.txt").read_text() == "imported\n"
    assert "torchbind[_TorchScriptTesting._Foo]::fake_class" in proc.stdout


@pytest.mark.process
def test_console_script_reports_a_module_found_nowhere(pytester):
    proc = console(pytester, "--torchbind-load=tbl_no_such_fakes", "--torchbind-class=_TorchScriptTesting::_Foo")
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout + proc.stderr
    assert "no module named 'tbl_no_such_fakes': not on sys.path" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_the_spec_module_of_the_engine_imports_neither_torch_nor_the_process_layer():
    # Issue 30: conformance.engine.loading is pure (spec forms, reproducer lines, the run's selectors); applying a
    # spec, which probes a library in a forked worker, is conformance.process.loading.
    code = ("import sys, conformance.engine.loading as m; "
            "print(sorted(n for n in sys.modules if n == 'torch' or n.startswith('conformance.process')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
