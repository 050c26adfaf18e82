"""Backend ``export_strict``: strict ``torch.export.export(program, args, strict=True)`` (traced by dynamo), run
with ``ep.module()``."""

from .backend import Backend, export_program


def prepare(scenario, module, example_args):
    return export_program(scenario, module, example_args, strict=True).module()


BACKEND = Backend(name="export_strict", group="export", title="strict", prepare=prepare,
                  ahead_of_time=True)
