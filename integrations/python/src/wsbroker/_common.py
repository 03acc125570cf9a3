"""What the sync and asyncio clients share: configuration, request bodies,
answer parsing. No I/O here."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote

from .errors import BrokerError, Unauthorized, error_for
from .types import (BackgroundProcess, ExecResult, FileInfo, GlobResult, Logs, Process,
                    ProcessList, SearchLine, SearchResult, ToolDefinition, ToolResult)

#: The broker's default address, as the Go client's client.DefaultURL.
DEFAULT_URL = "http://127.0.0.1:8722"

#: Where an output or log line's base64 data begins, for the fast path.
_OUTPUT_PREFIX = b'{"type":"output","data":"'

Env = Union[Mapping[str, str], Sequence[str], None]


def state_dir(environ: Mapping[str, str]) -> Path:
    """The broker's state directory as the CLI finds it: $BROKER_STATE_DIR,
    else $XDG_STATE_HOME/wsbroker (when absolute), else
    ~/.local/state/wsbroker."""
    if environ.get("BROKER_STATE_DIR"):
        return Path(environ["BROKER_STATE_DIR"])
    xdg = environ.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "wsbroker"
    home = environ.get("HOME") or str(Path.home())
    return Path(home) / ".local" / "state" / "wsbroker"


def resolve(url: Optional[str], token: Optional[str],
            environ: Optional[Mapping[str, str]] = None) -> Tuple[str, str]:
    """The broker URL and token as the CLI picks them: the arguments, else
    $BROKER_URL (default 127.0.0.1:8722) and $BROKER_TOKEN, else the file
    $BROKER_TOKEN_FILE, else the token file `broker serve` writes in its
    state directory."""
    env = os.environ if environ is None else environ
    url = (url or env.get("BROKER_URL") or DEFAULT_URL).rstrip("/")
    if token:
        return url, token
    if env.get("BROKER_TOKEN"):
        return url, env["BROKER_TOKEN"]
    path = Path(env["BROKER_TOKEN_FILE"]) if env.get("BROKER_TOKEN_FILE") else \
        state_dir(env) / "token"
    try:
        tok = path.read_text().strip()
    except OSError as e:
        raise Unauthorized(f"no token: pass token=, set BROKER_TOKEN or point BROKER_TOKEN_FILE "
                           f"at the broker's token file ('broker serve' writes it on its first "
                           f"start): {e}", status=0) from e
    if not tok:
        raise Unauthorized(f"token file {path} is empty", status=0)
    return url, tok


def ws_path(ws_id: str, sub: str = "") -> str:
    return "/v1/workspaces/" + quote(ws_id, safe="") + sub


def proc_path(ws_id: str, proc: str, sub: str = "") -> str:
    return ws_path(ws_id, "/processes/" + quote(proc, safe="") + sub)


def env_list(env: Env) -> List[str]:
    """A command's env as the wire's KEY=VALUE list."""
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [f"{k}={v}" for k, v in env.items()]
    return list(env)


def exec_body(command: str, cwd: Optional[str], env: Env, timeout: Optional[float]) -> Dict[str, Any]:
    """exec's JSON body (wire.ExecRequest)."""
    if not isinstance(command, str):
        raise TypeError(f"command must be a str (run as bash -c), got {type(command).__name__}")
    body: Dict[str, Any] = {"command": command}
    if cwd:
        body["cwd"] = cwd
    if env:
        body["env"] = env_list(env)
    if timeout is not None:
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0 seconds, got {timeout}")
        body["timeout"] = timeout
    return body


def exec_query(body: Dict[str, Any]) -> List[Tuple[str, str]]:
    """exec's fields as the query of its stdin form (octet-stream body)."""
    q: List[Tuple[str, str]] = [("command", body["command"])]
    if "cwd" in body:
        q.append(("cwd", body["cwd"]))
    q += [("env", e) for e in body.get("env", [])]
    if "timeout" in body:
        q.append(("timeout", repr(float(body["timeout"]))))
    return q


def drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class ExecLines:
    """Splits an exec NDJSON body into events: feed chunks, get decoded
    output (bytes) and, at the end, the ExecResult. An error line raises."""

    def __init__(self, status: int, request_id: Optional[str]) -> None:
        self._buf = b""
        self._status, self._rid = status, request_id
        self.result: Optional[ExecResult] = None

    def feed(self, chunk: bytes) -> List[bytes]:
        self._buf += chunk
        out: List[bytes] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                return out
            line, self._buf = self._buf[:i], self._buf[i + 1:]
            data = self._line(line)
            if data:
                out.append(data)

    def _line(self, raw: bytes) -> Optional[bytes]:
        if raw.startswith(_OUTPUT_PREFIX) and raw.endswith(b'"}') and b"\\" not in raw:
            return base64.b64decode(raw[len(_OUTPUT_PREFIX):-2])
        if not raw.strip():
            return None
        d = json.loads(raw)
        t = d.get("type")
        if t == "output":
            return base64.b64decode(d.get("data", ""))
        if t == "exit":
            self.result = ExecResult.from_json(d)
        elif t == "error":
            raise error_for(d.get("code", ""), self._status, d.get("detail", ""), self._rid)
        return None


def incomplete(what: str) -> BrokerError:
    """The error of a stream that ended before its last line."""
    return error_for("unavailable", 503, f"{what} stream ended without its last line "
                     "(the connection was lost)")


def parse_logs(lines: List[Dict[str, Any]], cursor: int) -> Logs:
    """A non-following log read's lines as one Logs."""
    data, dropped = [], 0
    running, result, err = False, None, ""
    for d in lines:
        t = d.get("type")
        if t == "output":
            data.append(base64.b64decode(d.get("data", "")))
            cursor = d.get("offset", cursor) + len(data[-1])
        elif t == "dropped":
            dropped += d.get("next", 0) - d.get("offset", 0)
            cursor = d.get("next", cursor)
        elif t == "end":
            running, cursor = True, d.get("offset", cursor)
        elif t == "exit":
            cursor, result = d.get("offset", cursor), ExecResult.from_json(d.get("result") or {})
        elif t == "error":
            cursor, err = d.get("offset", cursor), d.get("detail", "") or d.get("code", "")
    return Logs(data=b"".join(data), cursor=cursor, dropped=dropped, running=running,
                result=result, error=err)


def parse_process_list(d: Dict[str, Any]) -> ProcessList:
    procs = d.get("processes")
    return ProcessList(
        processes=None if procs is None else [Process(p["pid"], p.get("command", "")) for p in procs],
        background=[BackgroundProcess.from_json(b) for b in d.get("background") or []])


def parse_glob(d: Dict[str, Any]) -> GlobResult:
    return GlobResult(paths=d.get("paths") or [], limit_reached=d.get("limitReached", False),
                      hidden=d.get("hidden", 0))


def parse_search(d: Dict[str, Any]) -> SearchResult:
    return SearchResult(lines=[SearchLine(x.get("path", ""), x.get("line", 0), x.get("text", ""),
                                          x.get("match", False)) for x in d.get("lines") or []],
                        limit_reached=d.get("limitReached", False), hidden=d.get("hidden", 0))


def parse_dir(d: Dict[str, Any]) -> List[FileInfo]:
    return [FileInfo.from_json(e) for e in d.get("entries") or []]


def parse_tools(d: Dict[str, Any]) -> List[ToolDefinition]:
    return [ToolDefinition(name=t["name"], description=t.get("description", ""),
                           parameters=t.get("parameters") or {}, label=t.get("label", ""),
                           prompt_snippet=t.get("promptSnippet", "")) for t in d.get("tools") or []]


def tool_stream_result(raw: bytes, last: Optional[ToolResult]) -> Tuple[str, ToolResult]:
    d = json.loads(raw)
    return d.get("type", ""), ToolResult.from_json(d.get("result") or {})


def access_param(mode: Optional[str]) -> Optional[str]:
    if mode is None:
        return None
    if mode not in ("r", "w", "rw"):
        raise ValueError(f"access must be 'r', 'w' or 'rw', got {mode!r}")
    return mode
