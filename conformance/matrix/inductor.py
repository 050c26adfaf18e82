"""Backend ``inductor``: ``torch.compile(program, backend="inductor", fullgraph=True)``."""

from .backend import Backend, torch_compile

BACKEND = Backend(name="inductor", group="torch.compile", title="inductor", prepare=torch_compile("inductor"),
                  dynamo=True)
