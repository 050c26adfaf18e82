"""Backend ``eager``: ``torch.compile(program, backend="eager", fullgraph=True)``."""

from . import Backend, compile_script, torch_compile

BACKEND = Backend(name="eager", group="torch.compile", title="eager", prepare=torch_compile("eager"),
                  script=compile_script("eager"), dynamo=True)
