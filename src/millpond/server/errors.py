"""Errors in the shape the KFP API server (grpc-gateway) answers them: ``{error, code, message}``.

``kfp_server_api`` raises ``ApiException`` with the HTTP status and this body; the gRPC code
is kept beside it so clients that read ``code`` behave as against Kubeflow.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse

from millpond.errors import MillpondError

# HTTP status → gRPC status code, as grpc-gateway maps them.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 405: 12, 409: 6, 412: 9, 413: 8, 415: 3, 500: 13, 503: 14}


class ApiError(MillpondError):
    """A request the server refuses; ``status`` is the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(status: int, message: str) -> JSONResponse:
    code = _GRPC_CODES.get(status, 2)
    return JSONResponse({"error": message, "code": code, "message": message, "details": []}, status_code=status)
