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
from ..engine.loading import parse_spec
from ..process import DEFAULT_TIMEOUT, ITEM_LIMIT_FACTOR, isolation_available
from ..reports import ReportFormatError, report_format
from ..core.settings import DEFAULT_EXAMPLES, Settings

__all__ = ["Option", "OPTIONS", "INI_KEYS", "given", "add_options", "claim_run", "check_ini_keys", "requested",
           "claim_gate_arguments", "gate_selected", "GATE", "RunOptions", "read_options", "parse_size",
           "default_memory_limit"]


@dataclasses.dataclass(frozen=True)
class Option:
    """One ``--torchbind-<name>`` option and its ini twin: the one place each is spelled. :func:`add_options`
    registers both, :data:`INI_KEYS` lists the twins, :func:`given` reads a value (the command line's, else the
    ini's) and :func:`read_options` validates it (``choices``: the values accepted from either place).
    ``about``: what the option does; :attr:`help` adds the ini key (``Ini: torchbind_x``, with ``ini_note`` in
    parentheses when given). ``ini_type``: pytest's ``addini`` type (``None``: a string; ``"paths"`` are resolved
    against the ini file's directory by pytest)."""

    name: str
    about: str
    metavar: str | None = None
    action: str | None = None  # "append" (repeatable, default []) or "store_true"; None: a value (default None)
    choices: tuple[str, ...] | None = None
    type: type | None = None
    ini: str | None = None
    ini_help: str = ""
    ini_type: str | None = None
    ini_note: str = ""

    @property
    def help(self) -> str:
        """The ``--help`` text: :attr:`about`, then the ini key when the option has one (``Ini: torchbind_load (a
        file there is relative to the ini file's directory).``)."""
        if self.ini is None:
            return self.about
        note = f" ({self.ini_note})" if self.ini_note else ""
        return f"{self.about} Ini: {self.ini}{note}."

    @property
    def flag(self) -> str:
        return f"--torchbind-{self.name}"

    @property
    def dest(self) -> str:
        return "torchbind_" + self.name.replace("-", "_")

    def register(self, group, parser: pytest.Parser, names: dict[str, str]) -> None:
        """Add the option to ``group`` and its ini key to ``parser``; ``names``: what ``{checks}`` and
        ``{backends}`` in the help stand for."""
        kwargs: dict = {"action": self.action, "default": {"append": [], "store_true": False}.get(self.action)}
        kwargs.update({k: v for k, v in (("metavar", self.metavar), ("choices", self.choices), ("type", self.type))
                       if v is not None})
        text = self.help
        for placeholder, value in names.items():
            text = text.replace("{" + placeholder + "}", value)
        if self.action is None:
            del kwargs["action"]
        group.addoption(self.flag, help=text, **kwargs)
        if self.ini is not None:
            parser.addini(self.ini, self.ini_help, type=self.ini_type,
                          default=[] if self.ini_type in ("linelist", "paths") else "")


_ON_OFF = ("on", "off")

#: Every option, in ``--help`` order (docs/reference/options.md describes each).
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("class", metavar="NS::CLS", action="append", ini="torchbind_classes",
           ini_help="TorchBind classes to check (NS::CLS or NS::*)", ini_type="linelist",
           about="TorchBind class to check against its fake class; NS::* selects a whole namespace. A Python custom "
                 "class (opaque object) by its torch name, module.QualName (of a class a .py file loaded by "
                 "path registers: STEM.QualName), or an fnmatch pattern on those names. Repeatable."),
    Option("load", metavar="SPEC", action="append", ini="torchbind_load",
           ini_help="libraries / modules to load before collection", ini_type="linelist",
           ini_note="a file there is relative to the ini file's directory",
           about="load before collection, in order: a .so (torch.ops.load_library), a .py file or dotted module "
                 "(imported), or module:function / file.py:function (imported, then called). A .py file is imported "
                 "as the module named by its stem (path/to/fakes.py: fakes, its classes fakes.Cls) unless another "
                 "module has that name; then as _torchbind_load_STEM_HEX (HEX: from the file's resolved path). "
                 "Repeatable."),
    Option("checks", metavar="NAMES",
           about="comma-separated check names to run (default: all). Available: {checks}."),
    Option("backends", metavar="NAMES", ini="torchbind_backends", ini_help="coverage-matrix backends (comma-separated)",
           about="comma-separated coverage-matrix backends (default: all): {backends}."),
    Option("report", metavar="PATH", action="append", ini="torchbind_report", ini_type="paths",
           ini_help="coverage-matrix report paths (.md, .json, .html)",
           ini_note="paths, relative to the ini file's directory",
           about="write the coverage-matrix report to PATH (.md, .json or .html). Repeatable: one report per option "
                 "(replaces the ini's)."),
    Option("baseline", metavar="PATH", ini="torchbind_baseline", ini_type="paths",
           ini_help="known-failures baseline file (JSON)", ini_note="a path relative to the ini file's directory",
           about="JSON file of known failures (test id -> reason): listed tests are strict xfails; an empty value "
                 "switches off the ini's baseline."),
    Option("accept", action="store_true",
           about="rewrite the --torchbind-baseline file from this run's failures, keeping their reasons."),
    Option("timeout", metavar="SECONDS", ini="torchbind_timeout",
           ini_help="seconds a call into the class's code may take (0: no limit)",
           about="stop a call into the class's code (constructor, method, __obj_flatten__, pickling, custom op) that "
                 "runs longer than this and fail the item as a hang; a matrix cell (compiling included) gets this "
                 f"much as a whole, another item {ITEM_LIMIT_FACTOR}x as long. 0: no limit (default "
                 f"{DEFAULT_TIMEOUT:g})."),
    Option("isolation", choices=("process", "none"), ini="torchbind_isolation",
           ini_help="process (default on Linux) or none",
           about="process: run the checks in a worker process, so a crash (SIGSEGV, abort) or a hang in C++ code "
                 "fails one item and the run goes on (default on Linux); none: in the pytest process (no crash "
                 "protection, no timeout)."),
    Option("memory-limit", metavar="SIZE", ini="torchbind_memory_limit",
           ini_help="own resident memory an isolation worker may hold (e.g. 12GiB; 0: no limit)",
           about="kill an isolation worker process whose own resident memory exceeds SIZE (e.g. 12GiB, 512MiB, or "
                 "bytes) and fail the item it was running; 0: no limit (default: half of the physical memory)."),
    Option("device", metavar="DEVICE", ini="torchbind_device",
           ini_help="device of the examples' tensors and program inputs (cpu, cuda)",
           about="the device of the example objects' tensors and the programs' inputs: cpu (default) or cuda "
                 "(cuda:N); the report is labelled with it."),
    Option("examples", metavar="N", type=int, ini="torchbind_examples",
           ini_help="hypothesis examples per class for the differential test",
           about=f"hypothesis examples per class for the differential test (default {DEFAULT_EXAMPLES})."),
    Option("reuse", choices=_ON_OFF, ini="torchbind_reuse",
           ini_help="on: reuse settled verdicts whose inputs did not change (off: default)",
           about="on: an item that passed, was skipped (an unsupported matrix cell) or failed as the baseline "
                 "expects is not run again while nothing its verdict depends on changed (libraries, fakes, schemas, "
                 "examples, torch, the plugin, the plugin's options, torch's compile environment variables, "
                 "hypothesis's seed and profile, your modules' whole files, its baseline entry); its verdict is kept "
                 "in pytest's cache (.pytest_cache; --cache-clear forgets it). A failure the baseline does not list "
                 "always runs again. Default off."),
    Option("check-repro", choices=_ON_OFF, ini="torchbind_check_repro",
           ini_help="on (default) or off: run failures' reproducers in a fresh interpreter",
           about="on (default): before a failure prints its reproducer, run the script in a fresh interpreter from "
                 "an empty directory and say whether it reproduces (one that does not shows a divergence that "
                 "depends on state outside the object); off: print it unchecked (each check starts an interpreter "
                 "that imports torch)."),
    Option("torch-defects", choices=("fail", "skip"), ini="torchbind_torch_defects",
           ini_help="fail (default) or skip: what a matrix cell that is torch's defect does",
           about="fail (default): a matrix cell whose failure is torch's (the fake agrees with C++ on every call of "
                 "the program, replayed as tracing makes them: rule matrix.torch-defect) fails its item, since the "
                 "library's users get that result on this torch (--torchbind-accept lists it with the defect's "
                 "signature); skip: such an item is skipped, so the gate holds the fakes alone."),
)}

#: Every ini key :func:`add_options` registers (``tests/integration/test_docs.py`` keeps them and the docs in step).
INI_KEYS = tuple(o.ini for o in OPTIONS.values() if o.ini is not None)


def add_options(parser: pytest.Parser, check_names: list[str], backend_names: list[str]) -> None:
    """Register the ``--torchbind-*`` options and ``torchbind_*`` ini keys of :data:`OPTIONS` (see
    docs/reference/options.md); ``check_names`` and ``backend_names`` are listed in the help."""
    group = parser.getgroup("torchbind", "TorchBind class conformance (torchbind-conformance)")
    names = {"checks": ", ".join(check_names), "backends": ", ".join(backend_names)}
    for option in OPTIONS.values():
        option.register(group, parser, names)


def given(config: pytest.Config, name: str):
    """The value of the option ``name`` (``"memory-limit"``): the command line's when it gives one (anything but
    ``None``, ``""`` or an empty list: a 0 given there wins), else its ini key's (pytest's rule: the command line
    replaces the ini). Raises nothing; validation is :func:`read_options`'s."""
    option = OPTIONS[name]
    value = config.getoption(option.dest)
    if option.ini is not None and (value is None or value == "" or value == []):
        return config.getini(option.ini)
    return value


def _choice(config: pytest.Config, name: str, default: str) -> str:
    """The option's value (:func:`given`, else ``default``), one of its ``choices``. Raises ``pytest.UsageError``
    naming its ini key and what it accepts."""
    option, value = OPTIONS[name], given(config, name) or default
    if value not in option.choices:
        raise pytest.UsageError(f"{option.ini}: expected {' or '.join(option.choices)}, got {value!r}")
    return value


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
    if named or config.getoption(OPTIONS["class"].dest):
        return True
    if GATE in (getattr(config.option, "markexpr", "") or ""):
        return True
    return config.args_source is not pytest.Config.ArgsSource.ARGS


def claim_run(config: pytest.Config) -> list[str] | None:
    """What ``pytest_configure`` asks first: check the ini keys (:func:`check_ini_keys`), take the gate arguments out
    of ``config.args`` (:func:`claim_gate_arguments`), and return them (maybe none) when this run collects the
    conformance items (:func:`requested` and :func:`gate_selected`), ``None`` when it does not. Raises
    ``pytest.UsageError`` for a misspelt ini key, or a gate argument in a run that selects no class."""
    check_ini_keys(config)
    named = claim_gate_arguments(config)
    if named and not requested(config):
        raise pytest.UsageError(f"{named[0]} names the TorchBind conformance gate, but this run selects no class: "
                                "add --torchbind-load=SPEC --torchbind-class=NS::CLS, or torchbind_load / "
                                "torchbind_classes in the ini file")
    return named if requested(config) and gate_selected(config, named) else None


def requested(config: pytest.Config) -> bool:
    """Whether the run asks for the plugin: some ``--torchbind-*`` option differs from its default, or some
    ``torchbind_*`` ini key is set. Only then does the plugin import torch and its engine (and validate the
    options); a run that asks for nothing pays nothing."""
    if any(config.getoption(option.dest) not in (None, False, [], "") for option in OPTIONS.values()):
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


def read_options(config: pytest.Config, check_names: list[str], backend_names: list[str]) -> RunOptions:
    """Read and validate every option. Raises ``pytest.UsageError`` for an unknown check or backend, a bad
    number or size, an unsupported or unwritable report path, a malformed baseline, ``--torchbind-accept`` without
    a baseline, or process isolation where ``os.fork`` is unavailable."""
    fields: dict = {}  # of the frozen Settings, built once everything is read
    only = given(config, "checks")
    if only:
        unknown = sorted(set(only.split(",")) - set(check_names))
        if unknown:
            raise pytest.UsageError(f"--torchbind-checks: unknown check(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(sorted(check_names))}")
        fields["checks"] = tuple(n for n in check_names if n in only.split(","))
    backends = given(config, "backends")
    if backends:
        chosen = tuple(n.strip() for n in backends.split(",") if n.strip())
        unknown = [n for n in chosen if n not in backend_names]
        if unknown:
            raise pytest.UsageError(f"--torchbind-backends: unknown backend(s) {', '.join(unknown)}; "
                                    f"available: {', '.join(backend_names)}")
        fields["backends"] = chosen
    examples = given(config, "examples")  # the command line wins even when it says 0
    if examples not in (None, ""):
        try:
            fields["examples"] = int(examples)
        except ValueError:
            raise pytest.UsageError(f"torchbind_examples: expected an integer, got {examples!r}") from None
        if fields["examples"] < 1:
            raise pytest.UsageError(f"--torchbind-examples / torchbind_examples must be at least 1, got {examples!r} "
                                    "(it counts the random call sequences of the differential test, run after its "
                                    "explicit two-call sequences; to leave the test out, use --torchbind-checks)")
    options = RunOptions(
        selectors=list(given(config, "class")),
        load=list(config.getoption(OPTIONS["load"].dest)) or ini_load_specs(config),
        settings=Settings(), accept=given(config, "accept"))
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
    raw = given(config, "timeout")
    try:
        options.timeout = DEFAULT_TIMEOUT if raw in (None, "") else float(raw)
    except ValueError:
        raise pytest.UsageError(f"--torchbind-timeout: expected a number of seconds, got {raw!r}") from None
    if not options.timeout >= 0:
        raise pytest.UsageError(f"--torchbind-timeout: must be 0 (no limit) or positive, got {raw!r}")
    mode = _choice(config, "isolation", "process" if isolation_available() else "none")
    if mode == "process" and not isolation_available():
        raise pytest.UsageError("--torchbind-isolation=process needs os.fork on Linux; use "
                                "--torchbind-isolation=none here")
    options.isolation = mode
    raw = given(config, "memory-limit")
    try:
        options.memory_limit = default_memory_limit() if raw in (None, "") else parse_size(raw)
    except ValueError:
        raise pytest.UsageError(f"--torchbind-memory-limit: expected a size such as 12GiB, 512MiB or a number of "
                                f"bytes (0: no limit), got {raw!r}") from None
    fields["device"] = _device(given(config, "device") or "cpu")
    options.reuse = _choice(config, "reuse", "off") == "on"
    fields["check_reproducers"] = _choice(config, "check-repro", "on") == "on"
    fields["torch_defects"] = _choice(config, "torch-defects", "fail")
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
    for option in (OPTIONS["load"], OPTIONS["class"]):
        ini = option.ini
        on_line, configured = list(config.getoption(option.dest) or ()), list(config.getini(ini) or ())
        dropped = [v for v in configured if v not in on_line]
        if on_line and dropped:
            out.append(f"{option.flag} on the command line replaces the ini's {ini} list, so this run leaves out "
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


def ini_load_specs(config: pytest.Config) -> list[str]:
    """The ini's ``torchbind_load`` specs, a file among them (``lib/libfoo.so``, ``fakes.py``,
    ``fakes.py:install``) made absolute against the ini file's directory when it is there, as pytest resolves the
    paths of its own ini keys; a module spec, or a file not found there, as written (:mod:`conformance.process.loading`
    then tries the invocation directory and the rootdir). Raises nothing."""
    base, out = _ini_dir(config), []
    for spec in config.getini(OPTIONS["load"].ini):
        kind, target, func = parse_spec(spec)  # the loader's own reading of the spec
        path = Path(target)
        named_file = kind != "module" and not path.is_absolute() and (base / path).is_file()
        out.append(str(base / path) + (f":{func}" if func else "") if named_file else spec)
    return out


def _baseline_path(config: pytest.Config) -> Path | None:
    """The baseline file, absolute: ``--torchbind-baseline`` against the invocation directory (an empty value:
    none, switching off the ini's), else the ini's ``torchbind_baseline`` against the ini file's directory.
    Raises ``pytest.UsageError`` for an ini value naming several files."""
    option = OPTIONS["baseline"]
    on_line = config.getoption(option.dest)
    if on_line is not None:
        return (_invocation_dir(config) / on_line).resolve() if on_line else None
    paths = config.getini(option.ini)
    if len(paths) > 1:
        raise pytest.UsageError(f"torchbind_baseline in {config.inipath}: one file, got {len(paths)}: "
                                f"{', '.join(map(str, paths))} (quote a path that holds spaces)")
    return Path(paths[0]).resolve() if paths else None


def _writable_reports(config: pytest.Config) -> list[Path]:
    """Every report path, absolute and checked (:func:`_writable_report`), once each: the ``--torchbind-report``
    options against the invocation directory, else the ini's ``torchbind_report`` paths against the ini file's
    directory. Raises ``pytest.UsageError`` for a bad one."""
    option = OPTIONS["report"]
    on_line = config.getoption(option.dest)
    if on_line:
        paths = [(_invocation_dir(config) / p, p) for p in on_line if p]
    else:
        paths = [(Path(p), str(p)) for p in config.getini(option.ini)]
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
    try:
        report_format(path, f"--torchbind-report={report}")
    except ReportFormatError as exc:
        raise pytest.UsageError(str(exc)) from None
    try:
        check_writable(path)  # creates nothing: a run that writes no report leaves no empty file behind
    except OSError as exc:
        raise pytest.UsageError(f"--torchbind-report={report}: cannot write the report: {exc}") from None
    return path
