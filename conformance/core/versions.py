"""The torch versions this plugin is tested with, and the check that warns on a newer one.

The plugin requires ``torch>=2.13`` with no upper bound (``pyproject.toml``): installing it never replaces a torch
that is there. CI runs the whole suite on 2.13 and the main job, torch's own test classes and the checks' tests on
2.14 and 2.15 (``.ci/run``, ``tox.ini``; the files both run are listed once, in ``tests/cross-version.args``). A
torch newer than :data:`NEWEST_TESTED` may change what torch enforces or fixes (the coverage matrix may then XPASS
baselined cells): the run goes on, with one warning.
"""

from __future__ import annotations

from packaging.version import Version

__all__ = ["TESTED", "NEWEST_TESTED", "torch_release", "untested_warning"]

#: ``major.minor`` releases CI runs on.
TESTED = ("2.13", "2.14", "2.15")
NEWEST_TESTED = Version(TESTED[-1])


def torch_release(version: str) -> Version:
    """The release of a torch version string without its local build label: ``2.14.1+cu130`` -> ``2.14.1``.
    Raises ``packaging.version.InvalidVersion`` for a string that is not a version."""
    return Version(Version(version).public)


def untested_warning(version: str) -> str | None:
    """One line when ``version`` (``torch.__version__``) is newer than the newest ``major.minor`` tested, else
    ``None``. A version that does not parse is not warned about (a source build says what it is)."""
    try:
        release = torch_release(version)
    except ValueError:
        return None
    if (release.major, release.minor) > (NEWEST_TESTED.major, NEWEST_TESTED.minor):
        return (f"torch {version} is newer than the newest torch torchbind-conformance was tested with "
                f"({'/'.join(TESTED)}): checks may report what this torch changed; please report surprises")
    return None
