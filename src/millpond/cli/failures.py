"""How a command that failed ends: one ``error:`` line and the exit code the error hierarchy gives.

Both console scripts (``millpond`` and ``arena``) end this way, so that a failure reads the same
whichever one the user typed: bad input exits 2, an outside failure 1 (``errors.exit_code_of``),
and a metadata database that went away mid-command is one line too, never a traceback.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from millpond.errors import MillpondError, exit_code_of
from millpond.store.db import database_failure


def exit_on(exc: Exception) -> NoReturn:
    """Print ``exc`` as one error line and exit; an exception that is not a known failure propagates."""
    failure = exc if isinstance(exc, MillpondError) else database_failure(exc)
    if failure is None:
        raise exc
    print(f"error: {failure}", file=sys.stderr)
    sys.exit(exit_code_of(failure))
