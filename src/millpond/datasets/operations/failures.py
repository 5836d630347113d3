"""How a data operation says it could not do its work: one exception, below everything that raises it.

The runner (``operations.runner``) catches it and records the operation Failed with its message;
the executors and the transfer helpers they call raise it. It lives here, under all three, so
that none of them imports the module that imports it back.
"""

from __future__ import annotations

from millpond.errors import MillpondError


class OperationFailed(MillpondError):
    """The operation could not do its work; the message says why, in one line."""
