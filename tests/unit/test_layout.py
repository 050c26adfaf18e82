"""The layering docs/explanation/architecture.md promises, read from the source (no imports, no processes): the engine
never imports the process layer or the pytest layer, and nothing finds run state through an ambient object."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "conformance"
#: The engine: what runs checks without pytest and without processes.
ENGINE = ["core", "engine", "torchbind", "custom", "checks", "matrix", "runner.py"]
#: What the engine must not import: the process layer and the pytest layer.
ABOVE = {"process", "plugin"}


def _modules(entry: str) -> list[Path]:
    path = PACKAGE / entry
    return sorted(p for p in path.rglob("*.py") if p.name != "loading.py") if path.is_dir() else [path]


def _imported(path: Path) -> set[str]:
    """The ``conformance`` modules ``path`` imports, as names relative to the package (``process``, ``checks``)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1])
                parts = base + (node.module.split(".") if node.module else [])
                names = [parts + [a.name] for a in node.names] if not node.module else [parts]
            else:
                names = [node.module.split(".")] if node.module else []
            found |= {p[1] for p in names if len(p) > 1 and p[0] == "conformance"}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names
                      if a.name.startswith("conformance.") and len(a.name.split(".")) > 1}
    return found


def test_the_engine_imports_neither_the_process_layer_nor_the_pytest_layer():
    offenders = {str(p.relative_to(PACKAGE)): sorted(_imported(p) & ABOVE)
                 for entry in ENGINE for p in _modules(entry) if _imported(p) & ABOVE}
    assert offenders == {}


def test_the_import_reader_sees_relative_imports_of_the_layers_above():
    # The test above must be able to fail: the pytest layer's own relative imports of them are found.
    assert {"process", "plugin"} <= _imported(PACKAGE / "plugin" / "run.py")
    assert "process" in _imported(PACKAGE / "scaffold" / "worker.py")  # from ..process import ...


def test_no_ambient_run_state():
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert "current" not in defined, path
        assert not any(isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
                       for n in tree.body if path.name in ("settings.py", "registry.py", "breadcrumbs.py")), path
    assert not (PACKAGE / "session.py").exists()
