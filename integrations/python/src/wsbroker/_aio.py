"""The asyncio side's I/O helpers (their sync twins are in _sio.py, under the
same names, so that _sync.py is generated from _async.py)."""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from typing import Any, AsyncIterator, Awaitable, Iterable, Optional, Tuple, TypeVar, Union

from . import _websocket as wsproto
from ._tario import CHUNK, TarExtractor, TarProducer

T = TypeVar("T")

Body = Union[bytes, str, Any]

sleep = asyncio.sleep
monotonic = time.monotonic


async def in_thread(fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


async def within(aw: Awaitable[T], remaining: Optional[float]) -> T:
    """aw, given up (asyncio.TimeoutError) after remaining seconds."""
    if remaining is None:
        return await aw
    return await asyncio.wait_for(aw, max(remaining, 0.0))


async def tar_chunks(src: Any) -> AsyncIterator[bytes]:
    """The directory src as a tar, chunk by chunk."""
    p = TarProducer(src)
    try:
        while True:
            c = await in_thread(p.get)
            if c is None:
                return
            yield c
    finally:
        await in_thread(p.close)


async def body_chunks(data: Any) -> AsyncIterator[bytes]:
    """An upload body: bytes, str, a binary file (read in chunks in a
    thread), or an iterable or async iterable of bytes."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        yield bytes(data)
    elif isinstance(data, str):
        yield data.encode()
    elif hasattr(data, "read"):
        while True:
            b = await in_thread(data.read, CHUNK)
            if not b:
                return
            yield b
    elif hasattr(data, "__aiter__"):
        async for b in data:
            yield b
    else:
        for b in data:
            yield b


async def extract_into(ex: TarExtractor, chunk: Optional[bytes]) -> None:
    await in_thread(ex.put, chunk)


class WSConn:
    """A client WebSocket connection (RFC 6455 via _websocket) over asyncio streams."""

    def __init__(self) -> None:
        self._r: Optional[asyncio.StreamReader] = None
        self._w: Optional[asyncio.StreamWriter] = None
        self._parser = wsproto.Parser()
        self._pending: list = []

    async def connect(self, host: str, port: int, tls: Optional[ssl.SSLContext], host_header: str,
                      target: str, headers: Iterable[Tuple[str, str]],
                      timeout: Optional[float]) -> Optional[Tuple[int, bytes]]:
        """Opens and upgrades; answers (status, body) when the broker refused."""
        self._r, self._w = await within(asyncio.open_connection(host, port, ssl=tls), timeout)
        req, accept = wsproto.handshake(host_header, target, list(headers))
        self._w.write(req)
        await self._w.drain()
        head = await within(self._r.readuntil(b"\r\n\r\n"), timeout)
        refused = wsproto.check_response(head[:-4], accept)
        if refused is None:
            return None
        status, length = refused
        body = await within(self._r.read(int(length) if length.isdigit() else 65536), timeout)
        await self.close()
        return status, body

    async def send(self, opcode: int, payload: bytes) -> None:
        assert self._w is not None
        self._w.write(wsproto.frame(opcode, payload))
        await self._w.drain()

    async def recv(self) -> Optional[Tuple[int, bytes]]:
        """The next message, or None when the connection ended."""
        assert self._r is not None
        while not self._pending:
            data = await self._r.read(65536)
            if not data:
                return None
            self._pending += self._parser.feed(data)
        return self._pending.pop(0)  # type: ignore[no-any-return]

    async def close(self) -> None:
        if self._w is not None:
            self._w.close()
            try:
                await self._w.wait_closed()
            except OSError:
                pass
            self._w = None


def getpid() -> int:
    return os.getpid()


def default_transport(verify: Any, limits: Any) -> Any:
    """None: httpx's default transport; asyncio sets TCP_NODELAY on its TCP
    connections itself (see the sync twin in _sio.py)."""
    return None
