"""Alembic migrations of the metadata database (run by millpond.store.db, not by hand)."""
