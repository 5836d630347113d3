"""Scheduling on one machine: what it has (``machine``) and who holds which part of it (``ledger``).

Pipeline tasks and training jobs both draw from the one ledger of a home, so no two of them are
ever handed the same GPU, whichever process they run in.
"""

from millpond.scheduling.ledger import GRANT_ENV, Grant, GrantRecord, Holder, Ledger, Request
from millpond.scheduling.machine import Capacity

__all__ = ["GRANT_ENV", "Capacity", "Grant", "GrantRecord", "Holder", "Ledger", "Request"]
