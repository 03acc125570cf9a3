"""A minimal RFC 6455 client codec for the terminal route.

Why not a library: Debian ships python3-websockets 10.4, which has no
synchronous client (that came in 12.0), and python3-wsproto brings another
dependency for the little the terminal needs: one handshake, masked frames
out, unmasked frames in, ping/pong and close. Both clients (sync over a
socket, asyncio over streams) use this codec; it does no I/O.
"""

from __future__ import annotations

import base64
import hashlib
import os
import struct
from typing import List, Optional, Sequence, Tuple

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA

#: The largest message the client accepts (the broker sends at most 32 KiB).
MAX_MESSAGE = 16 << 20


def handshake(host: str, target: str, headers: Sequence[Tuple[str, str]]) -> Tuple[bytes, str]:
    """The upgrade request and the Sec-WebSocket-Accept it must be answered with."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers]
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), accept


def check_response(head: bytes, accept: str) -> Optional[Tuple[int, bytes]]:
    """None when head (the response's header block) accepts the upgrade,
    else (status, what to read the problem from)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    hdrs = {}
    for ln in lines[1:]:
        if ":" in ln:
            k, v = ln.split(":", 1)
            hdrs[k.strip().lower()] = v.strip()
    if status == 101 and hdrs.get("sec-websocket-accept") == accept:
        return None
    return status, hdrs.get("content-length", "").encode()


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, masked client frame."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    mask = os.urandom(4)
    # XOR by the repeated mask as one big integer: fast without numpy.
    key = (mask * (n // 4 + 1))[:n]
    body = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
    return head + mask + body


class Parser:
    """Reassembles the server's frames into messages (opcode, payload)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._frag_op: Optional[int] = None
        self._frag = bytearray()

    def feed(self, data: bytes) -> List[Tuple[int, bytes]]:
        self._buf += data
        out: List[Tuple[int, bytes]] = []
        while True:
            f = self._frame()
            if f is None:
                return out
            fin, op, payload = f
            if op >= CLOSE:  # control frames are never fragmented
                out.append((op, payload))
            elif op == CONT:
                if self._frag_op is None:
                    raise ValueError("websocket: continuation without a first frame")
                self._frag += payload
                if fin:
                    out.append((self._frag_op, bytes(self._frag)))
                    self._frag_op, self._frag = None, bytearray()
            elif fin:
                out.append((op, payload))
            else:
                self._frag_op, self._frag = op, bytearray(payload)
            if len(self._frag) > MAX_MESSAGE:
                raise ValueError("websocket: message over 16 MiB")

    def _frame(self) -> Optional[Tuple[bool, int, bytes]]:
        b = self._buf
        if len(b) < 2:
            return None
        fin, op, masked, n = bool(b[0] & 0x80), b[0] & 0x0F, bool(b[1] & 0x80), b[1] & 0x7F
        i = 2
        if n == 126:
            if len(b) < 4:
                return None
            n, i = struct.unpack("!H", b[2:4])[0], 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, i = struct.unpack("!Q", b[2:10])[0], 10
        if n > MAX_MESSAGE:
            raise ValueError("websocket: frame over 16 MiB")
        mask = b""
        if masked:  # a server must not mask, but reading one costs nothing
            if len(b) < i + 4:
                return None
            mask, i = bytes(b[i:i + 4]), i + 4
        if len(b) < i + n:
            return None
        payload = bytes(b[i:i + n])
        del b[:i + n]
        if mask:
            payload = bytes(x ^ mask[j % 4] for j, x in enumerate(payload))
        return fin, op, payload


def close_code(payload: bytes) -> int:
    return struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
