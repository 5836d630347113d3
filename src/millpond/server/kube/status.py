"""Errors as the Kubernetes API server answers them: a ``kind: Status`` object with a reason and a code.

kubectl prints ``Error from server (REASON): MESSAGE`` from these; the Python client raises
``ApiException`` with the body. Every refusal of the Kubernetes API is a :class:`KubeError`, never a
500 in KFP's shape: the reasons are upstream's (``metav1.StatusReason``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse

from millpond.errors import MillpondError

REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    406: "NotAcceptable", 409: "Conflict", 410: "Expired", 413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError",
    503: "ServiceUnavailable",
}


@dataclass
class KubeError(MillpondError):
    """A request refused: HTTP ``code``, Kubernetes ``reason``, one-line ``message``; ``details`` names the object."""

    code: int
    message: str
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.message.isprintable():  # a line break or control character from the request stays escaped
            self.message = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in self.message)
        super().__init__(self.message)
        self.reason = self.reason or REASONS.get(self.code, "Unknown")

    def response(self) -> JSONResponse:
        return JSONResponse(self.status(), status_code=self.code)

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def success(details: dict[str, Any]) -> dict[str, Any]:
    """The Status a delete answers with (kubectl reads ``details`` to print ``… deleted``)."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def not_found(resource: str, name: str) -> KubeError:
    return KubeError(404, f'{resource} "{name}" not found', details={"name": name, "kind": resource.split(".")[0]})


def already_exists(resource: str, name: str, group: str, plural: str) -> KubeError:
    return KubeError(409, f'{resource} "{name}" already exists', "AlreadyExists",
                     {"name": name, "group": group, "kind": plural})


def conflict(resource: str, name: str, group: str, plural: str) -> KubeError:
    return KubeError(409, f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; '
                          "please apply your changes to the latest version and try again", "Conflict",
                     {"name": name, "group": group, "kind": plural})


def invalid(kind: str, name: str, group: str, message: str, field_path: str = "") -> KubeError:
    """422 Invalid with one cause naming the field, as the API server reports a failed validation."""
    cause: dict[str, Any] = {"reason": "FieldValueInvalid", "message": message}
    if field_path:
        cause["field"] = field_path
    return KubeError(422, f'{kind} "{name}" is invalid: {message}', "Invalid",
                     {"name": name, "group": group, "kind": kind, "causes": [cause]})
