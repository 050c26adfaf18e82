"""Backend ``export``: non-strict ``torch.export.export(program, args, strict=False)``, run with ``ep.module()``."""

from . import Backend, export_program, export_script


def prepare(scenario, module, example_args):
    return export_program(scenario, module, example_args, strict=False).module()


BACKEND = Backend(name="export", group="export", title="non-strict", prepare=prepare, ahead_of_time=True,
                  script=(export_script(strict=False) + ".module()",))
