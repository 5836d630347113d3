"""millpond: Kubeflow Pipelines, Fluid and Arena on one machine.

The public API is what this module re-exports; everything else may change freely.
"""

from millpond.errors import MillpondError, UserError

__version__ = "0.1.0"

__all__ = ["MillpondError", "UserError", "__version__"]
