"""Tar streams made and taken apart in a worker thread, so that neither an
upload nor a download holds the archive in memory: at most ``DEPTH`` chunks
of ``CHUNK`` bytes are in flight."""

from __future__ import annotations

import os
import queue
import tarfile
import threading
from typing import IO, Any, Callable, Iterator, Optional, Union

CHUNK = 256 << 10
DEPTH = 8
_END = object()

PathLike = Union[str, "os.PathLike[str]"]


class _QueueWriter:
    """A write-only file whose writes go to a bounded queue in CHUNK pieces."""

    def __init__(self, q: "queue.Queue[Any]") -> None:
        self._q, self._buf = q, bytearray()

    def write(self, b: bytes) -> int:
        self._buf += b
        while len(self._buf) >= CHUNK:
            self._q.put(bytes(self._buf[:CHUNK]))
            del self._buf[:CHUNK]
        return len(b)

    def flush(self) -> None:
        if self._buf:
            self._q.put(bytes(self._buf))
            self._buf.clear()


class TarProducer:
    """Writes src (a directory, as its contents) as a tar in a thread; get()
    returns the next chunk, or None at the end (raising what failed)."""

    def __init__(self, src: PathLike) -> None:
        self._q: "queue.Queue[Any]" = queue.Queue(DEPTH)
        self._stop = threading.Event()
        if not os.path.isdir(src):
            raise NotADirectoryError(f"upload: {src} is not a directory")
        self._t = threading.Thread(target=self._run, args=(os.fspath(src),), daemon=True)
        self._t.start()

    def _run(self, src: str) -> None:
        w = _QueueWriter(self._q)
        try:
            with tarfile.open(fileobj=w, mode="w|", format=tarfile.PAX_FORMAT) as tf:  # type: ignore[call-overload]
                for name in sorted(os.listdir(src)):
                    if self._stop.is_set():
                        return
                    tf.add(os.path.join(src, name), arcname=name,
                           filter=lambda ti: None if self._stop.is_set() else ti)
            w.flush()
            self._q.put(_END)
        except BaseException as e:  # handed to the reader
            self._q.put(e)

    def get(self) -> Optional[bytes]:
        item = self._q.get()
        if item is _END:
            return None
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stops the thread (a failed or abandoned upload)."""
        self._stop.set()
        while self._t.is_alive():
            try:
                self._q.get(timeout=0.05)
            except queue.Empty:
                pass


class _QueueReader:
    """A read-only file over chunks put in a bounded queue (None ends it)."""

    def __init__(self, q: "queue.Queue[Optional[bytes]]") -> None:
        self._q, self._buf, self._eof = q, b"", False

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or len(self._buf) < n):
            c = self._q.get()
            if c is None:
                self._eof = True
            else:
                self._buf += c
        if n < 0:
            n = len(self._buf)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _safe_filter(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo:
    """What tarfile's "data" filter does, for Pythons without it: no
    absolute names, nothing outside dest, no devices."""
    data_filter: Optional[Callable[..., tarfile.TarInfo]] = getattr(tarfile, "data_filter", None)
    if data_filter is not None:
        return data_filter(member, dest)
    target = os.path.realpath(os.path.join(dest, member.name))
    if os.path.isabs(member.name) or not target.startswith(os.path.realpath(dest) + os.sep):
        raise tarfile.TarError(f"refusing {member.name!r}: outside {dest}")
    if member.islnk() or member.issym():
        link = os.path.realpath(os.path.join(os.path.dirname(target), member.linkname))
        if os.path.isabs(member.linkname) or not link.startswith(os.path.realpath(dest) + os.sep):
            raise tarfile.TarError(f"refusing link {member.name!r} -> {member.linkname!r}")
    if member.isdev():
        raise tarfile.TarError(f"refusing device {member.name!r}")
    return member


class TarExtractor:
    """Extracts a tar fed chunk by chunk (put) into dest, in a thread."""

    def __init__(self, dest: PathLike) -> None:
        self.dest = os.fspath(dest)
        os.makedirs(self.dest, exist_ok=True)
        self._q: "queue.Queue[Optional[bytes]]" = queue.Queue(DEPTH)
        self.error: Optional[BaseException] = None
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        reader = _QueueReader(self._q)
        try:
            src: IO[bytes] = reader  # type: ignore[assignment]
            with tarfile.open(fileobj=src, mode="r|*") as tf:
                for m in tf:
                    tf.extract(_safe_filter(m, self.dest), self.dest, set_attrs=True)
        except BaseException as e:
            self.error = e
        finally:
            while not reader._eof and self._q.get() is not None:  # let the feeder finish
                pass

    def put(self, chunk: Optional[bytes]) -> None:
        self._q.put(chunk)

    def finish(self) -> None:
        self._t.join()
        if self.error is not None:
            raise self.error


def chunks_of(f: IO[bytes]) -> Iterator[bytes]:
    while True:
        b = f.read(CHUNK)
        if not b:
            return
        yield b
