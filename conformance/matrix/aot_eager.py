"""Backend ``aot_eager``: ``torch.compile(program, backend="aot_eager", fullgraph=True)``."""

from .backend import Backend, torch_compile

BACKEND = Backend(name="aot_eager", group="torch.compile", title="aot_eager", prepare=torch_compile("aot_eager"),
                  dynamo=True)
