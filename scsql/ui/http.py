"""What the viewer's pages, its API and its reports share: where its
templates and static files are, the headers every response carries, and how
an error and a value become an HTTP status and a JSON body."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core import errors
from ..core.errors import ScsqlError
from .source import jsonable

HERE = Path(__file__).parent
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"x-frame-options", b"DENY"), (b"cache-control", b"no-store"),
           (b"cross-origin-opener-policy", b"same-origin"), (b"cross-origin-resource-policy", b"same-origin")]
# HTTP status of each error code (anything else a database refused: 400; unknown failures: 500).
STATUS = {errors.VIEWER_TOKEN_REQUIRED: 401, errors.VIEWER_PATH_UNKNOWN: 404, errors.VIEWER_NOT_FOUND: 404,
          errors.PROJECT_UNKNOWN: 404, errors.AGENT_UNKNOWN: 404, "42501": 403,
          errors.SERVER_UNREACHABLE: 503, errors.DATABASE_ERROR: 500}


def http_status(exc: ScsqlError) -> int:
    return STATUS.get(exc.code, 400 if exc.code.startswith("SC") else 500)


def json_body(value: Any) -> bytes:
    return json.dumps(jsonable(value), ensure_ascii=False, separators=(",", ":")).encode()
