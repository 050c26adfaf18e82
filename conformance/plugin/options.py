"""The plugin's command-line options and ini keys, and their validation into a :class:`RunOptions`.

Every bad value is a ``pytest.UsageError`` (exit status 4) naming the option and what is accepted, raised before
any test runs.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest

from .baseline import BaselineError, Entry, load_baseline
from ..core.files import check_writable
from ..process import DEFAULT_TIMEOUT, ITEM_LIMIT_FACTOR, isolation_available
from ..reports import FORMATS
from ..core.settings import DEFAULT_EXAMPLES, Settings

__all__ = ["add_options", "check_ini_keys", "requested", "claim_gate_arguments", "gate_selected", "GATE", "RunOptions", "read_options", "parse_size",
           "default_memory_limit"]


def add_options(parser: pytest.Parser, check_names: list[str], backend_names: list[str]) -> None:
    """Register the ``--torchbind-*`` options and ``torchbind_*`` ini keys (see docs/reference/options.md)."""
    group = parser.getgroup("torchbind", "TorchBind class conformance (torchbind-conformance)")
    group.addoption("--torchbind-class", action="append", default=[], metavar="NS::CLS",
                    help="TorchBind class to check against its fake class; NS::* selects a whole namespace. A "
                         "Python custom class (opaque object) by its torch name, module.QualName, or an fnmatch "
                         "pattern on those names. Repeatable. Ini: torchbind_classes.")
    group.addoption("--torchbind-load", action="append", default=[], metavar="SPEC",
                    help="load before collection, in order: a .so (torch.ops.load_library), a .py file or dotted "
                         "module (imported), or module:function (imported, then called). Repeatable. "
                         "Ini: torchbind_load (a file there is relative to the ini file's directory).")
    group.addoption("--torchbind-checks", default=None, metavar="NAMES",
                    help="comma-separated check names to run (default: all). "
                         f"Available: {', '.join(check_names)}.")
    group.addoption("--torchbind-backends", default=None, metavar="NAMES",
                    help="comma-separated coverage-matrix backends (default: all): "
                         f"{', '.join(backend_names)}. Ini: torchbind_backends.")
    group.addoption("--torchbind-report", action="append", default=[], metavar="PATH",
                    help="write the coverage-matrix report to PATH (.md, .json or .html). Repeatable: one report "
                         "per option (replaces the ini's). Ini: torchbind_report (paths, relative to the ini "
                         "file's directory).")
    group.addoption("--torchbind-baseline", default=None, metavar="PATH",
                    help="JSON file of known failures (test id -> reason): listed tests are strict xfails; an "
                         "empty value switches off the ini's baseline. Ini: torchbind_baseline (a path relative to "
                         "the ini file's directory).")
    group.addoption("--torchbind-accept", action="store_true", default=False,
                    help="rewrite the --torchbind-baseline file from this run's failures, keeping their reasons.")
    group.addoption("--torchbind-timeout", default=None, metavar="SECONDS",
                    help=f"stop a call into the class's code (constructor, method, __obj_flatten__, pickling, custom "
                         f"op) that runs longer than this and fail the item as a hang; a matrix cell (compiling "
                         f"included) gets this much as a whole, another item {ITEM_LIMIT_FACTOR}x as long. 0: no "
                         f"limit (default {DEFAULT_TIMEOUT:g}). "
                         "Ini: torchbind_timeout.")
    group.addoption("--torchbind-isolation", default=None, choices=("process", "none"),
                    help="process: run the checks in a worker process, so a crash (SIGSEGV, abort) or a hang in C++ "
                         "code fails one item and the run goes on (default on Linux); none: in the pytest process "
                         "(no crash protection, no timeout). Ini: torchbind_isolation.")
    group.addoption("--torchbind-memory-limit", default=None, metavar="SIZE",
                    help="kill an isolation worker process whose own resident memory exceeds SIZE (e.g. 12GiB, "
                         "512MiB, or bytes) and fail the item it was running; 0: no limit (default: half of the "
                         "physical memory). Ini: torchbind_memory_limit.")
    group.addoption("--torchbind-device", default=None, metavar="DEVICE",
                    help="the device of the example objects' tensors and the programs' inputs: cpu (default) or "
                         "cuda (cuda:N); the report is labelled with it. Ini: torchbind_device.")
    group.addoption("--torchbind-examples", type=int, default=None, metavar="N",
                    help=f"hypothesis examples per class for the differential test (default {DEFAULT_EXAMPLES}). "
                         "Ini: torchbind_examples.")
    group.addoption("--torchbind-reuse", default=None, choices=("on", "off"),
                    help="on: an item that passed, was skipped (an unsupported matrix cell) or failed as the "
                         "baseline expects is not run again while nothing its verdict depends on changed "
                         "(libraries, fakes, schemas, examples, torch, the plugin, the plugin's options, torch's "
                         "compile environment variables, hypothesis's seed and profile, your modules' whole files, "
                         "its baseline entry); its verdict is kept in pytest's cache (.pytest_cache; --cache-clear forgets it). "
                         "A failure the baseline does not list always runs again. Default off. Ini: torchbind_reuse.")
    group.addoption("--torchbind-check-repro", default=None, choices=("on", "off"),
                    help="on (default): before a failure prints its reproducer, run the script in a fresh "
                         "interpreter from an empty directory and say whether it reproduces (one that does not "
                         "shows a divergence that depends on state outside the object); off: print it unchecked "
                         "(each check starts an interpreter that imports torch). Ini: torchbind_check_repro.")
    parser.addini("torchbind_check_repro", "on (default) or off: run failures' reproducers in a fresh interpreter",
                  default="")
    parser.addini("torchbind_device", "device of the examples' tensors and program inputs (cpu, cuda)", default="")
    parser.addini("torchbind_reuse", "on: reuse settled verdicts whose inputs did not change (off: default)",
                  default="")
    parser.addini("torchbind_classes", "TorchBind classes to check (NS::CLS or NS::*)", type="linelist",
                  default=[])
    parser.addini("torchbind_load", "libraries / modules to load before collection", type="linelist", default=[])
    parser.addini("torchbind_backends", "coverage-matrix backends (comma-separated)", default="")
    # type="paths": pytest resolves them against the ini file's directory, as it does its own path keys.
    parser.addini("torchbind_report", "coverage-matrix report paths (.md, .json, .html)", type="paths", default=[])
    parser.addini("torchbind_baseline", "known-failures baseline file (JSON)", type="paths", default=[])
    parser.addini("torchbind_examples", "hypothesis examples per class for the differential test", default="")
    parser.addini("torchbind_timeout", "seconds a call into the class's code may take (0: no limit)", default="")
    parser.addini("torchbind_isolation", "process (default on Linux) or none", default="")
    parser.addini("torchbind_memory_limit", "own resident memory an isolation worker may hold (e.g. 12GiB; 0: no "
                  "limit)", default="")


#: Every ini key :func:`add_options` registers (``tests/integration/test_docs.py`` keeps the two in step).
INI_KEYS = ("torchbind_classes", "torchbind_load", "torchbind_backends", "torchbind_report", "torchbind_baseline",
            "torchbind_examples", "torchbind_timeout", "torchbind_isolation", "torchbind_memory_limit",
            "torchbind_device", "torchbind_reuse", "torchbind_check_repro")


def check_ini_keys(config: pytest.Config) -> None:
    """Refuse an ini key that looks like one of the plugin's but is not (``torchbind_class`` for
    ``torchbind_classes``): pytest would only warn about it and the gate would silently not run. Raises
    ``pytest.UsageError`` naming the closest key. Costs nothing: asks pytest which keys of the ini file it
    already parsed no plugin registered (``Config._get_unknown_ini_keys``, what its own ``--strict-config``
    uses; pytest has no public way to list them)."""
    import difflib

    unknown = getattr(config, "_get_unknown_ini_keys", None)
    for key in sorted(unknown() if unknown is not None else ()):
        if key.startswith("torchbind"):
            close = difflib.get_close_matches(key, INI_KEYS, n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}?" if close else f"the plugin's keys are {', '.join(INI_KEYS)}"
            raise pytest.UsageError(f"unknown ini key {key!r} in {config.inipath}: {hint}")


#: The gate's name on the command line: ``pytest torchbind``, ``pytest 'torchbind[ns.Cls]'``,
#: ``pytest 'torchbind[ns.Cls]::matrix'`` (a path-like argument naming its items by node id prefix).
GATE = "torchbind"


def claim_gate_arguments(config: pytest.Config) -> list[str]:
    """Take the arguments that name the gate (``torchbind``, ``torchbind[ns.Cls]...``; not an existing path) out
    of ``config.args``, so pytest does not look for them as files, and return them (node id prefixes of the items
    to run). Call it in every process (pytest-xdist workers re-read the command line)."""
    def names_gate(arg: str) -> bool:
        head = arg.split("::")[0]
        if head != GATE and not head.startswith(GATE + "["):
            return False
        return not (Path(str(config.invocation_params.dir)) / head).exists()

    named = [arg for arg in config.args if names_gate(arg)]
    if named:
        config.args[:] = [arg for arg in config.args if arg not in named]
    return named


def gate_selected(config: pytest.Config, named: list[str]) -> bool:
    """Whether this run collects the conformance items, the way pytest users expect of any tests: when the run
    names them — a gate argument (``named``, :func:`claim_gate_arguments`), ``--torchbind-class`` on the command
    line, or a ``-m`` expression that mentions ``torchbind`` — or names no paths at all (``pytest`` with the ini
    keys runs the gate beside the ``testpaths``). A run of one's own file, directory or node id does not."""
    if named or config.getoption("torchbind_class"):
        return True
    if GATE in (getattr(config.option, "markexpr", "") or ""):
        return True
    return config.args_source is not pytest.Config.ArgsSource.ARGS


def requested(config: pytest.Config) -> bool:
    """Whether the run asks for the plugin: some ``--torchbind-*`` option differs from its default, or some
    ``torchbind_*`` ini key is set. Only then does the plugin import torch and its engine (and validate the
    options); a run that asks for nothing pays nothing."""
    for name, value in vars(config.option).items():
        if name.startswith("torchbind_") and value not in (None, False, [], ""):
            return True
    return any(config.getini(name) for name in INI_KEYS)


@dataclasses.dataclass
class RunOptions:
    """The validated options of a run: ``selectors`` (``--torchbind-class``), ``load`` specs, the engine's
    :class:`~conformance.core.settings.Settings`, ``reports`` (every report path, absolute; :attr:`report` is the
    first), ``baseline`` path (absolute) and its ``known`` failures
    (test id -> reason), ``accept``, ``timeout`` (seconds per call, 0: none), ``isolation``
    (``"process"``/``"none"``), ``memory_limit`` (bytes of its own resident memory an isolation worker may
    hold, 0: none) and ``reuse`` (``--torchbind-reuse=on``: settled verdicts whose key did not change are not run
    again)."""

    selectors: list[str]
    load: list[str]
    settings: Settings
    reports: list[Path] = dataclasses.field(default_factory=list)
    baseline: Path | None = None
    known: dict[str, Entry] = dataclasses.field(default_factory=dict)
    accept: bool = False
    timeout: float = DEFAULT_TIMEOUT
    isolation: str = "none"
    memory_limit: int = 0
    reuse: bool = False

    @property
    def report(self) -> Path | None:
        """The first of :attr:`reports` (``None`` when no report was asked for)."""
        return self.reports[0] if self.reports else None


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 10 ** 3, "m": 1 << 20, "mib": 1 << 20, "mb": 10 ** 6,
          "g": 1 << 30, "gib": 1 << 30, "gb": 10 ** 9, "t": 1 << 40, "tib": 1 << 40, "tb": 10 ** 12}


def parse_size(text: str) -> int:
    """Bytes of a size such as ``12GiB``, ``512MiB``, ``1.5G`` or ``1000000`` (case-insensitive; ``K``, ``M``,
    ``G``, ``T`` and ``KiB`` ... ``TiB`` are powers of 1024, ``KB`` ... ``TB`` powers of 1000). Raises
    ``ValueError`` for anything else, or a negative size."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*", text)
    if not match or match[2].lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match[1]) * _UNITS[match[2].lower()])


def default_memory_limit() -> int:
    """Half of the physical memory (``os.sysconf``), or 0 (no limit) where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 0


def _opt(config: pytest.Config, option: str, ini: str):
    return config.getoption(option) or config.getini(ini)


def read_options(config: pytest.Config, check_names: list[str], backend_names: list[str]) -> RunOptions:
    """Read and validate every option. Raises ``pytest.UsageError`` for an unknown check or backend, a bad
    number or size, an unsupported or unwritable report path, a malformed baseline, ``--torchbind-accept`` without
    a baseline, or process isolation where ``os.fork`` is unavailable."""
    fields: dict = {}  # of the frozen Settings, built once everything is read
    only = config.getoption("torchbind_checks")
    if only:
        unknown = sorted(set(only.split(",")) - set(check_names))
        if unknown:
            raise pytest.UsageError(f"--torchbind-checks: unknown check(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(sorted(check_names))}")
        fields["checks"] = tuple(n for n in check_names if n in only.split(","))
    backends = _opt(config, "torchbind_backends", "torchbind_backends")
    if backends:
        chosen = tuple(n.strip() for n in backends.split(",") if n.strip())
        unknown = [n for n in chosen if n not in backend_names]
        if unknown:
            raise pytest.UsageError(f"--torchbind-backends: unknown backend(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(backend_names)}")
        fields["backends"] = chosen
    # The command line wins even when it says 0 (a falsy value must not fall through to the ini key).
    examples = config.getoption("torchbind_examples")
    if examples is None:
        examples = config.getini("torchbind_examples") or None
    if examples is not None:
        try:
            fields["examples"] = int(examples)
        except ValueError:
            raise pytest.UsageError(f"torchbind_examples: expected an integer, got {examples!r}") from None
        if fields["examples"] < 1:
            raise pytest.UsageError(f"--torchbind-examples / torchbind_examples must be at least 1, got {examples!r} "
                                    "(it counts the random call sequences of the differential test, run after its "
                                    "explicit two-call sequences; to leave the test out, use --torchbind-checks)")
    options = RunOptions(
        selectors=list(config.getoption("torchbind_class")) or list(config.getini("torchbind_classes")),
        load=list(config.getoption("torchbind_load")) or ini_load_specs(config),
        settings=Settings(), accept=config.getoption("torchbind_accept"))
    controller = not hasattr(config, "workerinput")
    if controller:
        options.reports = _writable_reports(config)
    baseline = _baseline_path(config)
    if options.accept and not baseline:
        raise pytest.UsageError("--torchbind-accept needs --torchbind-baseline=PATH (the file to write)")
    if baseline:
        options.baseline = baseline
        try:
            options.known = load_baseline(options.baseline, missing_ok=options.accept)
        except BaselineError as exc:
            raise pytest.UsageError(f"--torchbind-baseline: {exc}") from None
    raw = _opt(config, "torchbind_timeout", "torchbind_timeout")
    try:
        options.timeout = DEFAULT_TIMEOUT if raw in (None, "") else float(raw)
    except ValueError:
        raise pytest.UsageError(f"--torchbind-timeout: expected a number of seconds, got {raw!r}") from None
    if not options.timeout >= 0:
        raise pytest.UsageError(f"--torchbind-timeout: must be 0 (no limit) or positive, got {raw!r}")
    mode = _opt(config, "torchbind_isolation", "torchbind_isolation") or (
        "process" if isolation_available() else "none")
    if mode not in ("process", "none"):
        raise pytest.UsageError(f"torchbind_isolation: expected process or none, got {mode!r}")
    if mode == "process" and not isolation_available():
        raise pytest.UsageError("--torchbind-isolation=process needs os.fork on Linux; use "
                                "--torchbind-isolation=none here")
    options.isolation = mode
    raw = _opt(config, "torchbind_memory_limit", "torchbind_memory_limit")
    try:
        options.memory_limit = default_memory_limit() if raw in (None, "") else parse_size(raw)
    except ValueError:
        raise pytest.UsageError(f"--torchbind-memory-limit: expected a size such as 12GiB, 512MiB or a number of "
                                f"bytes (0: no limit), got {raw!r}") from None
    fields["device"] = _device(_opt(config, "torchbind_device", "torchbind_device") or "cpu")
    reuse = _opt(config, "torchbind_reuse", "torchbind_reuse") or "off"
    if reuse not in ("on", "off"):
        raise pytest.UsageError(f"torchbind_reuse: expected on or off, got {reuse!r}")
    options.reuse = reuse == "on"
    check_repro = _opt(config, "torchbind_check_repro", "torchbind_check_repro") or "on"
    if check_repro not in ("on", "off"):
        raise pytest.UsageError(f"torchbind_check_repro: expected on or off, got {check_repro!r}")
    fields["check_reproducers"] = check_repro == "on"
    if options.reuse and getattr(config, "cache", None) is None:
        raise pytest.UsageError("--torchbind-reuse=on (ini torchbind_reuse) keeps verdicts in pytest's cache, which "
                                "this run switched off (-p no:cacheprovider): enable the cache provider or use "
                                "--torchbind-reuse=off")
    options.settings = Settings(**fields)
    return options


def replaced_ini_lists(config: pytest.Config) -> list[str]:
    """One warning per list option given on the command line while the ini also sets it: the command line's list
    replaces the ini's (pytest's rule for options), which silently drops what the ini loads or selects — a new
    user's ``--torchbind-load=mylib.broken:install`` dropped the ini's examples and strategies, and the gate
    missed the bugs they exercise."""
    out = []
    for option, ini, flag in (("torchbind_load", "torchbind_load", "--torchbind-load"),
                              ("torchbind_class", "torchbind_classes", "--torchbind-class")):
        given, configured = list(config.getoption(option) or ()), list(config.getini(ini) or ())
        dropped = [v for v in configured if v not in given]
        if given and dropped:
            out.append(f"{flag} on the command line replaces the ini's {ini} list, so this run leaves out "
                       f"{', '.join(dropped)}; repeat those on the command line to keep them")
    return out


def _device(raw: str) -> str:
    """The ``--torchbind-device`` value, checked: a device torch knows, of a type this torch can use here.
    Raises ``pytest.UsageError`` for anything else (cuda where torch has no CUDA device)."""
    import torch

    try:
        device = torch.device(raw)
    except (RuntimeError, TypeError):
        raise pytest.UsageError(f"--torchbind-device={raw}: not a device torch knows (use cpu or cuda)") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError(f"--torchbind-device={raw}: this torch has no CUDA device here "
                                f"(torch {torch.__version__}, torch.cuda.is_available() is False)")
    if device.type not in ("cpu", "cuda"):
        raise pytest.UsageError(f"--torchbind-device={raw}: only cpu and cuda are supported")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise pytest.UsageError(f"--torchbind-device={raw}: there are {torch.cuda.device_count()} CUDA device(s)")
    return str(device)


def _invocation_dir(config: pytest.Config) -> Path:
    return Path(str(config.invocation_params.dir))


def _ini_dir(config: pytest.Config) -> Path:
    """The directory relative paths in the ini file are taken from: the ini file's own (pytest's rule for its
    ``paths`` keys), or the invocation directory without an ini file."""
    return Path(str(config.inipath)).parent if config.inipath is not None else _invocation_dir(config)


_FILE_SUFFIXES = (".so", ".dylib", ".dll", ".py")


def ini_load_specs(config: pytest.Config) -> list[str]:
    """The ini's ``torchbind_load`` specs, a file among them (``lib/libfoo.so``, ``fakes.py``,
    ``fakes.py:install``) made absolute against the ini file's directory when it is there, as pytest resolves the
    paths of its own ini keys; a module spec, or a file not found there, as written (:mod:`conformance.process.loading`
    then tries the invocation directory and the rootdir). Raises nothing."""
    base, out = _ini_dir(config), []
    for spec in config.getini("torchbind_load"):
        head, sep, func = spec.rpartition(":")
        target, tail = (head, sep + func) if sep and head.endswith(".py") else (spec, "")
        path = Path(target)
        named_file = path.suffix in _FILE_SUFFIXES or ".so." in path.name
        out.append(str(base / path) + tail if named_file and not path.is_absolute() and (base / path).is_file()
                   else spec)
    return out


def _baseline_path(config: pytest.Config) -> Path | None:
    """The baseline file, absolute: ``--torchbind-baseline`` against the invocation directory (an empty value:
    none, switching off the ini's), else the ini's ``torchbind_baseline`` against the ini file's directory.
    Raises ``pytest.UsageError`` for an ini value naming several files."""
    given = config.getoption("torchbind_baseline")
    if given is not None:
        return (_invocation_dir(config) / given).resolve() if given else None
    paths = config.getini("torchbind_baseline")
    if len(paths) > 1:
        raise pytest.UsageError(f"torchbind_baseline in {config.inipath}: one file, got {len(paths)}: "
                                f"{', '.join(map(str, paths))} (quote a path that holds spaces)")
    return Path(paths[0]).resolve() if paths else None


def _writable_reports(config: pytest.Config) -> list[Path]:
    """Every report path, absolute and checked (:func:`_writable_report`), once each: the ``--torchbind-report``
    options against the invocation directory, else the ini's ``torchbind_report`` paths against the ini file's
    directory. Raises ``pytest.UsageError`` for a bad one."""
    given = config.getoption("torchbind_report")
    if given:
        paths = [(_invocation_dir(config) / p, p) for p in given if p]
    else:
        paths = [(Path(p), str(p)) for p in config.getini("torchbind_report")]
    out: list[Path] = []
    for path, text in paths:
        checked = _writable_report(path, text)
        if checked not in out:
            out.append(checked)
    return out


def _writable_report(path: Path, report: str) -> Path:
    """The absolute report path, checked at configure time: a supported suffix, and a directory that exists and
    accepts a new file (nothing is created). ``report``: the path as the user wrote it, for messages. Raises
    ``pytest.UsageError`` otherwise."""
    path = Path(path).resolve()
    if path.suffix.lower() not in FORMATS:
        raise pytest.UsageError(f"--torchbind-report={report}: unsupported format {path.suffix or '(none)'}; "
                                f"use {', '.join(FORMATS)}")
    try:
        check_writable(path)  # creates nothing: a run that writes no report leaves no empty file behind
    except OSError as exc:
        raise pytest.UsageError(f"--torchbind-report={report}: cannot write the report: {exc}") from None
    return path
