"""The layering docs/explanation/architecture.md draws, read from the source (no imports, no processes): which
package may import which, the torch-free core, the two kinds of class kept apart, and no ambient run state.

Every import counts, wherever it is written: at module level, inside a function (a lazy import), or under
``if TYPE_CHECKING:`` — an import that only a type checker follows still ties the two modules together."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "conformance"

#: What each part of the package may import of the package, besides itself. A part is a subpackage, a top-level
#: module (``kinds``, ``runner``, ``__main__``), or a kind's folder of checks or of matrix rows (``checks.torchbind``,
#: ``matrix.custom``).
ALLOWED = {
    "core": set(),
    "engine": {"core"},
    "process": {"core", "engine"},
    "torchbind": {"core", "engine"},
    "custom": {"core", "engine"},
    "kinds": {"core", "engine", "torchbind", "custom"},
    "matrix": {"core", "engine"},  # the kind-neutral matrix: backends, the one cell skeleton, the limitations
    "matrix.torchbind": {"core", "engine", "torchbind", "matrix"},
    "matrix.custom": {"core", "engine", "custom", "matrix"},
    "checks": {"core", "engine", "matrix", "kinds", "torchbind", "custom",  # the registry types checks by kind,
               "matrix.torchbind", "matrix.custom"},  # and the matrix check picks each kind's rows
    "checks.torchbind": {"checks", "core", "engine", "torchbind", "matrix"},
    "checks.custom": {"checks", "core", "engine", "custom", "matrix"},
    "runner": {"core", "engine", "kinds", "checks", "matrix"},  # a kind only through kinds.py
    "reports": {"core", "matrix"},
    "scaffold": {"core", "engine", "process", "torchbind", "kinds", "checks", "runner", "plugin"},
    "plugin": {"core", "engine", "process", "torchbind", "custom", "kinds", "checks", "matrix", "runner", "reports"},
    "__main__": {"core", "plugin", "reports", "scaffold"},
    "__init__": {"core", "engine", "torchbind", "runner"},
}
#: Third-party packages the torch-free core must not import anywhere (the command line's --help and the report
#: writers run on it without torch).
HEAVY = ("torch", "hypothesis", "pytest", "_pytest", "numpy")
#: The packages that hold a folder per kind of class, each folder a part of its own.
BY_KIND = ("checks", "matrix")
KIND_FOLDERS = ("torchbind", "custom")


def part_of(path: Path) -> str:
    """The part (a key of :data:`ALLOWED`) the module at ``path`` belongs to."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[0] in BY_KIND and len(parts) > 2 and parts[1] in KIND_FOLDERS:
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def imported(path: Path) -> set[str]:
    """The parts of the package the module at ``path`` imports, anywhere in it (relative and absolute imports;
    ``from . import x`` counts the part ``x`` is in)."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    modules = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[:len(package) - node.level + 1])
            else:
                base = []
            head = base + (node.module.split(".") if node.module else [])
            modules += [head + [alias.name] for alias in node.names]
        elif isinstance(node, ast.Import):
            modules += [alias.name.split(".") for alias in node.names]
    found = set()
    for parts in modules:
        if len(parts) < 2 or parts[0] != "conformance":
            continue
        rel = parts[1:]
        if rel[0] in BY_KIND and len(rel) > 2 and rel[1] in KIND_FOLDERS:
            found.add(f"{rel[0]}.{rel[1]}")
        elif (PACKAGE / rel[0]).is_dir() or (PACKAGE / f"{rel[0]}.py").exists():
            found.add(rel[0])
    return found


def third_party(path: Path) -> set[str]:
    """The top-level names of the non-package modules the module at ``path`` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_belongs_to_a_known_part():
    assert {part_of(p) for p in MODULES} <= set(ALLOWED)


@pytest.mark.parametrize("part", sorted(ALLOWED))
def test_each_part_imports_only_the_parts_below_it(part):
    offenders = {str(p.relative_to(PACKAGE)): sorted(imported(p) - ALLOWED[part] - {part})
                 for p in MODULES if part_of(p) == part and imported(p) - ALLOWED[part] - {part}}
    assert offenders == {}


def test_the_parts_form_no_circle():
    # The table itself points one way: a circle among parts would let a circle among modules through.
    seen: dict[str, int] = {}

    def depth(part: str, stack: tuple[str, ...] = ()) -> int:
        assert part not in stack, " -> ".join((*stack, part))
        if part not in seen:
            seen[part] = 1 + max((depth(d, (*stack, part)) for d in ALLOWED[part]), default=0)
        return seen[part]

    for part in ALLOWED:
        depth(part)


def test_the_core_imports_no_torch_hypothesis_or_pytest():
    offenders = {str(p.relative_to(PACKAGE)): sorted(third_party(p) & set(HEAVY))
                 for p in MODULES if part_of(p) == "core" and third_party(p) & set(HEAVY)}
    assert offenders == {}


def test_the_kinds_are_kept_apart():
    # A TorchBind check never reaches into the custom-class code, nor the reverse; only kinds.py knows both.
    assert "custom" not in ALLOWED["torchbind"] | ALLOWED["checks.torchbind"] | ALLOWED["matrix.torchbind"]
    assert "torchbind" not in ALLOWED["custom"] | ALLOWED["checks.custom"] | ALLOWED["matrix.custom"]
    # The matrix's kind-neutral part (the cell skeleton both kinds run through) knows neither kind.
    assert not {"torchbind", "custom", "matrix.torchbind", "matrix.custom"} & ALLOWED["matrix"]
    # The engine, the kinds and the checks never import the process layer: isolation wraps them from above.
    assert "process" not in ALLOWED["engine"] | ALLOWED["torchbind"] | ALLOWED["custom"] | ALLOWED["checks"]
    assert "process" not in ALLOWED["checks.torchbind"] | ALLOWED["checks.custom"] | ALLOWED["runner"]


def test_the_import_reader_sees_every_form_of_import():
    # The tests above must be able to fail: relative, absolute, lazy and TYPE_CHECKING imports are all found.
    assert {"process", "plugin", "kinds"} <= imported(PACKAGE / "plugin" / "run.py")
    assert "process" in imported(PACKAGE / "scaffold" / "worker.py")  # from ..process import ...
    assert {"torchbind", "custom"} <= imported(PACKAGE / "kinds.py")  # lazy and TYPE_CHECKING imports
    assert "torchbind" in imported(PACKAGE / "checks" / "torchbind" / "agreement.py")  # from ...torchbind.calls
    assert {"matrix.torchbind", "matrix.custom"} <= imported(PACKAGE / "checks" / "matrix.py")
    assert part_of(PACKAGE / "matrix" / "custom" / "run.py") == "matrix.custom"
    assert part_of(PACKAGE / "matrix" / "backends" / "aoti.py") == "matrix"
    assert "reports" in imported(PACKAGE / "reports" / "terminal.py")  # from . import SYMBOLS


def test_no_ambient_run_state():
    for path in MODULES:
        tree = ast.parse(path.read_text())
        defined = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert "current" not in defined, path
        # The run's own values never hide behind a type-checking-only import.
        assert not any(isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
                       for n in tree.body if path.name in ("settings.py", "registry.py", "breadcrumbs.py")), path
    assert not (PACKAGE / "session.py").exists()


TORCH_API = PACKAGE / "engine" / "torch_api.py"


def _private_torch_names(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, name)`` of each ``torch._*`` module or attribute named in code (imports and attribute chains;
    ``torch.__version__`` and the like are public). Source text in strings, such as a reproducer's, is not code."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch._"):
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("torch._")]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            out.append((node.lineno, f"torch.{node.attr}"))
    return out


def test_torchs_private_apis_are_named_in_one_module():
    """The next torch release breaks in one place: every private torch API the plugin uses is an entry of
    conformance/engine/torch_api.py (issue 44: torch 2.15 moved several)."""
    offenders = [f"{p.relative_to(PACKAGE)}:{line}: {name}" for p in MODULES if p != TORCH_API
                 for line, name in _private_torch_names(ast.parse(p.read_text()))]
    assert not offenders, "use conformance.engine.torch_api instead:\n" + "\n".join(offenders)
    # the reader sees each form (an import, a from-import, an attribute chain), and not a string
    seen = _private_torch_names(ast.parse("import torch._dynamo\nfrom torch._C import Type\ntorch._C.Type\n"
                                          "'torch._dynamo.reset()'\ntorch.__version__\n"))
    assert sorted(name for _, name in seen) == ["torch._C", "torch._C", "torch._dynamo"]
