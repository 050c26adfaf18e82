"""Backend ``inductor``: ``torch.compile(program, backend="inductor", fullgraph=True)``."""

from . import Backend, compile_script, torch_compile

BACKEND = Backend(name="inductor", group="torch.compile", title="inductor", prepare=torch_compile("inductor"),
                  script=compile_script("inductor"), dynamo=True)
