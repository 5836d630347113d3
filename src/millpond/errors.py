"""millpond's one error hierarchy, and the one table that says how each kind of error ends.

Every error millpond raises on purpose derives from :class:`MillpondError`. What the user sees
depends only on the class: the CLI prints ``error: MESSAGE`` and exits with
:func:`exit_code_of`; the REST API answers :func:`http_status_of` with the message. Nobody
matches message text to decide a status.

- bad input (a file, a flag, a parameter, a request body): :class:`UserError` and its
  subclasses — exit 2, HTTP 4xx, nothing recorded;
- an outside service that failed (an object store that is unreachable or answers errors):
  :class:`UnavailableError` — exit 1, HTTP 503; the input was fine, retrying may help;
- a task that cannot run or whose outputs are unusable: :class:`TaskFailure` — the task fails
  with the message; it reaches a user only as the task's (and the run's) error;
- anything else intentional: :class:`MillpondError` — exit 1, HTTP 500 with the message.
"""

from __future__ import annotations


class MillpondError(Exception):
    """Base class for every error millpond raises on purpose."""


class UserError(MillpondError):
    """Bad input from the user (a file, a parameter, a flag): exit status 2, nothing recorded.

    The message names the problem and where it is (file, field or parameter).
    """


class NotFoundError(UserError):
    """An object the user named (a run, an experiment, a dataset, a secret) does not exist."""


class ConflictError(UserError):
    """The request clashes with what exists: a name already taken, a run in the wrong state."""


class PreconditionError(UserError):
    """The object is in a state that forbids the request (an archived experiment, a pipeline with no version)."""


class ForbiddenError(UserError):
    """The request is never allowed for this object (kube-apiserver's Forbidden: deleting ``default``)."""


class UnavailableError(MillpondError):
    """An outside service (object store, UFS) is unreachable or failed; the input itself was fine."""


class TaskFailure(MillpondError):
    """A task cannot run or its outputs are unusable: the task fails with this message."""


# class → (CLI exit status, HTTP status). The most specific class in an error's MRO decides.
_OUTCOMES: dict[type[BaseException], tuple[int, int]] = {
    NotFoundError: (2, 404),
    ConflictError: (2, 409),
    PreconditionError: (2, 412),
    ForbiddenError: (2, 403),
    UserError: (2, 400),
    UnavailableError: (1, 503),
    TaskFailure: (1, 500),
    MillpondError: (1, 500),
}


def _outcome(exc: BaseException) -> tuple[int, int]:
    for cls in type(exc).__mro__:
        if cls in _OUTCOMES:
            return _OUTCOMES[cls]
    return (1, 500)


def exit_code_of(exc: BaseException) -> int:
    """The CLI's exit status for ``exc``: 2 for bad input, 1 for everything else."""
    return _outcome(exc)[0]


def http_status_of(exc: BaseException) -> int:
    """The HTTP status the REST API answers ``exc`` with."""
    return _outcome(exc)[1]
