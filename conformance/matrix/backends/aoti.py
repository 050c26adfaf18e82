"""Backend ``aoti``: AOTInductor — non-strict ``torch.export``, ``torch._inductor.aoti_compile_and_package``,
``torch._inductor.aoti_load_package``.

The loaded package runs on its own deserialized copy of an attribute object, so the object the cell holds never
changes (``state_visible=False``: outputs are compared, not states), and int/float results come back as 0-dim
tensors. Loading needs the class's C++ library loaded in the process, which the plugin's ``--torchbind-load``
has done.
"""

import os
import tempfile

import torch

from . import Backend, export_program, export_script
from ...engine import torch_api


def prepare(scenario, module, example_args):
    ep = export_program(scenario, module, example_args, strict=False)
    with tempfile.TemporaryDirectory(prefix="torchbind-aoti-") as tmp:
        path = torch_api.aoti_compile_and_package(ep, package_path=os.path.join(tmp, "program.pt2"))
        return torch_api.aoti_load_package(path)


BACKEND = Backend(name="aoti", group="AOTInductor", title="AOTInductor", prepare=prepare,
                  ahead_of_time=True, state_visible=False, scalars_as_tensors=True, swaps_attribute=False,
                  no_backward="AOTInductor compiles an inference-only program (torch._inductor.aoti_compile_and_package "
                              "packages the forward graph; the loaded package's outputs never require grad), so it "
                              "has no backward to compare", script=(
                      "import os, tempfile",
                      export_script(strict=False, name="exported"),
                      "package = torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join("
                      "tempfile.mkdtemp(), 'program.pt2'))",
                      "program = torch._inductor.aoti_load_package(package)"))
