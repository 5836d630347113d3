"""The environment a task's process starts from: millpond's own, less what belongs to the server.

A task runs the user's code (a KFP component, a DataProcess script); it needs PATH, HOME, the
user's cloud credentials and the like, but never the API token of a ``millpond server``, which
would let it (or anything it runs) drive the API.
"""

from __future__ import annotations

import os

SERVER_ONLY = ("MILLPOND_TOKEN",)


def inherited_environment() -> dict[str, str]:
    """A copy of this process's environment without ``SERVER_ONLY`` variables."""
    return {name: value for name, value in os.environ.items() if name not in SERVER_ONLY}
