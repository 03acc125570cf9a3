"""Exceptions: one class per problem+json code of the broker's wire table.

The table is ``wire.Codes`` in Go; ``wire/testdata/codes.json`` is its copy
for other languages, and this package's tests fail when that file names a
code without a class here. Clients switch on the class (or ``code``), never
on ``detail``.
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Type


class BrokerError(Exception):
    """An error answered by the broker, or met on the way to it.

    ``code`` is the stable code (``"not_exist"``...), ``status`` the HTTP
    status (0 when no answer came), ``detail`` the broker's text and
    ``request_id`` the ``X-Request-Id`` the broker logged it under.
    """

    code: str = ""
    status: int = 0

    def __init__(self, detail: str, *, code: Optional[str] = None, status: Optional[int] = None,
                 request_id: Optional[str] = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.request_id = request_id

    def __str__(self) -> str:
        rid = f" (request {self.request_id})" if self.request_id else ""
        return f"{self.code or 'error'}: {self.detail}{rid}"


class Conflict(BrokerError):
    """409: something in the way (exists, is_dir, not_dir)."""


class NotExist(BrokerError):
    """not_exist, 404: the path does not exist."""
    code, status = "not_exist", 404


class Exists(Conflict):
    """exists, 409: something already exists there."""
    code, status = "exists", 409


class Permission(BrokerError):
    """permission, 403: not allowed, or outside a confined root."""
    code, status = "permission", 403


class IsDir(Conflict):
    """is_dir, 409: a directory where a file was needed."""
    code, status = "is_dir", 409


class NotDir(Conflict):
    """not_dir, 409: a file where a directory was needed."""
    code, status = "not_dir", 409


class Invalid(BrokerError):
    """invalid, 400: a value no backend accepts."""
    code, status = "invalid", 400


class TooLarge(BrokerError):
    """too_large, 413: a body over its limit, or a full disk."""
    code, status = "too_large", 413


class Timeout(BrokerError):
    """timeout, 504: an operation timed out (also a client-side timeout)."""
    code, status = "timeout", 504


class Canceled(BrokerError):
    """canceled, 499: the call was canceled."""
    code, status = "canceled", 499


class Denied(BrokerError):
    """denied, 403: refused by policy (a tenant's policy or quota)."""
    code, status = "denied", 403


PolicyDenied = Denied
QuotaExceeded = Denied


class Unavailable(BrokerError):
    """unavailable, 503: a backend or the broker cannot be reached (also a
    dropped connection or a refused one on the client's side)."""
    code, status = "unavailable", 503


class Internal(BrokerError):
    """internal, 500: anything else."""
    code, status = "internal", 500


class Unauthorized(BrokerError):
    """unauthorized, 401: missing, malformed or unknown bearer token."""
    code, status = "unauthorized", 401


class NotFound(BrokerError):
    """not_found, 404: unknown workspace, tool or route, or an operation the
    workspace's backend does not serve."""
    code, status = "not_found", 404


class MethodNotAllowed(BrokerError):
    """method_not_allowed, 405."""
    code, status = "method_not_allowed", 405


class UnsupportedMediaType(BrokerError):
    """unsupported_media_type, 415."""
    code, status = "unsupported_media_type", 415


class BadRequest(BrokerError):
    """bad_request, 400: the body is not the JSON the route expects."""
    code, status = "bad_request", 400


class TooManyRequests(BrokerError):
    """too_many_requests, 429: over the tenant's rate or concurrent calls."""
    code, status = "too_many_requests", 429


class MisdirectedRequest(BrokerError):
    """misdirected_request, 421: the Host header names a host the broker
    does not answer for."""
    code, status = "misdirected_request", 421


#: Every code of the wire table and its class, in wire.Codes order.
ERRORS: Dict[str, Type[BrokerError]] = {c.code: c for c in (
    Unauthorized, NotFound, MethodNotAllowed, UnsupportedMediaType, BadRequest,
    TooManyRequests, MisdirectedRequest, NotExist, Exists, Permission, IsDir, NotDir,
    Invalid, Timeout, Canceled, Denied, TooLarge, Unavailable, Internal,
)}


def error_for(code: str, status: int, detail: str, request_id: Optional[str] = None) -> BrokerError:
    """The exception for a problem document: by its code, else (an older or
    newer broker, a proxy) by its status as the Go client does: the first
    code of that status, 502 read as 503."""
    cls = ERRORS.get(code)
    if cls is None:
        st = 503 if status == 502 else status
        cls = next((c for c in ERRORS.values() if c.status == st), BrokerError)
    return cls(detail or f"HTTP {status}", code=code or cls.code or None, status=status,
               request_id=request_id)


def from_problem(status: int, body: bytes, request_id: Optional[str]) -> BrokerError:
    """The exception for an error response's body (RFC 9457, or anything)."""
    code, detail = "", ""
    try:
        doc = json.loads(body)
        if isinstance(doc, dict):
            code = str(doc.get("code") or "")
            detail = str(doc.get("detail") or doc.get("title") or "")
    except ValueError:
        detail = body[:512].decode("utf-8", "replace").strip()
    return error_for(code, status, detail, request_id)
