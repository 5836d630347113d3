"""Kueue's queues, quotas and priorities over the machine-wide ledger (``model`` holds the records)."""
