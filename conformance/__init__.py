"""torchbind-conformance: check a TorchBind class against its fake class across the PT2 stack.

Public API:

* :func:`examples` — register a factory of example objects for a class whose constructor needs specific args;
* :func:`strategy` — override the hypothesis strategy the differential test draws a method's arguments from;
* :func:`run_class` — run every check on a class outside pytest and get :class:`Outcome` objects.

The pytest plugin (``conformance.plugin``, entry point ``torchbind``) turns each check into a test item.
"""

from .differential import strategy
from .example_objects import examples
from .results import Failure, Outcome
from .runner import run_class

__all__ = ["examples", "strategy", "run_class", "Failure", "Outcome"]
__version__ = "0.1.0"
