"""The broker's answers as dataclasses (the JSON of docs/api.md, snake_case)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Optional


def _time(s: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time as Go writes it (nanoseconds, Z) to a datetime."""
    if not s:
        return None
    s = s.replace("Z", "+00:00")
    if "." in s:  # Python takes at most microseconds
        head, rest = s.split(".", 1)
        digits = "".join(c for c in rest if c.isdigit())
        tz = rest[len(digits):]
        s = f"{head}.{digits[:6].ljust(6, '0')}{tz}"
    return datetime.fromisoformat(s)


@dataclass(frozen=True)
class WorkspaceInfo:
    """A workspace's description (GET /v1/workspaces/{id})."""
    id: str
    backend: str
    root: str
    created_at: Optional[datetime]
    gone: str = ""
    disk: Optional[Dict[str, int]] = None
    env: List[Dict[str, Any]] = field(default_factory=list)
    confinement: Optional[Dict[str, Any]] = None
    transport: Optional[Dict[str, Any]] = None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WorkspaceInfo":
        return cls(id=d["id"], backend=d.get("backend", ""), root=d.get("root", ""),
                   created_at=_time(d.get("createdAt")), gone=d.get("gone", ""),
                   disk=d.get("disk"), env=d.get("env") or [],
                   confinement=d.get("confinement"), transport=d.get("transport"))


@dataclass(frozen=True)
class ExecResult:
    """How a command ended (opsapi.ExecResult): exit_code is 128+N for signal N."""
    exit_code: int
    signal: str = ""
    timed_out: bool = False
    canceled: bool = False
    oom_killed: bool = False
    memory_limit: int = 0
    killed: int = 0
    duration_ns: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ExecResult":
        return cls(exit_code=d.get("exitCode", 0), signal=d.get("signal", ""),
                   timed_out=d.get("timedOut", False), canceled=d.get("canceled", False),
                   oom_killed=d.get("oomKilled", False), memory_limit=d.get("memoryLimit", 0),
                   killed=d.get("killed", 0), duration_ns=d.get("durationNs", 0))


@dataclass(frozen=True)
class RunResult:
    """A finished command: its exit and its whole output (stdout and stderr
    interleaved as read)."""
    exit_code: int
    output: bytes
    result: ExecResult

    @property
    def text(self) -> str:
        """The output decoded as UTF-8 (invalid bytes replaced)."""
        return self.output.decode("utf-8", "replace")


@dataclass(frozen=True)
class FileInfo:
    """A file's description (opsapi.FileInfo; mime for images on stat)."""
    name: str
    type: str
    size: int
    mode: int
    mtime: Optional[datetime]
    symlink: bool = False
    mime: str = ""

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileInfo":
        return cls(name=d.get("name", ""), type=d.get("type", ""), size=d.get("size", 0),
                   mode=d.get("mode", 0), mtime=_time(d.get("mtime")),
                   symlink=d.get("symlink", False), mime=d.get("mime", ""))


@dataclass(frozen=True)
class GlobResult:
    """Paths matching a glob, relative to its cwd; directories end in /."""
    paths: List[str]
    limit_reached: bool = False
    hidden: int = 0


@dataclass(frozen=True)
class SearchLine:
    path: str
    line: int
    text: str
    match: bool


@dataclass(frozen=True)
class SearchResult:
    lines: List[SearchLine]
    limit_reached: bool = False
    hidden: int = 0


@dataclass(frozen=True)
class Content:
    """One block of a tool result: text, or an image (base64 data)."""
    type: str
    text: str = ""
    data: str = ""
    mime_type: str = ""

    def image_bytes(self) -> bytes:
        return base64.b64decode(self.data)


@dataclass(frozen=True)
class ToolResult:
    """pi's tool result: content blocks, the tool's details, is_error."""
    content: List[Content]
    details: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return "".join(c.text for c in self.content if c.type == "text")

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ToolResult":
        return cls(content=[Content(type=c.get("type", ""), text=c.get("text", ""),
                                    data=c.get("data", ""), mime_type=c.get("mimeType", ""))
                            for c in d.get("content") or []],
                   details=d.get("details"), is_error=d.get("isError", False))


@dataclass(frozen=True)
class BatchResult:
    id: str
    name: str
    result: ToolResult


@dataclass(frozen=True)
class LogSpan:
    first: int
    written: int


@dataclass(frozen=True)
class BackgroundProcess:
    """A background process (state running, exited or failed)."""
    id: str
    command: str
    state: str
    started_at: Optional[datetime]
    output: LogSpan
    tag: str = ""
    cwd: str = ""
    ended_at: Optional[datetime] = None
    result: Optional[ExecResult] = None
    error: str = ""
    stdin: bool = False
    usage: Optional[Dict[str, int]] = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "BackgroundProcess":
        out = d.get("output") or {}
        res = d.get("result")
        return cls(id=d["id"], command=d.get("command", ""), state=d.get("state", ""),
                   started_at=_time(d.get("startedAt")),
                   output=LogSpan(out.get("first", 0), out.get("written", 0)),
                   tag=d.get("tag", ""), cwd=d.get("cwd", ""), ended_at=_time(d.get("endedAt")),
                   result=ExecResult.from_json(res) if res else None, error=d.get("error", ""),
                   stdin=d.get("stdin", False), usage=d.get("usage"))


@dataclass(frozen=True)
class Process:
    """A live process of the workspace (served by the local backend)."""
    pid: int
    command: str


@dataclass(frozen=True)
class ProcessList:
    """GET /processes: live processes (None when the backend does not list
    them) and the background processes with handles."""
    processes: Optional[List[Process]]
    background: List[BackgroundProcess]


@dataclass(frozen=True)
class Logs:
    """A read of a background process's log from a cursor.

    ``data`` is the output from ``cursor`` on; ``cursor`` where to read next;
    ``dropped`` bytes the ring no longer held; ``result`` (or ``error``) once
    the process has ended, ``running`` while it still runs."""
    data: bytes
    cursor: int
    dropped: int = 0
    running: bool = False
    result: Optional[ExecResult] = None
    error: str = ""


@dataclass(frozen=True)
class ArchiveReport:
    """What an archive upload landed and what it refused (name, reason)."""
    files: int
    dirs: int
    links: int
    bytes: int
    refused: List[Dict[str, str]]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ArchiveReport":
        return cls(files=d.get("files", 0), dirs=d.get("dirs", 0), links=d.get("links", 0),
                   bytes=d.get("bytes", 0), refused=d.get("refused") or [])


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    parameters: Dict[str, Any]
    label: str = ""
    prompt_snippet: str = ""
