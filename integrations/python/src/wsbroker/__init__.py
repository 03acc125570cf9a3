"""wsbroker: the Python SDK of the sandboxed workspace broker.

``Broker`` (sync) and ``AsyncBroker`` (asyncio) have the same surface::

    from wsbroker import Broker

    with Broker() as broker, broker.create("docker") as ws:
        ws.write_text("hello.py", "print('hi')\\n")
        print(ws.run("python3 hello.py").text)

See docs/sdk-python.md. Errors are ``BrokerError`` subclasses, one per code
of the broker's problem+json table (``wsbroker.errors``).
"""

from ._async import (AsyncBroker, AsyncDownload, AsyncExecStream, AsyncFileReader,
                     AsyncProcesses, AsyncTerminal, AsyncTools, AsyncWorkspace)
from ._common import DEFAULT_URL
from ._sync import (Broker, Download, ExecStream, FileReader, Processes, Terminal, Tools,
                    Workspace)
from .errors import (ERRORS, BadRequest, BrokerError, Canceled, Conflict, Denied, Exists,
                     Internal, Invalid, IsDir, MethodNotAllowed, MisdirectedRequest, NotDir,
                     NotExist, NotFound, Permission, PolicyDenied, QuotaExceeded, Timeout,
                     TooLarge, TooManyRequests, Unauthorized, Unavailable, UnsupportedMediaType)
from .types import (ArchiveReport, BackgroundProcess, BatchResult, Content, ExecResult, FileInfo,
                    GlobResult, Logs, Process, ProcessList, RunResult, SearchLine, SearchResult,
                    ToolDefinition, ToolResult, WorkspaceInfo)

__version__ = "0.1.0"

__all__ = [
    "AsyncBroker", "AsyncDownload", "AsyncExecStream", "AsyncFileReader", "AsyncProcesses",
    "AsyncTerminal", "AsyncTools", "AsyncWorkspace", "Broker", "Download", "ExecStream",
    "FileReader", "Processes", "Terminal", "Tools", "Workspace", "DEFAULT_URL",
    "ERRORS", "BadRequest", "BrokerError", "Canceled", "Conflict", "Denied", "Exists",
    "Internal", "Invalid", "IsDir", "MethodNotAllowed", "MisdirectedRequest", "NotDir",
    "NotExist", "NotFound", "Permission", "PolicyDenied", "QuotaExceeded", "Timeout", "TooLarge",
    "TooManyRequests", "Unauthorized", "Unavailable", "UnsupportedMediaType",
    "ArchiveReport", "BackgroundProcess", "BatchResult", "Content", "ExecResult", "FileInfo",
    "GlobResult", "Logs", "Process", "ProcessList", "RunResult", "SearchLine", "SearchResult",
    "ToolDefinition", "ToolResult", "WorkspaceInfo",
]
