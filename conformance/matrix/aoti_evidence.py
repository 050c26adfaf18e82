"""The evidence the limitation table's ``custom-aoti-object`` entry reads off a failed AOTInductor cell
(:mod:`conformance.matrix.limitations`): while compiling, AOTInductor runs an op's fake kernel with ``None`` where
eager passes a Python custom class object. Kind-neutral, imports no kind."""

from __future__ import annotations

import os

__all__ = ["fake_kernel_got_none", "registered_fake_got_none"]


def _fake_got_none(exc: BaseException, scenario, fake_args) -> str | None:
    """What :func:`fake_kernel_got_none` and :func:`registered_fake_got_none` read off the frames of ``exc``:
    the first frame for which ``fake_args(frame, op)`` gives the arguments a fake kernel of the scenario's op was
    called with, holding ``None`` where eager passes the object (what AOTInductor hands it: ``_aoti_flatten_inputs``
    replaces every non-tensor input with ``None``); ``None`` when no such call is on the traceback."""
    op = getattr(scenario, "op", None)
    if op is None:
        return None
    tb = exc.__traceback__
    while tb is not None:
        args = fake_args(tb.tb_frame, op)
        position = op.positions[0]
        if args is not None and position < len(args) and args[position] is None:
            return (f"the fake kernel of {op.qualname} was called with None in place of the object (argument "
                    f"{position}) while AOTInductor compiled the program")
        tb = tb.tb_next
    return None


def _in_torch_file(frame, function: str, path: str) -> bool:
    return frame.f_code.co_name == function and frame.f_code.co_filename.replace(os.sep, "/").endswith(path)


def fake_kernel_got_none(exc: BaseException, scenario) -> str | None:
    """The evidence of ``custom-aoti-object``'s compile-time form for a ``torch.library.custom_op``: its fake
    kernel (torch's ``fake_impl`` wrapper in ``torch/_library/custom_ops.py``) was called with ``None`` for the
    object (:func:`_fake_got_none`)."""
    def fake_args(frame, op):
        if _in_torch_file(frame, "fake_impl", "torch/_library/custom_ops.py") \
                and getattr(frame.f_locals.get("self"), "_qualname", None) == op.qualname:
            return frame.f_locals.get("args") or ()
        return None

    return _fake_got_none(exc, scenario, fake_args)


def registered_fake_got_none(exc: BaseException, scenario) -> str | None:
    """The same for an op defined with ``Library.define`` whose fake kernel came from
    ``torch.library.register_fake``: torch calls that kernel through its ``inner`` wrapper in ``torch/library.py``
    (``_check_pystubs_once``), whose ``args`` hold ``None`` at the object's position."""
    def fake_args(frame, op):
        if _in_torch_file(frame, "inner", "torch/library.py") \
                and frame.f_locals.get("qualname") == op.qualname.split(".")[0]:
            return frame.f_locals.get("args") or ()
        return None

    return _fake_got_none(exc, scenario, fake_args)
