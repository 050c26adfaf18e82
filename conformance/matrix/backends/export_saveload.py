"""Backend ``export_saveload``: non-strict export, then ``torch.export.save`` / ``torch.export.load`` through
an in-memory buffer, run with the loaded program's ``module()``."""

from __future__ import annotations

import io
import logging

import torch

from . import Backend, export_program, export_script


def prepare(scenario, module, example_args):
    ep = export_program(scenario, module, example_args, strict=False)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    return load_program(buffer).module()


def load_program(buffer: io.BytesIO) -> torch.export.ExportedProgram:
    """``torch.export.load(buffer)``; when it fails after logging why ("... check the warnings above"), the
    ``RuntimeError`` raised keeps torch's message and adds the error torch logged."""
    # torch.export.load logs its weights_only fallback with a malformed format string (a logging error
    # printed to stderr in torch 2.13); the load's own outcome is what the cell reports.
    logger = logging.getLogger("torch._export.serde.serialize")
    level = logger.level
    logger.setLevel(logging.ERROR)
    # torch.export.load logs the deserialization error it met (logger "torch.export", with exc_info) and raises
    # "... Please check the warnings above": keep that error, so the cell says what torch said.
    seen = _Records()
    export_logger = logging.getLogger("torch.export")
    export_logger.addHandler(seen)
    try:
        return torch.export.load(buffer)
    except RuntimeError as exc:
        cause = seen.error()
        if cause is None or "warnings above" not in str(exc):
            raise
        # torch's own message first (the limitation table matches on it), then the error it logged.
        raise RuntimeError(f"{str(exc).strip()} [the error torch.export.load logged: {type(cause).__name__}: "
                           f"{cause}]") from cause
    finally:
        export_logger.removeHandler(seen)
        logger.setLevel(level)


class _Records(logging.Handler):
    """Keeps the exceptions logged (``exc_info``) while it is attached."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])

    def error(self) -> BaseException | None:
        """The last exception logged, or ``None``."""
        return self.errors[-1] if self.errors else None


BACKEND = Backend(name="export_saveload", group="export", title="save/load", prepare=prepare,
                  ahead_of_time=True, script=(
                      "import io",
                      export_script(strict=False, name="exported"),
                      "buffer = io.BytesIO()", "torch.export.save(exported, buffer)", "buffer.seek(0)",
                      "program = torch.export.load(buffer).module()"))
