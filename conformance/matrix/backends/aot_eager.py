"""Backend ``aot_eager``: ``torch.compile(program, backend="aot_eager", fullgraph=True)``."""

from . import Backend, compile_script, torch_compile

BACKEND = Backend(name="aot_eager", group="torch.compile", title="aot_eager", prepare=torch_compile("aot_eager"),
                  script=compile_script("aot_eager"), dynamo=True)
