"""The sync client. GENERATED from _async.py by scripts/gen_sync.py: do not
edit; edit _async.py and regenerate."""


from __future__ import annotations

import json
import ssl
from types import TracebackType
from typing import (Any, Iterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple,
                    Type, Union)
from urllib.parse import urlencode, urlsplit

import httpx

from . import _sio as io
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


class Broker:
    """A broker: ``Broker(url=None, token=None)`` finds both as the CLI
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
            httpx.HTTPTransport(verify=verify, limits=limits)
        self._http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self._token}"},
            timeout=timeout, verify=verify, limits=limits, transport=self._transport)

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    # --- the HTTP exchange, once for every call ---

    def _send(self, method: str, path: str, *, params: Any = None, json_body: Any = None,
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
                resp = self._transport.handle_request(req)
                resp.request = req
            except _DROPPED as e:
                if attempt + 1 < tries:
                    continue
                raise _transport_error(e, f"{method} {path}") from e
            except httpx.TransportError as e:
                raise _transport_error(e, f"{method} {path}") from e
            if resp.status_code >= 300:
                try:
                    body = resp.read()
                except httpx.TransportError:
                    body = b""
                resp.close()
                raise from_problem(resp.status_code, body, resp.headers.get("x-request-id"))
            if stream:
                return resp
            try:
                resp.read()
            except _DROPPED as e:
                if attempt + 1 < tries:
                    continue
                raise _transport_error(e, f"{method} {path}") from e
            except httpx.TransportError as e:
                raise _transport_error(e, f"{method} {path}") from e
            finally:
                resp.close()
            return resp
        raise AssertionError("unreachable")

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        resp = self._send(method, path, **kw)
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as e:
            raise Unavailable(f"{method} {path}: the answer is not JSON: {e}", status=0) from e

    # --- workspaces ---

    def create(self, backend: Optional[str] = None, *, options: Optional[Dict[str, Any]] = None,
                     profile: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None,
                     secret_env: Optional[Mapping[str, str]] = None,
                     keep: bool = False) -> "Workspace":
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
        info = WorkspaceInfo.from_json(self._json("POST", "/v1/workspaces", json_body=body))
        return Workspace(self, info, keep=keep)

    def get(self, workspace_id: str, *, keep: bool = True) -> "Workspace":
        """An existing workspace (NotFound when unknown). Kept on a with
        block's exit unless keep=False."""
        info = WorkspaceInfo.from_json(self._json("GET", c.ws_path(workspace_id)))
        return Workspace(self, info, keep=keep)

    def list(self) -> List[WorkspaceInfo]:
        """The caller's workspaces, oldest first."""
        d = self._json("GET", "/v1/workspaces")
        return [WorkspaceInfo.from_json(w) for w in d.get("workspaces") or []]

    def delete(self, workspace_id: str) -> None:
        """Deletes a workspace: its commands are killed, its data destroyed."""
        self._send("DELETE", c.ws_path(workspace_id))

    def tools(self) -> List[ToolDefinition]:
        """The seven tools' declarations as pi hands them to its model."""
        return c.parse_tools(self._json("GET", "/v1/tools"))


class Workspace:
    """One workspace: files, commands, tools, processes, terminals, archives."""

    def __init__(self, broker: Broker, info: WorkspaceInfo, *, keep: bool = True) -> None:
        self.broker = broker
        self.info = info
        self.id = info.id
        self.keep = keep
        self.tools = Tools(self)
        self.processes = Processes(self)

    def __repr__(self) -> str:
        return f"<Workspace {self.id} {self.info.backend} {self.info.root}>"

    @property
    def root(self) -> str:
        return self.info.root

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        if not self.keep:
            self.delete()

    def _p(self, sub: str) -> str:
        return c.ws_path(self.id, sub)

    def refresh(self) -> WorkspaceInfo:
        """Reads the workspace's description again."""
        self.info = WorkspaceInfo.from_json(self.broker._json("GET", self._p("")))
        return self.info

    def delete(self) -> None:
        """Deletes the workspace (its commands killed, its data destroyed)."""
        self.broker._send("DELETE", self._p(""))

    def set_env(self, env: Mapping[str, str], *,
                      secret_env: Optional[Mapping[str, str]] = None) -> WorkspaceInfo:
        """Replaces the workspace's environment (commands started later see it)."""
        vars_ = [{"name": k, "value": v} for k, v in env.items()]
        vars_ += [{"name": k, "value": v, "secret": True} for k, v in (secret_env or {}).items()]
        self.info = WorkspaceInfo.from_json(
            self.broker._json("PUT", self._p("/env"), json_body={"env": vars_}))
        return self.info

    # --- files ---

    def read_bytes(self, path: str) -> bytes:
        """The whole file (use open() for large ones)."""
        return (self.broker._send("GET", self._p("/files"), params={"path": path})).content

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (self.read_bytes(path)).decode(encoding)

    def write_bytes(self, path: str, data: Any, *, mkdirs: bool = False) -> None:
        """Replaces the file atomically with data: bytes, str, a binary file
        or an iterable of bytes (both streamed, never held whole)."""
        params = {"path": path, **({"mkdirs": "1"} if mkdirs else {})}
        body = bytes(data) if isinstance(data, (bytes, bytearray)) else io.body_chunks(data)
        self.broker._send("PUT", self._p("/files"), params=params, content=body,
                                headers={"Content-Type": "application/octet-stream"},
                                timeout=None if not isinstance(body, bytes) else _DEFAULT)

    def write_text(self, path: str, text: str, *, mkdirs: bool = False) -> None:
        self.write_bytes(path, text.encode(), mkdirs=mkdirs)

    def open(self, path: str) -> "FileReader":
        """The file as a stream, memory bounded whatever its size:
        ``with ws.open(p) as f: for chunk in f: ...``
        or ``f.read(n)``."""
        return FileReader(self, path)

    def stat(self, path: str, *, access: Optional[str] = None) -> FileInfo:
        """The file's description; access ('r', 'w', 'rw') is checked first."""
        params = c.drop_none({"path": path, "access": c.access_param(access)})
        return FileInfo.from_json(self.broker._json("GET", self._p("/stat"), params=params))

    def exists(self, path: str) -> bool:
        from .errors import NotExist
        try:
            self.stat(path)
            return True
        except NotExist:
            return False

    def listdir(self, path: str = ".") -> List[FileInfo]:
        """The directory's entries, sorted by name."""
        return c.parse_dir(self.broker._json("GET", self._p("/dirs"), params={"path": path}))

    def mkdir(self, path: str) -> None:
        """mkdir -p."""
        self.broker._send("POST", self._p("/dirs"), params={"path": path})

    def realpath(self, path: str) -> str:
        d = self.broker._json("GET", self._p("/realpath"), params={"path": path})
        return str(d["path"])

    def glob(self, pattern: str, *, cwd: str = ".", ignore: Optional[Sequence[str]] = None,
                   limit: Optional[int] = None) -> GlobResult:
        """fd's glob from cwd (.gitignore respected; directories end in /)."""
        body = c.drop_none({"pattern": pattern, "cwd": cwd, "ignore": list(ignore or []) or None,
                            "limit": limit})
        return c.parse_glob(self.broker._json("POST", self._p("/glob"), json_body=body))

    def grep(self, pattern: str, path: str = ".", *, glob: Optional[str] = None,
                   ignore_case: bool = False, literal: bool = False, context: int = 0,
                   limit: Optional[int] = None) -> SearchResult:
        """ripgrep's search, run where the files are."""
        body = c.drop_none({"pattern": pattern, "path": path, "glob": glob,
                            "ignoreCase": ignore_case or None, "literal": literal or None,
                            "context": context or None, "limit": limit})
        return c.parse_search(self.broker._json("POST", self._p("/search"), json_body=body))

    # --- commands ---

    def stream(self, command: str, *, timeout: Optional[float] = None, env: c.Env = None,
               cwd: Optional[str] = None, stdin: Any = None,
               client_timeout: Optional[float] = None) -> "ExecStream":
        """Runs ``bash -c command`` and yields its output chunks as they
        come; ``result`` holds its exit once iterated to the end. timeout is
        the broker's (the exit then says timed_out); client_timeout is this
        client's: past it the connection is dropped, the broker kills the
        command's whole tree, and Timeout is raised. Closing the stream (or
        leaving its with block) before the end kills the command the same way."""
        return ExecStream(self, c.exec_body(command, cwd, env, timeout), stdin, client_timeout)

    def run(self, command: str, *, timeout: Optional[float] = None, env: c.Env = None,
                  cwd: Optional[str] = None, stdin: Any = None,
                  client_timeout: Optional[float] = None) -> RunResult:
        """Runs ``bash -c command`` to its end: exit code and whole output.
        stdin: bytes, str, a binary file or an iterable of bytes. Without
        client_timeout, a command with a timeout is given up by the client
        30 s after it (the broker should have ended it by then)."""
        if client_timeout is None and timeout is not None:
            client_timeout = timeout + 30
        chunks: List[bytes] = []
        with self.stream(command, timeout=timeout, env=env, cwd=cwd, stdin=stdin,
                               client_timeout=client_timeout) as s:
            for chunk in s:
                chunks.append(chunk)
        assert s.result is not None
        return RunResult(exit_code=s.result.exit_code, output=b"".join(chunks), result=s.result)

    def pty(self, command: str = "bash", *, rows: int = 24, cols: int = 80, cwd: Optional[str] = None,
            env: c.Env = None, timeout: Optional[float] = None) -> "Terminal":
        """A command on a pseudo-terminal over the broker's WebSocket route:
        ``with ws.pty("bash") as t: t.write("ls\\n"); t.read()``."""
        if not (1 <= rows <= 1000 and 1 <= cols <= 1000):
            raise ValueError(f"rows and cols must be 1 to 1000, got {rows}x{cols}")
        q = c.exec_query(c.exec_body(command, cwd, env, timeout))
        q += [("rows", str(rows)), ("cols", str(cols))]
        return Terminal(self, self._p("/exec/tty") + "?" + urlencode(q))

    # --- archives ---

    def upload(self, src: Any, path: str = ".") -> ArchiveReport:
        """Lands the local directory src (its contents) in the workspace's
        directory path, as one tar stream made while it is sent. src may
        also be a tar already: a binary file, bytes, or an iterable of bytes."""
        import os
        body = io.tar_chunks(src) if isinstance(src, (str, os.PathLike)) else io.body_chunks(src)
        d = self.broker._json("PUT", self._p("/archive"), params={"path": path},
                                    content=body, timeout=None,
                                    headers={"Content-Type": "application/x-tar"})
        return ArchiveReport.from_json(d)

    def download_tar(self, path: str = ".", *, compression: str = "none") -> "Download":
        """The directory path as a tar stream (compression none, gzip or
        zstd): ``with ws.download_tar("src") as t: for chunk in t``."""
        if compression not in ("none", "gzip", "zstd"):
            raise ValueError(f"compression must be none, gzip or zstd, got {compression!r}")
        return Download(self, self._p("/archive"), {"path": path, "compression": compression})

    def download(self, path: str, dest: Any) -> None:
        """Extracts the workspace's directory path into the local directory
        dest, streamed (links and modes kept; names leaving dest refused)."""
        ex = TarExtractor(dest)
        try:
            with self.download_tar(path) as t:
                for chunk in t:
                    io.extract_into(ex, chunk)
        finally:
            io.extract_into(ex, None)
        io.in_thread(ex.finish)


class FileReader:
    """A workspace file read as a stream (GET /files)."""

    def __init__(self, ws: Workspace, path: str) -> None:
        self._ws, self.path = ws, path
        self._resp: Optional[httpx.Response] = None
        self._it: Optional[Iterator[bytes]] = None
        self._buf = b""
        self._eof = False

    def _open(self) -> None:
        if self._resp is None:
            self._resp = self._ws.broker._send(
                "GET", self._ws._p("/files"), params={"path": self.path}, stream=True)
            self._it = self._resp.iter_raw()

    def __enter__(self) -> "FileReader":
        self._open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "FileReader":
        return self

    def __next__(self) -> bytes:
        if self._buf:
            b, self._buf = self._buf, b""
            return b
        b = self._next()
        if not b:
            raise StopIteration
        return b

    def _next(self) -> bytes:
        self._open()
        assert self._it is not None
        if self._eof:
            return b""
        try:
            return self._it.__next__()
        except StopIteration:
            self._eof = True
            return b""
        except httpx.TransportError as e:  # a cut body is an error, never a short file
            raise _transport_error(e, f"reading {self.path}") from e

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is left when n < 0); b"" at the end."""
        while n < 0 or len(self._buf) < n:
            b = self._next()
            if not b:
                break
            self._buf += b
        if n < 0:
            n = len(self._buf)
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        if self._resp is not None:
            self._resp.close()


class Download(FileReader):
    """A directory as a tar stream (GET /archive)."""

    def __init__(self, ws: Workspace, route: str, params: Dict[str, str]) -> None:
        super().__init__(ws, params["path"])
        self._route, self._params = route, params

    def _open(self) -> None:
        if self._resp is None:
            self._resp = self._ws.broker._send("GET", self._route, params=self._params,
                                                     stream=True, timeout=None)
            self._it = self._resp.iter_raw()

    def __enter__(self) -> "Download":
        self._open()
        return self


class ExecStream:
    """A running command's output (see Workspace.stream)."""

    def __init__(self, ws: Workspace, body: Dict[str, Any], stdin: Any,
                 client_timeout: Optional[float]) -> None:
        self._ws, self._body, self._stdin = ws, body, stdin
        self._client_timeout = client_timeout
        self._resp: Optional[httpx.Response] = None
        self._it: Optional[Iterator[bytes]] = None
        self._lines: Optional[c.ExecLines] = None
        self._pending: List[bytes] = []
        self._deadline: Optional[float] = None
        self.result: Optional[ExecResult] = None

    def _open(self) -> None:
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
            self._resp = io.within(b._send("POST", self._ws._p("/exec"), **kw),
                                         self._remaining())
        except _TIMEOUTS as e:
            raise Timeout(f"exec: no answer within {self._client_timeout} s", status=0) from e
        self._it = self._resp.iter_raw()
        self._lines = c.ExecLines(self._resp.status_code, self._resp.headers.get("x-request-id"))

    def _remaining(self) -> Optional[float]:
        return None if self._deadline is None else self._deadline - io.monotonic()

    def __enter__(self) -> "ExecStream":
        self._open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __iter__(self) -> "ExecStream":
        return self

    def __next__(self) -> bytes:
        self._open()
        assert self._it is not None and self._lines is not None
        while not self._pending:
            if self.result is not None:
                self._drain()
                raise StopIteration
            rem = self._remaining()
            if rem is not None and rem <= 0:
                self._timed_out()
            try:
                chunk = io.within(self._it.__next__(), rem)
            except StopIteration:
                self.close()
                raise c.incomplete("exec") from None
            except _TIMEOUTS as e:
                self._timed_out(e)
            except httpx.TransportError as e:
                self.close()
                raise _transport_error(e, "exec") from e
            try:
                self._pending += self._lines.feed(chunk)
            except BrokerError:
                self.close()
                raise
            self.result = self._lines.result
        return self._pending.pop(0)

    def _drain(self) -> None:
        """Reads the body's end after the exit line, so that the connection
        goes back to the pool instead of being closed (which would cost the
        next call a new connection)."""
        assert self._it is not None
        try:
            for _ in self._it:
                pass
        except httpx.TransportError:
            pass
        self.close()

    def _timed_out(self, cause: Optional[BaseException] = None) -> None:
        self.close()
        raise Timeout(f"exec {self._body['command']!r}: no end within the client's "
                      f"{self._client_timeout} s; the connection was dropped, which kills "
                      "the command", status=0) from cause

    def close(self) -> None:
        """Stops reading; a command still running is killed by the broker
        (its whole tree) when the connection drops."""
        if self._resp is not None:
            self._resp.close()


_TIMEOUTS: Tuple[Type[BaseException], ...] = (httpx.TimeoutException, TimeoutError)
try:  # asyncio.TimeoutError is TimeoutError from Python 3.11 on
    import asyncio as _asyncio
    _TIMEOUTS += (_asyncio.TimeoutError,)
except ImportError:  # pragma: no cover
    pass


class Tools:
    """The seven tools of the pi coding agent, with pi's results."""

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws

    def call(self, name: str, args: Optional[Dict[str, Any]] = None, *,
                   on_update: Optional[Callable[[ToolResult], Any]] = None) -> ToolResult:
        """Calls a tool by name. A tool's failure is a result with is_error
        (as the model sees it), not an exception. on_update gets the
        partial results while it runs (bash's output tail)."""
        route = self._ws._p("/tools/" + name)
        b = self._ws.broker
        if on_update is None:
            return ToolResult.from_json(b._json("POST", route, json_body=args or {},
                                                      timeout=None))
        resp = b._send("POST", route, json_body=args or {}, stream=True, timeout=None,
                             headers={"Accept": "application/x-ndjson"})
        try:
            buf = b""
            for chunk in resp.iter_raw():
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
            resp.close()
        raise c.incomplete(f"tool {name}")

    def read(self, path: str, offset: Optional[int] = None,
                   limit: Optional[int] = None) -> ToolResult:
        return self.call("read", c.drop_none({"path": path, "offset": offset, "limit": limit}))

    def bash(self, command: str, timeout: Optional[float] = None, *,
                   on_update: Optional[Callable[[ToolResult], Any]] = None) -> ToolResult:
        return self.call("bash", c.drop_none({"command": command, "timeout": timeout}),
                               on_update=on_update)

    def edit(self, path: str, edits: Sequence[Union[Tuple[str, str], Dict[str, str]]]) -> ToolResult:
        """edits: (old_text, new_text) pairs or pi's {"oldText","newText"} dicts."""
        es = [e if isinstance(e, dict) else {"oldText": e[0], "newText": e[1]} for e in edits]
        return self.call("edit", {"path": path, "edits": es})

    def write(self, path: str, content: str) -> ToolResult:
        return self.call("write", {"path": path, "content": content})

    def grep(self, pattern: str, path: Optional[str] = None, *, glob: Optional[str] = None,
                   ignore_case: Optional[bool] = None, literal: Optional[bool] = None,
                   context: Optional[int] = None, limit: Optional[int] = None) -> ToolResult:
        return self.call("grep", c.drop_none({
            "pattern": pattern, "path": path, "glob": glob, "ignoreCase": ignore_case,
            "literal": literal, "context": context, "limit": limit}))

    def find(self, pattern: str, path: Optional[str] = None,
                   limit: Optional[int] = None) -> ToolResult:
        return self.call("find", c.drop_none({"pattern": pattern, "path": path, "limit": limit}))

    def ls(self, path: Optional[str] = None, limit: Optional[int] = None) -> ToolResult:
        return self.call("ls", c.drop_none({"path": path, "limit": limit}))

    def batch(self, calls: Sequence[Tuple[str, Dict[str, Any]]], *,
                    mode: str = "parallel") -> List[BatchResult]:
        """Several calls as pi's agent loop runs one message's: (name, args)
        pairs, answered in their order."""
        body = {"calls": [{"id": str(i), "name": n, "arguments": a} for i, (n, a) in enumerate(calls)],
                "mode": mode}
        d = self._ws.broker._json("POST", self._ws._p("/tools"), json_body=body, timeout=None)
        return [BatchResult(r.get("id", ""), r["name"], ToolResult.from_json(r["result"]))
                for r in d.get("results") or []]


class Processes:
    """Background processes by handle, and the workspace's live processes."""

    def __init__(self, ws: Workspace) -> None:
        self._ws = ws

    def _p(self, proc: str, sub: str = "") -> str:
        return c.proc_path(self._ws.id, proc, sub)

    def start(self, command: str, *, tag: Optional[str] = None, stdin: bool = False,
                    cwd: Optional[str] = None, env: c.Env = None,
                    timeout: Optional[float] = None) -> BackgroundProcess:
        """Starts ``bash -c command`` in the background; stdin=True keeps its
        stdin open for send_stdin."""
        body = c.exec_body(command, cwd, env, timeout)
        body.update(c.drop_none({"tag": tag, "stdin": stdin or None}))
        return BackgroundProcess.from_json(
            self._ws.broker._json("POST", self._ws._p("/processes"), json_body=body))

    def list(self) -> ProcessList:
        """Live processes (None where the backend does not list them) and
        background processes."""
        return c.parse_process_list(self._ws.broker._json("GET", self._ws._p("/processes")))

    def get(self, proc: str) -> BackgroundProcess:
        return BackgroundProcess.from_json(self._ws.broker._json("GET", self._p(proc)))

    def logs(self, proc: str, cursor: int = 0) -> Logs:
        """The output from byte cursor on, as far as written now; read again
        from the answer's cursor for more."""
        resp = self._ws.broker._send("GET", self._p(proc, "/logs"),
                                           params={"offset": str(cursor)})
        lines = [json.loads(ln) for ln in resp.content.splitlines() if ln.strip()]
        return c.parse_logs(lines, cursor)

    def follow(self, proc: str, cursor: int = 0) -> Iterator[bytes]:
        """The output as it is written, from cursor, until the process ends
        (the broker's follow stream); a dropped connection is resumed from
        the byte after the last one received, so nothing comes twice."""
        b = self._ws.broker
        for _ in range(100):  # resumes; each one has made progress or ended
            resp = b._send("GET", self._p(proc, "/logs"), stream=True, timeout=None,
                                 params={"offset": str(cursor), "follow": "true"})
            buf = b""
            try:
                for chunk in resp.iter_raw():
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
                resp.close()
        raise c.incomplete("logs")

    def send_stdin(self, proc: str, data: Any, *, close: bool = False) -> int:
        """Writes data (bytes, str, file, iterable) to the process's stdin;
        answers the bytes taken. close=True closes stdin after it."""
        params = {"close": "true"} if close else None
        d = self._ws.broker._json("POST", self._p(proc, "/stdin"), params=params,
                                        content=io.body_chunks(data), timeout=None,
                                        headers={"Content-Type": "application/octet-stream"})
        return int(d["written"])

    def close_stdin(self, proc: str) -> None:
        self._ws.broker._send("DELETE", self._p(proc, "/stdin"))

    def signal(self, proc: str, signal: str = "SIGTERM") -> None:
        """Sends a signal (SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2,
        SIGTERM) to the process's whole tree."""
        self._ws.broker._send("POST", self._p(proc, "/signal"), json_body={"signal": signal})

    def wait(self, proc: str, timeout: float = 30) -> BackgroundProcess:
        """The process once ended, or still running after timeout seconds
        (at most 600): a wait that times out is an answer, not an error."""
        return BackgroundProcess.from_json(self._ws.broker._json(
            "GET", self._p(proc, "/wait"), params={"timeout": repr(float(timeout))},
            timeout=timeout + 30))

    def kill(self, proc: str) -> BackgroundProcess:
        """Kills the process's whole tree if it runs, forgets it and its log;
        answers it as it ended."""
        return BackgroundProcess.from_json(self._ws.broker._json("DELETE", self._p(proc)))

    def kill_pids(self, pids: Optional[Sequence[int]] = None) -> int:
        """Kills the workspace's live processes named (all without pids)."""
        params = [("pid", str(p)) for p in pids] if pids else None
        d = self._ws.broker._json("DELETE", self._ws._p("/processes"), params=params)
        return int(d["killed"])


class Terminal:
    """A command on a pseudo-terminal (GET /exec/tty, a WebSocket)."""

    def __init__(self, ws: Workspace, target: str) -> None:
        self._ws, self._target = ws, target
        self._conn = io.WSConn()
        self._open = False
        self.result: Optional[ExecResult] = None

    def __enter__(self) -> "Terminal":
        self.connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def connect(self) -> None:
        b = self._ws.broker
        u = urlsplit(b.url)
        tls: Optional[ssl.SSLContext] = None
        if u.scheme == "https":
            tls = b._verify if isinstance(b._verify, ssl.SSLContext) else ssl.create_default_context()
        port = u.port or (443 if tls else 80)
        target = (u.path.rstrip("/") or "") + self._target
        try:
            refused = self._conn.connect(u.hostname or "127.0.0.1", port, tls, u.netloc, target,
                                               [("Authorization", f"Bearer {b._token}")], b.timeout)
        except (OSError, _asyncio.TimeoutError) as e:
            raise Unavailable(f"terminal: {e}", status=0) from e
        if refused is not None:
            raise from_problem(refused[0], refused[1], None)
        self._open = True

    def write(self, data: Union[bytes, str]) -> None:
        """Types data at the terminal (a Ctrl-C, "\\x03", interrupts)."""
        self._conn.send(2, data.encode() if isinstance(data, str) else data)

    def resize(self, rows: int, cols: int) -> None:
        self._conn.send(1, json.dumps({"type": "resize", "rows": rows, "cols": cols}).encode())

    def read(self) -> bytes:
        """What the terminal displays next; b"" once the command has ended
        (then result holds its exit)."""
        while self._open:
            msg = self._conn.recv()
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
                    self.close()
                    raise error_for(d.get("code", ""), 0, d.get("detail", ""))
            elif op == 9:
                self._conn.send(10, payload)
            elif op == 8:
                self._open = False
                self._conn.send(8, payload[:2])
        if self.result is None:
            raise c.incomplete("terminal")
        return b""

    def read_all(self) -> bytes:
        """Everything displayed until the command ends."""
        out = []
        while True:
            b = self.read()
            if not b:
                return b"".join(out)
            out.append(b)

    def close(self) -> None:
        """Leaves; a command still running is killed (its whole tree)."""
        self._open = False
        self._conn.close()
