"""_sync.py is generated from _async.py; a stale one fails here."""

import importlib.util
from pathlib import Path

import wsbroker

HERE = Path(__file__).resolve().parent


def test_sync_is_generated_from_async() -> None:
    spec = importlib.util.spec_from_file_location("gen_sync", HERE.parent / "scripts" / "gen_sync.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    current = (HERE.parent / "src" / "wsbroker" / "_sync.py").read_text()
    assert current == gen.generate(), "run: /usr/bin/python3 integrations/python/scripts/gen_sync.py"


def test_same_surface() -> None:
    pairs = [(wsbroker.Broker, wsbroker.AsyncBroker), (wsbroker.Workspace, wsbroker.AsyncWorkspace),
             (wsbroker.Tools, wsbroker.AsyncTools), (wsbroker.Processes, wsbroker.AsyncProcesses),
             (wsbroker.Terminal, wsbroker.AsyncTerminal)]
    for s, a in pairs:
        pub = lambda cls: {n for n in dir(cls) if not n.startswith("_")}  # noqa: E731
        assert pub(s) == pub(a), (s, pub(s) ^ pub(a))


def test_typed() -> None:
    assert (Path(wsbroker.__file__).parent / "py.typed").exists()
