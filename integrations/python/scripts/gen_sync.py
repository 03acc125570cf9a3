"""Writes src/wsbroker/_sync.py from src/wsbroker/_async.py: one source for
both clients, so their surfaces cannot drift. Run it after editing
_async.py (tests/test_generated.py fails when _sync.py is stale):

    /usr/bin/python3 integrations/python/scripts/gen_sync.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "wsbroker"

# Whole-word replacements, applied in this order.
WORDS = [
    ("from . import _aio as io", "from . import _sio as io"),
    ("httpx.AsyncClient", "httpx.Client"),
    ("httpx.AsyncHTTPTransport", "httpx.HTTPTransport"),
    ("handle_async_request", "handle_request"),
    ("AsyncIterator", "Iterator"),
    ("StopAsyncIteration", "StopIteration"),
    ("__aenter__", "__enter__"),
    ("__aexit__", "__exit__"),
    ("__aiter__", "__iter__"),
    ("__anext__", "__next__"),
    ("aiter_raw", "iter_raw"),
    ("aread", "read"),
    ("aclose", "close"),
    ("async with ", "with "),
    ("async for ", "for "),
    ("async def ", "def "),
    ("await ", ""),
]

HEADER = '''"""The sync client. GENERATED from _async.py by scripts/gen_sync.py: do not
edit; edit _async.py and regenerate."""
'''


def generate() -> str:
    src = (SRC / "_async.py").read_text()
    body = src.split('"""', 2)[2]  # drop the async module's docstring
    for old, new in WORDS:
        body = body.replace(old, new)
    body = re.sub(r"\bAsync([A-Z]\w*)", r"\1", body)
    return HEADER + body


if __name__ == "__main__":
    out = SRC / "_sync.py"
    out.write_text(generate())
    print(f"wrote {out}", file=sys.stderr)
