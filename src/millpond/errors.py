"""Errors that reach the user as one line, not a traceback."""

from __future__ import annotations


class MillpondError(Exception):
    """Base class for every error millpond raises on purpose."""


class UserError(MillpondError):
    """Bad input from the user (a file, a parameter, a flag): exit status 2, nothing recorded.

    The message names the problem and where it is (file, field or parameter).
    """


class NotFoundError(UserError):
    """An object the user named does not exist (HTTP 404)."""
