"""What went wrong talking to storage, in one line, and whether trying again may help.

Each backend reports a failure its own way: obstore (Rust) as a paragraph with the request,
its retries and a Debug dump of the cause; botocore and aiohttp as their own exception
families. A data operation's status, a CLI ``error:`` line and a FUSE log want one short line
that says what the store answered ("500 Internal Server Error (InternalError: …)") or why no
answer came ("cannot connect to 127.0.0.1:9000: Connection refused", "no answer from … in time").
``transient`` says whether the same request may succeed later (a 5xx, a refused or timed-out
connection) or never will (403, 404: the request itself is wrong).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

MAX_CHARS = 300

_STATUS = re.compile(r"status code: (\d{3})(?: ([A-Za-z][A-Za-z -]*))?")
_S3_CODE = re.compile(r"<Code>([^<]{1,100})</Code>")
_S3_MESSAGE = re.compile(r"<Message>([^<]{1,200})</Message>")
_REQUEST_URL = re.compile(r"Error performing [A-Z]+ (\w+://[^\s/]+)")
_OS_MESSAGE = re.compile(r'Os \{[^}]*message: "([^"]+)"', re.S)
_DNS = re.compile(r'"dns error".*?error: "([^"]+)"', re.S)


@dataclass(frozen=True)
class Failure:
    """One line of cause, and whether retrying the same request may help."""

    cause: str
    transient: bool


def describe(exc: BaseException) -> Failure:
    """The cause of a storage backend's exception, in one line."""
    text = str(exc)
    if "Error performing" in text or "Debug source" in text:
        return _obstore(text)
    response = getattr(exc, "response", None) or getattr(exc.__cause__, "response", None)
    if isinstance(response, dict) and isinstance(response.get("Error"), dict):
        return _botocore(response)  # a ClientError, or s3fs's OSError made from one
    if isinstance(exc, (FileNotFoundError, PermissionError)):
        return Failure(_first_line(exc), transient=False)
    status = _STATUS.search(text)
    if status is not None:
        return Failure(_first_line(exc), transient=_transient_status(int(status.group(1))))
    if _is_timeout(exc):
        return Failure(f"no answer in time ({_first_line(exc) if text.strip() else 'timed out'})", transient=True)
    return Failure(_first_line(exc), transient=True)


def _obstore(text: str) -> Failure:
    url = _REQUEST_URL.search(text)
    host = urlsplit(url.group(1)).netloc if url else "the store"
    status = _STATUS.search(text)
    if status is not None:
        code = int(status.group(1))
        said = f"{code} {status.group(2).strip()}" if status.group(2) else str(code)
        s3_code, s3_message = _S3_CODE.search(text), _S3_MESSAGE.search(text)
        if s3_code and s3_message:
            said += f" ({s3_code.group(1)}: {s3_message.group(1)})"
        elif s3_code:
            said += f" ({s3_code.group(1)})"
        return Failure(_clip(said), transient=_transient_status(code))
    dns = _DNS.search(text)
    if dns is not None:
        return Failure(_clip(f"cannot resolve {host.rsplit(':', 1)[0]}: {dns.group(1)}"), transient=True)
    refused = _OS_MESSAGE.search(text)
    if refused is not None:
        return Failure(_clip(f"cannot connect to {host}: {refused.group(1)}"), transient=True)
    if "kind: Timeout" in text or "TimedOut" in text:
        return Failure(f"no answer from {host} in time (timed out)", transient=True)
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    first = re.sub(r"^Generic \w+ error: ", "", first)
    first = re.sub(r" in [\d.]+\w*s, after \d+ retries, max_retries: \d+, retry_timeout: \w+ ", "", first)
    return Failure(_clip(first), transient=True)


def _botocore(response: dict[str, Any]) -> Failure:
    error = response["Error"]
    code = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
    try:
        said = f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        said = str(code) if code else "the store refused"
    if error.get("Code"):
        said += f" ({error['Code']}: {error['Message']})" if error.get("Message") else f" ({error['Code']})"
    return Failure(_clip(said), transient=code == 0 or _transient_status(code))


def _transient_status(code: int) -> bool:
    return code >= 500 or code in (408, 429)


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return _clip(text.splitlines()[0] if text else type(exc).__name__)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"
