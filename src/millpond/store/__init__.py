"""Persistence: the metadata database, artifact storage. Imports nothing above it."""
