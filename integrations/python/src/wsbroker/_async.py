"""The asyncio client. _sync.py is generated from this file by
scripts/gen_sync.py (async/await removed, Async names dropped, _aio -> _sio);
edit this one and regenerate."""

from __future__ import annotations

import json
import ssl
from types import TracebackType
from typing import (Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Type, Union)
from urllib.parse import urlencode, urlsplit

import httpx

from . import _aio as io
from . import _common as c
from ._tario import TarExtractor
from .errors import BrokerError, Timeout, Unavailable, error_for, from_problem
from .types import (ArchiveReport, BackgroundProcess, BatchResult, ExecResult, FileInfo,
                    GlobResult, Logs, ProcessList, RunResult, SearchResult, ToolDefinition,
                    ToolResult, WorkspaceInfo)

_DEFAULT = object()

#: Errors of a connection that dropped or could not be used: an idempotent
#: read is sent once more after one of them.
_DROPPED = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError)


def _transport_error(e: Exception, what: str) -> BrokerError:
    if isinstance(e, httpx.TimeoutException):
        return Timeout(f"{what}: client-side timeout ({type(e).__name__})", status=0)
    return Unavailable(f"{what}: {type(e).__name__}: {e}", status=0)


class AsyncBroker:
    """A broker: ``AsyncBroker(url=None, token=None)`` finds both as the CLI
    does ($BROKER_URL, $BROKER_TOKEN, $BROKER_TOKEN_FILE, the token file of
    ``broker serve``). ``timeout`` bounds each ordinary call on the client's
    side (seconds; commands and streams are bounded by their own
    arguments). ``transport`` is an httpx transport (tests, proxies)."""

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, *,
                 timeout: Optional[float] = 60.0, transport: Any = None,
                 verify: Union[bool, str, ssl.SSLContext] = True) -> None:
        self.url, self._token = c.resolve(url, token)
        self.timeout = timeout
        self._verify = verify
        self._headers = {"Authorization": f"Bearer {self._token}"}
        self._timeouts = {_DEFAULT: httpx.Timeout(timeout).as_dict(),
                          None: httpx.Timeout(None).as_dict()}
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        self._transport = transport or io.default_transport(verify, limits) or \
            httpx.AsyncHTTPTransport(verify=verify, limits=limits)
        self._http = httpx.AsyncClient(
            base_url=self.url, headers={"Authorization": f"Bearer {self._token}"},
            timeout=timeout, verify=verify, limits=limits, transport=self._transport)

    async def __aenter__(self) -> "AsyncBroker":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connection pool."""
        await self._http.aclose()

    # --- the HTTP exchange, once for every call ---

    async def _send(self, method: str, path: str, *, params: Any = None, json_body: Any = None,
                    content: Any = None, headers: Optional[Dict[str, str]] = None,
                    stream: bool = False, timeout: Any = _DEFAULT) -> httpx.Response:
        """Sends a request and answers its response, or raises the broker's
        error. A GET (idempotent) is sent once more when its connection
        dropped before the whole answer was read; nothing else ever is.
        With stream, the caller reads and closes the body."""
        tries = 2 if method == "GET" else 1
        url = self.url + path + ("?" + urlencode(params) if params else "")
        if timeout is _DEFAULT or timeout is None:
            ext = {"timeout": self._timeouts[timeout]}
        else:  # seconds, or an httpx.Timeout
            ext = {"timeout": httpx.Timeout(timeout).as_dict()}
        hdrs = {**self._headers, **headers} if headers else self._headers
        for attempt in range(tries):
            # The request is built here, not by the client's build_request:
            # merging its base URL, params and defaults costs more per call
            # than the rest of the exchange (the SDK bench).
            req = httpx.Request(method, url, json=json_body, content=content, headers=hdrs,
                                extensions=ext)
            try:
                # The transport itself, not the client's send: the SDK
                # needs none of its auth flows, redirects, cookies or hooks,
                # and they cost per call (the SDK bench).
                resp = await self._transport.handle_async_request(req)
                resp.request = req
            except _DROPPED as e:
                if attempt + 1 < tries:
                    continue
                raise _transport_error(e, f"{method} {path}") from e
            except httpx.TransportError as e:
                raise _transport_error(e, f"{method} {path}") from e
            if resp.status_code >= 300:
                try:
                    body = await resp.aread()
                except httpx.TransportError:
                    body = b""
                await resp.aclose()
                raise from_problem(resp.status_code, body, resp.headers.get("x-request-id"))
            if stream:
                return resp
            try:
                await resp.aread()
            except _DROPPED as e:
                if attempt + 1 < tries:
                    continue
                raise _transport_error(e, f"{method} {path}") from e
            except httpx.TransportError as e:
                raise _transport_error(e, f"{method} {path}") from e
            finally:
                await resp.aclose()
            return resp
        raise AssertionError("unreachable")

    async def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = await self._send(method, path, **kw)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as e:
            raise Unavailable(f"{method} {path}: the answer is not JSON: {e}", status=0) from e

    # --- workspaces ---

    async def create(self, backend: Optional[str] = None, *, options: Optional[Dict[str, Any]] = None,
                     profile: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None,
                     secret_env: Optional[Mapping[str, str]] = None,
                     keep: bool = False) -> "AsyncWorkspace":
        """Creates a workspace on backend (default: the broker's) with the
        backend's options (docs/api.md: local limits, docker image and
        limits, ssh host...), or from profile, a workspace spec of the
        broker's config (its profiles:) instead of them: naming one with
        either, or an unknown one, is Invalid. env and secret_env are the
        workspace's environment (secret values are redacted from every
        output). Used as a context manager, the workspace is deleted on exit
        unless keep."""
        body: Dict[str, Any] = c.drop_none({"profile": profile, "backend": backend, "options": options})
        vars_ = [{"name": k, "value": v} for k, v in (env or {}).items()]
        vars_ += [{"name": k, "value": v, "secret": True} for k, v in (secret_env or {}).items()]
        if vars_:
            body["env"] = vars_
        info = WorkspaceInfo.from_json(await self._json("POST", "/v1/workspaces", json_body=body))
        return AsyncWorkspace(self, info, keep=keep)

    async def get(self, workspace_id: str, *, keep: bool = True) -> "AsyncWorkspace":
        """An existing workspace (NotFound when unknown). Kept on a with
        block's exit unless keep=False."""
        info = WorkspaceInfo.from_json(await self._json("GET", c.ws_path(workspace_id)))
        return AsyncWorkspace(self, info, keep=keep)

    async def list(self) -> List[WorkspaceInfo]:
        """The caller's workspaces, oldest first."""
        d = await self._json("GET", "/v1/workspaces")
        return [WorkspaceInfo.from_json(w) for w in d.get("workspaces") or []]

    async def delete(self, workspace_id: str) -> None:
        """Deletes a workspace: its commands are killed, its data destroyed."""
        await self._send("DELETE", c.ws_path(workspace_id))

    async def tools(self) -> List[ToolDefinition]:
        """The seven tools' declarations as pi hands them to its model."""
        return c.parse_tools(await self._json("GET", "/v1/tools"))


class AsyncWorkspace:
    """One workspace: files, commands, tools, processes, terminals, archives."""

    def __init__(self, broker: AsyncBroker, info: WorkspaceInfo, *, keep: bool = True) -> None:
        self.broker = broker
        self.info = info
        self.id = info.id
        self.keep = keep
        self.tools = AsyncTools(self)
        self.processes = AsyncProcesses(self)

    def __repr__(self) -> str:
        return f"<Workspace {self.id} {self.info.backend} {self.info.root}>"

    @property
    def root(self) -> str:
        return self.info.root

    async def __aenter__(self) -> "AsyncWorkspace":
        return self

    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if not self.keep:
            await self.delete()

    def _p(self, sub: str) -> str:
        return c.ws_path(self.id, sub)

    async def refresh(self) -> WorkspaceInfo:
        """Reads the workspace's description again."""
        self.info = WorkspaceInfo.from_json(await self.broker._json("GET", self._p("")))
        return self.info

    async def delete(self) -> None:
        """Deletes the workspace (its commands killed, its data destroyed)."""
        await self.broker._send("DELETE", self._p(""))

    async def set_env(self, env: Mapping[str, str], *,
                      secret_env: Optional[Mapping[str, str]] = None) -> WorkspaceInfo:
        """Replaces the workspace's environment (commands started later see it)."""
        vars_ = [{"name": k, "value": v} for k, v in env.items()]
        vars_ += [{"name": k, "value": v, "secret": True} for k, v in (secret_env or {}).items()]
        self.info = WorkspaceInfo.from_json(
            await self.broker._json("PUT", self._p("/env"), json_body={"env": vars_}))
        return self.info

    # --- files ---

    async def read_bytes(self, path: str) -> bytes:
        """The whole file (use open() for large ones)."""
        return (await self.broker._send("GET", self._p("/files"), params={"path": path})).content

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read_bytes(path)).decode(encoding)

    async def write_bytes(self, path: str, data: Any, *, mkdirs: bool = False) -> None:
        """Replaces the file atomically with data: bytes, str, a binary file
        or an iterable of bytes (both streamed, never held whole)."""
        params = {"path": path, **({"mkdirs": "1"} if mkdirs else {})}
        body = bytes(data) if isinstance(data, (bytes, bytearray)) else io.body_chunks(data)
        await self.broker._send("PUT", self._p("/files"), params=params, content=body,
                                headers={"Content-Type": "application/octet-stream"},
                                timeout=None if not isinstance(body, bytes) else _DEFAULT)

    async def write_text(self, path: str, text: str, *, mkdirs: bool = False) -> None:
        await self.write_bytes(path, text.encode(), mkdirs=mkdirs)

    def open(self, path: str) -> "AsyncFileReader":
        """The file as a stream, memory bounded whatever its size:
        ``async with ws.open(p) as f: async for chunk in f: ...``
        or ``await f.read(n)``."""
        return AsyncFileReader(self, path)

    async def stat(self, path: str, *, access: Optional[str] = None) -> FileInfo:
        """The file's description; access ('r', 'w', 'rw') is checked first."""
        params = c.drop_none({"path": path, "access": c.access_param(access)})
        return FileInfo.from_json(await self.broker._json("GET", self._p("/stat"), params=params))

    async def exists(self, path: str) -> bool:
        from .errors import NotExist
        try:
            await self.stat(path)
            return True
        except NotExist:
            return False

    async def listdir(self, path: str = ".") -> List[FileInfo]:
        """The directory's entries, sorted by name."""
        return c.parse_dir(await self.broker._json("GET", self._p("/dirs"), params={"path": path}))

    async def mkdir(self, path: str) -> None:
        """mkdir -p."""
        await self.broker._send("POST", self._p("/dirs"), params={"path": path})

    async def realpath(self, path: str) -> str:
        d = await self.broker._json("GET", self._p("/realpath"), params={"path": path})
        return str(d["path"])

    async def glob(self, pattern: str, *, cwd: str = ".", ignore: Optional[Sequence[str]] = None,
                   limit: Optional[int] = None) -> GlobResult:
        """fd's glob from cwd (.gitignore respected; directories end in /)."""
        body = c.drop_none({"pattern": pattern, "cwd": cwd, "ignore": list(ignore or []) or None,
                            "limit": limit})
        return c.parse_glob(await self.broker._json("POST", self._p("/glob"), json_body=body))

    async def grep(self, pattern: str, path: str = ".", *, glob: Optional[str] = None,
                   ignore_case: bool = False, literal: bool = False, context: int = 0,
                   limit: Optional[int] = None) -> SearchResult:
        """ripgrep's search, run where the files are."""
        body = c.drop_none({"pattern": pattern, "path": path, "glob": glob,
                            "ignoreCase": ignore_case or None, "literal": literal or None,
                            "context": context or None, "limit": limit})
        return c.parse_search(await self.broker._json("POST", self._p("/search"), json_body=body))

    # --- commands ---

    def stream(self, command: str, *, timeout: Optional[float] = None, env: c.Env = None,
               cwd: Optional[str] = None, stdin: Any = None,
               client_timeout: Optional[float] = None) -> "AsyncExecStream":
        """Runs ``bash -c command`` and yields its output chunks as they
        come; ``result`` holds its exit once iterated to the end. timeout is
        the broker's (the exit then says timed_out); client_timeout is this
        client's: past it the connection is dropped, the broker kills the
        command's whole tree, and Timeout is raised. Closing the stream (or
        leaving its with block) before the end kills the command the same way."""
        return AsyncExecStream(self, c.exec_body(command, cwd, env, timeout), stdin, client_timeout)

    async def run(self, command: str, *, timeout: Optional[float] = None, env: c.Env = None,
                  cwd: Optional[str] = None, stdin: Any = None,
                  client_timeout: Optional[float] = None) -> RunResult:
        """Runs ``bash -c command`` to its end: exit code and whole output.
        stdin: bytes, str, a binary file or an iterable of bytes. Without
        client_timeout, a command with a timeout is given up by the client
        30 s after it (the broker should have ended it by then)."""
        if client_timeout is None and timeout is not None:
            client_timeout = timeout + 30
        chunks: List[bytes] = []
        async with self.stream(command, timeout=timeout, env=env, cwd=cwd, stdin=stdin,
                               client_timeout=client_timeout) as s:
            async for chunk in s:
                chunks.append(chunk)
        assert s.result is not None
        return RunResult(exit_code=s.result.exit_code, output=b"".join(chunks), result=s.result)

    def pty(self, command: str = "bash", *, rows: int = 24, cols: int = 80, cwd: Optional[str] = None,
            env: c.Env = None, timeout: Optional[float] = None) -> "AsyncTerminal":
        """A command on a pseudo-terminal over the broker's WebSocket route:
        ``async with ws.pty("bash") as t: await t.write("ls\\n"); await t.read()``."""
        if not (1 <= rows <= 1000 and 1 <= cols <= 1000):
            raise ValueError(f"rows and cols must be 1 to 1000, got {rows}x{cols}")
        q = c.exec_query(c.exec_body(command, cwd, env, timeout))
        q += [("rows", str(rows)), ("cols", str(cols))]
        return AsyncTerminal(self, self._p("/exec/tty") + "?" + urlencode(q))

    # --- archives ---

    async def upload(self, src: Any, path: str = ".") -> ArchiveReport:
        """Lands the local directory src (its contents) in the workspace's
        directory path, as one tar stream made while it is sent. src may
        also be a tar already: a binary file, bytes, or an iterable of bytes."""
        import os
        body = io.tar_chunks(src) if isinstance(src, (str, os.PathLike)) else io.body_chunks(src)
        d = await self.broker._json("PUT", self._p("/archive"), params={"path": path},
                                    content=body, timeout=None,
                                    headers={"Content-Type": "application/x-tar"})
        return ArchiveReport.from_json(d)

    def download_tar(self, path: str = ".", *, compression: str = "none") -> "AsyncDownload":
        """The directory path as a tar stream (compression none, gzip or
        zstd): ``async with ws.download_tar("src") as t: async for chunk in t``."""
        if compression not in ("none", "gzip", "zstd"):
            raise ValueError(f"compression must be none, gzip or zstd, got {compression!r}")
        return AsyncDownload(self, self._p("/archive"), {"path": path, "compression": compression})

    async def download(self, path: str, dest: Any) -> None:
        """Extracts the workspace's directory path into the local directory
        dest, streamed (links and modes kept; names leaving dest refused)."""
        ex = TarExtractor(dest)
        try:
            async with self.download_tar(path) as t:
                async for chunk in t:
                    await io.extract_into(ex, chunk)
        finally:
            await io.extract_into(ex, None)
        await io.in_thread(ex.finish)


class AsyncFileReader:
    """A workspace file read as a stream (GET /files)."""

    def __init__(self, ws: AsyncWorkspace, path: str) -> None:
        self._ws, self.path = ws, path
        self._resp: Optional[httpx.Response] = None
        self._it: Optional[AsyncIterator[bytes]] = None
        self._buf = b""
        self._eof = False

    async def _open(self) -> None:
        if self._resp is None:
            self._resp = await self._ws.broker._send(
                "GET", self._ws._p("/files"), params={"path": self.path}, stream=True)
            self._it = self._resp.aiter_raw()

    async def __aenter__(self) -> "AsyncFileReader":
        await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __aiter__(self) -> "AsyncFileReader":
        return self

    async def __anext__(self) -> bytes:
        if self._buf:
            b, self._buf = self._buf, b""
            return b
        b = await self._next()
        if not b:
            raise StopAsyncIteration
        return b

    async def _next(self) -> bytes:
        await self._open()
        assert self._it is not None
        if self._eof:
            return b""
        try:
            return await self._it.__anext__()
        except StopAsyncIteration:
            self._eof = True
            return b""
        except httpx.TransportError as e:  # a cut body is an error, never a short file
            raise _transport_error(e, f"reading {self.path}") from e

    async def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left when n < 0); b"" at the end."""
        while n < 0 or len(self._buf) < n:
            b = await self._next()
            if not b:
                break
            self._buf += b
        if n < 0:
            n = len(self._buf)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    async def close(self) -> None:
        if self._resp is not None:
            await self._resp.aclose()


class AsyncDownload(AsyncFileReader):
    """A directory as a tar stream (GET /archive)."""

    def __init__(self, ws: AsyncWorkspace, route: str, params: Dict[str, str]) -> None:
        super().__init__(ws, params["path"])
        self._route, self._params = route, params

    async def _open(self) -> None:
        if self._resp is None:
            self._resp = await self._ws.broker._send("GET", self._route, params=self._params,
                                                     stream=True, timeout=None)
            self._it = self._resp.aiter_raw()

    async def __aenter__(self) -> "AsyncDownload":
        await self._open()
        return self


class AsyncExecStream:
    """A running command's output (see AsyncWorkspace.stream)."""

    def __init__(self, ws: AsyncWorkspace, body: Dict[str, Any], stdin: Any,
                 client_timeout: Optional[float]) -> None:
        self._ws, self._body, self._stdin = ws, body, stdin
        self._client_timeout = client_timeout
        self._resp: Optional[httpx.Response] = None
        self._it: Optional[AsyncIterator[bytes]] = None
        self._lines: Optional[c.ExecLines] = None
        self._pending: List[bytes] = []
        self._deadline: Optional[float] = None
        self.result: Optional[ExecResult] = None

    async def _open(self) -> None:
        if self._resp is not None:
            return
        if self._client_timeout is not None:
            self._deadline = io.monotonic() + self._client_timeout
        b = self._ws.broker
        kw: Dict[str, Any] = {"headers": {"Accept": "application/x-ndjson"},
                              "timeout": httpx.Timeout(b.timeout, read=self._client_timeout),
                              "stream": True}
        if self._stdin is None:
            kw["json_body"] = self._body
        else:
            kw["params"] = c.exec_query(self._body)
            kw["content"] = io.body_chunks(self._stdin)
            kw["headers"]["Content-Type"] = "application/octet-stream"
        try:
            self._resp = await io.within(b._send("POST", self._ws._p("/exec"), **kw),
                                         self._remaining())
        except _TIMEOUTS as e:
            raise Timeout(f"exec: no answer within {self._client_timeout} s", status=0) from e
        self._it = self._resp.aiter_raw()
        self._lines = c.ExecLines(self._resp.status_code, self._resp.headers.get("x-request-id"))

    def _remaining(self) -> Optional[float]:
        return None if self._deadline is None else self._deadline - io.monotonic()

    async def __aenter__(self) -> "AsyncExecStream":
        await self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __aiter__(self) -> "AsyncExecStream":
        return self

    async def __anext__(self) -> bytes:
        await self._open()
        assert self._it is not None and self._lines is not None
        while not self._pending:
            if self.result is not None:
                await self._drain()
                raise StopAsyncIteration
            rem = self._remaining()
            if rem is not None and rem <= 0:
                await self._timed_out()
            try:
                chunk = await io.within(self._it.__anext__(), rem)
            except StopAsyncIteration:
                await self.close()
                raise c.incomplete("exec") from None
            except _TIMEOUTS as e:
                await self._timed_out(e)
            except httpx.TransportError as e:
                await self.close()
                raise _transport_error(e, "exec") from e
            try:
                self._pending += self._lines.feed(chunk)
            except BrokerError:
                await self.close()
                raise
            self.result = self._lines.result
        return self._pending.pop(0)

    async def _drain(self) -> None:
        """Reads the body's end after the exit line, so that the connection
        goes back to the pool instead of being closed (which would cost the
        next call a new connection)."""
        assert self._it is not None
        try:
            async for _ in self._it:
                pass
        except httpx.TransportError:
            pass
        await self.close()

    async def _timed_out(self, cause: Optional[BaseException] = None) -> None:
        await self.close()
        raise Timeout(f"exec {self._body['command']!r}: no end within the client's "
                      f"{self._client_timeout} s; the connection was dropped, which kills "
                      "the command", status=0) from cause

    async def close(self) -> None:
        """Stops reading; a command still running is killed by the broker
        (its whole tree) when the connection drops."""
        if self._resp is not None:
            await self._resp.aclose()


_TIMEOUTS: Tuple[Type[BaseException], ...] = (httpx.TimeoutException, TimeoutError)
try:  # asyncio.TimeoutError is TimeoutError from Python 3.11 on
    import asyncio as _asyncio
    _TIMEOUTS += (_asyncio.TimeoutError,)
except ImportError:  # pragma: no cover
    pass


class AsyncTools:
    """The seven tools of the pi coding agent, with pi's results."""

    def __init__(self, ws: AsyncWorkspace) -> None:
        self._ws = ws

    async def call(self, name: str, args: Optional[Dict[str, Any]] = None, *,
                   on_update: Optional[Callable[[ToolResult], Any]] = None) -> ToolResult:
        """Calls a tool by name. A tool's failure is a result with is_error
        (as the model sees it), not an exception. on_update gets the
        partial results while it runs (bash's output tail)."""
        route = self._ws._p("/tools/" + name)
        b = self._ws.broker
        if on_update is None:
            return ToolResult.from_json(await b._json("POST", route, json_body=args or {},
                                                      timeout=None))
        resp = await b._send("POST", route, json_body=args or {}, stream=True, timeout=None,
                             headers={"Accept": "application/x-ndjson"})
        try:
            buf = b""
            async for chunk in resp.aiter_raw():
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    kind, res = c.tool_stream_result(line, None)
                    if kind == "result":
                        return res
                    on_update(res)
        except httpx.TransportError as e:
            raise _transport_error(e, f"tool {name}") from e
        finally:
            await resp.aclose()
        raise c.incomplete(f"tool {name}")

    async def read(self, path: str, offset: Optional[int] = None,
                   limit: Optional[int] = None) -> ToolResult:
        return await self.call("read", c.drop_none({"path": path, "offset": offset, "limit": limit}))

    async def bash(self, command: str, timeout: Optional[float] = None, *,
                   on_update: Optional[Callable[[ToolResult], Any]] = None) -> ToolResult:
        return await self.call("bash", c.drop_none({"command": command, "timeout": timeout}),
                               on_update=on_update)

    async def edit(self, path: str, edits: Sequence[Union[Tuple[str, str], Dict[str, str]]]) -> ToolResult:
        """edits: (old_text, new_text) pairs or pi's {"oldText","newText"} dicts."""
        es = [e if isinstance(e, dict) else {"oldText": e[0], "newText": e[1]} for e in edits]
        return await self.call("edit", {"path": path, "edits": es})

    async def write(self, path: str, content: str) -> ToolResult:
        return await self.call("write", {"path": path, "content": content})

    async def grep(self, pattern: str, path: Optional[str] = None, *, glob: Optional[str] = None,
                   ignore_case: Optional[bool] = None, literal: Optional[bool] = None,
                   context: Optional[int] = None, limit: Optional[int] = None) -> ToolResult:
        return await self.call("grep", c.drop_none({
            "pattern": pattern, "path": path, "glob": glob, "ignoreCase": ignore_case,
            "literal": literal, "context": context, "limit": limit}))

    async def find(self, pattern: str, path: Optional[str] = None,
                   limit: Optional[int] = None) -> ToolResult:
        return await self.call("find", c.drop_none({"pattern": pattern, "path": path, "limit": limit}))

    async def ls(self, path: Optional[str] = None, limit: Optional[int] = None) -> ToolResult:
        return await self.call("ls", c.drop_none({"path": path, "limit": limit}))

    async def batch(self, calls: Sequence[Tuple[str, Dict[str, Any]]], *,
                    mode: str = "parallel") -> List[BatchResult]:
        """Several calls as pi's agent loop runs one message's: (name, args)
        pairs, answered in their order."""
        body = {"calls": [{"id": str(i), "name": n, "arguments": a} for i, (n, a) in enumerate(calls)],
                "mode": mode}
        d = await self._ws.broker._json("POST", self._ws._p("/tools"), json_body=body, timeout=None)
        return [BatchResult(r.get("id", ""), r["name"], ToolResult.from_json(r["result"]))
                for r in d.get("results") or []]


class AsyncProcesses:
    """Background processes by handle, and the workspace's live processes."""

    def __init__(self, ws: AsyncWorkspace) -> None:
        self._ws = ws

    def _p(self, proc: str, sub: str = "") -> str:
        return c.proc_path(self._ws.id, proc, sub)

    async def start(self, command: str, *, tag: Optional[str] = None, stdin: bool = False,
                    cwd: Optional[str] = None, env: c.Env = None,
                    timeout: Optional[float] = None) -> BackgroundProcess:
        """Starts ``bash -c command`` in the background; stdin=True keeps its
        stdin open for send_stdin."""
        body = c.exec_body(command, cwd, env, timeout)
        body.update(c.drop_none({"tag": tag, "stdin": stdin or None}))
        return BackgroundProcess.from_json(
            await self._ws.broker._json("POST", self._ws._p("/processes"), json_body=body))

    async def list(self) -> ProcessList:
        """Live processes (None where the backend does not list them) and
        background processes."""
        return c.parse_process_list(await self._ws.broker._json("GET", self._ws._p("/processes")))

    async def get(self, proc: str) -> BackgroundProcess:
        return BackgroundProcess.from_json(await self._ws.broker._json("GET", self._p(proc)))

    async def logs(self, proc: str, cursor: int = 0) -> Logs:
        """The output from byte cursor on, as far as written now; read again
        from the answer's cursor for more."""
        resp = await self._ws.broker._send("GET", self._p(proc, "/logs"),
                                           params={"offset": str(cursor)})
        lines = [json.loads(ln) for ln in resp.content.splitlines() if ln.strip()]
        return c.parse_logs(lines, cursor)

    async def follow(self, proc: str, cursor: int = 0) -> AsyncIterator[bytes]:
        """The output as it is written, from cursor, until the process ends
        (the broker's follow stream); a dropped connection is resumed from
        the byte after the last one received, so nothing comes twice."""
        b = self._ws.broker
        for _ in range(100):  # resumes; each one has made progress or ended
            resp = await b._send("GET", self._p(proc, "/logs"), stream=True, timeout=None,
                                 params={"offset": str(cursor), "follow": "true"})
            buf = b""
            try:
                async for chunk in resp.aiter_raw():
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if not line.strip():
                            continue
                        logs = c.parse_logs([json.loads(line)], cursor)
                        cursor = logs.cursor
                        if logs.data:
                            yield logs.data
                        if logs.result is not None or logs.error or logs.running:
                            return
            except httpx.TransportError:
                continue  # resume from cursor
            finally:
                await resp.aclose()
        raise c.incomplete("logs")

    async def send_stdin(self, proc: str, data: Any, *, close: bool = False) -> int:
        """Writes data (bytes, str, file, iterable) to the process's stdin;
        answers the bytes taken. close=True closes stdin after it."""
        params = {"close": "true"} if close else None
        d = await self._ws.broker._json("POST", self._p(proc, "/stdin"), params=params,
                                        content=io.body_chunks(data), timeout=None,
                                        headers={"Content-Type": "application/octet-stream"})
        return int(d["written"])

    async def close_stdin(self, proc: str) -> None:
        await self._ws.broker._send("DELETE", self._p(proc, "/stdin"))

    async def signal(self, proc: str, signal: str = "SIGTERM") -> None:
        """Sends a signal (SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2,
        SIGTERM) to the process's whole tree."""
        await self._ws.broker._send("POST", self._p(proc, "/signal"), json_body={"signal": signal})

    async def wait(self, proc: str, timeout: float = 30) -> BackgroundProcess:
        """The process once ended, or still running after timeout seconds
        (at most 600): a wait that times out is an answer, not an error."""
        return BackgroundProcess.from_json(await self._ws.broker._json(
            "GET", self._p(proc, "/wait"), params={"timeout": repr(float(timeout))},
            timeout=timeout + 30))

    async def kill(self, proc: str) -> BackgroundProcess:
        """Kills the process's whole tree if it runs, forgets it and its log;
        answers it as it ended."""
        return BackgroundProcess.from_json(await self._ws.broker._json("DELETE", self._p(proc)))

    async def kill_pids(self, pids: Optional[Sequence[int]] = None) -> int:
        """Kills the workspace's live processes named (all without pids)."""
        params = [("pid", str(p)) for p in pids] if pids else None
        d = await self._ws.broker._json("DELETE", self._ws._p("/processes"), params=params)
        return int(d["killed"])


class AsyncTerminal:
    """A command on a pseudo-terminal (GET /exec/tty, a WebSocket)."""

    def __init__(self, ws: AsyncWorkspace, target: str) -> None:
        self._ws, self._target = ws, target
        self._conn = io.WSConn()
        self._open = False
        self.result: Optional[ExecResult] = None

    async def __aenter__(self) -> "AsyncTerminal":
        await self.connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def connect(self) -> None:
        b = self._ws.broker
        u = urlsplit(b.url)
        tls: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            tls = b._verify if isinstance(b._verify, ssl.SSLContext) else ssl.create_default_context()
        port = u.port or (443 if tls else 80)
        target = (u.path.rstrip("/") or "") + self._target
        try:
            refused = await self._conn.connect(u.hostname or "127.0.0.1", port, tls, u.netloc, target,
                                               [("Authorization", f"Bearer {b._token}")], b.timeout)
        except (OSError, _asyncio.TimeoutError) as e:
            raise Unavailable(f"terminal: {e}", status=0) from e
        if refused is not None:
            raise from_problem(refused[0], refused[1], None)
        self._open = True

    async def write(self, data: Union[bytes, str]) -> None:
        """Types data at the terminal (a Ctrl-C, "\\x03", interrupts)."""
        await self._conn.send(2, data.encode() if isinstance(data, str) else data)

    async def resize(self, rows: int, cols: int) -> None:
        await self._conn.send(1, json.dumps({"type": "resize", "rows": rows, "cols": cols}).encode())

    async def read(self) -> bytes:
        """What the terminal displays next; b"" once the command has ended
        (then result holds its exit)."""
        while self._open:
            msg = await self._conn.recv()
            if msg is None:
                self._open = False
                break
            op, payload = msg
            if op == 2:
                return payload
            if op == 1:
                d = json.loads(payload)
                if d.get("type") == "exit":
                    self.result = ExecResult.from_json(d)
                elif d.get("type") == "error":
                    await self.close()
                    raise error_for(d.get("code", ""), 0, d.get("detail", ""))
            elif op == 9:
                await self._conn.send(10, payload)
            elif op == 8:
                self._open = False
                await self._conn.send(8, payload[:2])
        if self.result is None:
            raise c.incomplete("terminal")
        return b""

    async def read_all(self) -> bytes:
        """Everything displayed until the command ends."""
        out = []
        while True:
            b = await self.read()
            if not b:
                return b"".join(out)
            out.append(b)

    async def close(self) -> None:
        """Leaves; a command still running is killed (its whole tree)."""
        self._open = False
        await self._conn.close()
