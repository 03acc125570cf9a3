"""The sync side's I/O helpers: the twins of _aio.py, same names."""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any, Iterable, Iterator, Optional, Tuple, TypeVar

from . import _websocket as wsproto
from ._tario import CHUNK, TarExtractor, TarProducer

T = TypeVar("T")

sleep = time.sleep
monotonic = time.monotonic


def in_thread(fn: Any, *args: Any) -> Any:
    return fn(*args)


def within(value: T, remaining: Optional[float]) -> T:
    """The sync twin of _aio.within: the value is already there; a sync
    call's deadline is its read timeout and the checks between chunks."""
    return value


def tar_chunks(src: Any) -> Iterator[bytes]:
    p = TarProducer(src)
    try:
        while True:
            c = p.get()
            if c is None:
                return
            yield c
    finally:
        p.close()


def body_chunks(data: Any) -> Iterator[bytes]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif isinstance(data, str):
        yield data.encode()
    elif hasattr(data, "read"):
        while True:
            b = data.read(CHUNK)
            if not b:
                return
            yield b
    else:
        for b in data:
            yield b


def extract_into(ex: TarExtractor, chunk: Optional[bytes]) -> None:
    ex.put(chunk)


class WSConn:
    """A client WebSocket connection (RFC 6455 via _websocket) over a socket."""

    def __init__(self) -> None:
        self._s: Optional[socket.socket] = None
        self._parser = wsproto.Parser()
        self._pending: list = []

    def connect(self, host: str, port: int, tls: Optional[ssl.SSLContext], host_header: str,
                target: str, headers: Iterable[Tuple[str, str]],
                timeout: Optional[float]) -> Optional[Tuple[int, bytes]]:
        s = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            s = tls.wrap_socket(s, server_hostname=host)
        self._s = s
        req, accept = wsproto.handshake(host_header, target, list(headers))
        s.sendall(req)
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                raise ConnectionError("websocket: the connection closed during the upgrade")
            buf += d
        head, rest = buf.split(b"\r\n\r\n", 1)
        s.settimeout(None)
        refused = wsproto.check_response(head, accept)
        if refused is None:
            self._pending += self._parser.feed(rest)
            return None
        status, length = refused
        want = int(length) if length.isdigit() else 65536
        while len(rest) < want:
            d = s.recv(65536)
            if not d:
                break
            rest += d
        self.close()
        return status, rest

    def send(self, opcode: int, payload: bytes) -> None:
        assert self._s is not None
        self._s.sendall(wsproto.frame(opcode, payload))

    def recv(self) -> Optional[Tuple[int, bytes]]:
        assert self._s is not None
        while not self._pending:
            data = self._s.recv(65536)
            if not data:
                return None
            self._pending += self._parser.feed(data)
        return self._pending.pop(0)  # type: ignore[no-any-return]

    def close(self) -> None:
        if self._s is not None:
            try:
                self._s.close()
            finally:
                self._s = None


class _NoDelay:
    """Wraps httpcore's network backend to set TCP_NODELAY on each new
    connection: h11 writes a request's headers and its body in two sends,
    and without it Nagle's algorithm holds the body until the broker's
    delayed ACK (40 ms on Linux) on a reused connection."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
        stream = self._inner.connect_tcp(*args, **kwargs)
        sock = stream.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def default_transport(verify: Any, limits: Any) -> Any:
    """An httpx transport whose connections have TCP_NODELAY (asyncio sets it
    by itself, so the async twin answers None: httpx's default)."""
    import httpx
    nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    try:  # httpx >= 0.24 takes socket options
        return httpx.HTTPTransport(verify=verify, limits=limits, socket_options=nodelay)
    except TypeError:
        pass
    t = httpx.HTTPTransport(verify=verify, limits=limits)
    pool = getattr(t, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = _NoDelay(pool._network_backend)
    return t
