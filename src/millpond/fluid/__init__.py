"""A Python SDK shaped like Fluid's (``import fluid``), over millpond's datasets on this machine.

A notebook written for Fluid's SDK runs with ``from millpond import fluid`` and
``from millpond.fluid import constants, models``: the same classes, methods and
parameters, the same ``fluidsdk`` logger. Objects land where ``millpond apply -f``
puts them, checked the same way; dataflows run as millpond data operations.
"""

from millpond.fluid import constants, models
from millpond.fluid.client import FluidClient
from millpond.fluid.config import ClientConfig
from millpond.fluid.dataflow import DataFlowFailed, FlowHandle, FluidDataFlow
from millpond.fluid.dataset import FluidDataset
from millpond.fluid.objects import AlreadyExists, NotFound
from millpond.fluid.utils.processor import make_processor_from_func

# The version of Fluid's Python SDK whose API this follows (millpond's own is millpond.__version__).
__version__ = "1.0.2"

__all__ = [
    "AlreadyExists", "ClientConfig", "DataFlowFailed", "FlowHandle", "FluidClient", "FluidDataFlow", "FluidDataset",
    "NotFound", "__version__", "constants", "make_processor_from_func", "models",
]
