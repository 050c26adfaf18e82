"""Backend ``eager``: ``torch.compile(program, backend="eager", fullgraph=True)``."""

from .backend import Backend, torch_compile

BACKEND = Backend(name="eager", group="torch.compile", title="eager", prepare=torch_compile("eager"),
                  dynamo=True)
