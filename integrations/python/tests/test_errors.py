"""The exception classes against the wire table (wire/testdata/codes.json,
held equal to wire.Codes() by wire/codes_golden_test.go), and real errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import wsbroker
from wsbroker.errors import ERRORS, error_for, from_problem

CODES = Path(__file__).resolve().parents[3] / "wire" / "testdata" / "codes.json"


def test_every_wire_code_has_a_class() -> None:
    table = json.loads(CODES.read_text())
    missing = [c["name"] for c in table if c["name"] not in ERRORS]
    assert not missing, (f"{CODES} has codes the SDK has no exception class for: {missing}; "
                         "add them to integrations/python/src/wsbroker/errors.py")
    for c in table:
        cls = ERRORS[c["name"]]
        assert cls.status == c["status"], c
        assert getattr(wsbroker, cls.__name__) is cls  # exported
    assert list(ERRORS) == [c["name"] for c in table]  # same order: status fallback picks the first


def test_unknown_code_is_classified_by_status() -> None:
    assert type(error_for("brand_new", 409, "x")) is wsbroker.Exists
    assert type(error_for("", 502, "proxy")) is wsbroker.Unavailable
    assert type(error_for("", 418, "teapot")) is wsbroker.BrokerError
    e = from_problem(404, b'{"code":"not_exist","detail":"read a: no such file"}', "rid-1")
    assert isinstance(e, wsbroker.NotExist) and e.detail == "read a: no such file"
    assert e.request_id == "rid-1" and "rid-1" in str(e)
    assert isinstance(from_problem(500, b"<html>oops", None), wsbroker.Internal)


def test_real_errors(broker: wsbroker.Broker, broker_proc, local_ws: wsbroker.Workspace) -> None:
    with pytest.raises(wsbroker.Unauthorized) as e:
        wsbroker.Broker(broker_proc.url, "wrong-token").list()
    assert e.value.status == 401 and e.value.request_id
    with pytest.raises(wsbroker.Invalid):
        broker.create("no-such-backend")
    with pytest.raises(wsbroker.Invalid):
        broker.create("local", options={"bogus": 1})
    with pytest.raises(wsbroker.NotFound):
        broker.get("ws_AAAAAAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(wsbroker.NotFound):
        local_ws.tools.call("no_such_tool", {})
    local_ws.write_text("f", "x")
    with pytest.raises(wsbroker.NotDir):
        local_ws.listdir("f")
    with pytest.raises(wsbroker.Exists):
        local_ws.mkdir("f")
    with pytest.raises(wsbroker.Permission):
        local_ws.read_bytes("../../etc/passwd")
    with pytest.raises(wsbroker.Unavailable):
        wsbroker.Broker("http://127.0.0.1:9", "t").list()  # nothing listens
    gone = wsbroker.Workspace(broker, wsbroker.WorkspaceInfo(
        id="ws_AAAAAAAAAAAAAAAAAAAAAAAAAA", backend="local", root="/", created_at=None))
    with pytest.raises(wsbroker.NotFound):  # refused before the WebSocket upgrade
        with gone.pty("bash"):
            pass


def test_config_like_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from wsbroker._common import resolve
    for k in ("BROKER_URL", "BROKER_TOKEN", "BROKER_TOKEN_FILE", "BROKER_STATE_DIR"):
        monkeypatch.delenv(k, raising=False)
    env = {"HOME": str(tmp_path)}
    (tmp_path / ".local/state/wsbroker").mkdir(parents=True)
    (tmp_path / ".local/state/wsbroker/token").write_text("from-home\n")
    assert resolve(None, None, env) == ("http://127.0.0.1:8722", "from-home")
    (tmp_path / "xdg/wsbroker").mkdir(parents=True)
    (tmp_path / "xdg/wsbroker/token").write_text("from-xdg")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    assert resolve(None, None, env)[1] == "from-xdg"
    (tmp_path / "tf").write_text(" from-file \n")
    env["BROKER_TOKEN_FILE"] = str(tmp_path / "tf")
    assert resolve(None, None, env)[1] == "from-file"
    env.update(BROKER_TOKEN="from-env", BROKER_URL="http://h:1/")
    assert resolve(None, None, env) == ("http://h:1", "from-env")
    assert resolve("http://x", "arg", env) == ("http://x", "arg")
    with pytest.raises(wsbroker.Unauthorized, match="BROKER_TOKEN"):
        resolve(None, None, {"HOME": str(tmp_path / "nobody")})
    monkeypatch.setenv("BROKER_TOKEN", "t")
    monkeypatch.setenv("BROKER_URL", "http://127.0.0.1:1")
    assert wsbroker.Broker().url == "http://127.0.0.1:1"


def test_reads_retry_once_mutations_never() -> None:
    """A dropped connection: a GET is sent again once; a POST is not."""
    calls: list = []

    def handler(req: httpx.Request) -> httpx.Response:
        calls.append(req.method)
        if len(calls) == 1 or req.method == "POST":
            raise httpx.RemoteProtocolError("server disconnected", request=req)
        return httpx.Response(200, json={"workspaces": []})

    b = wsbroker.Broker("http://broker.test", "t", transport=httpx.MockTransport(handler))
    assert b.list() == [] and calls == ["GET", "GET"]
    calls.clear()
    with pytest.raises(wsbroker.Unavailable):
        b.create("local")
    assert calls == ["POST"]
    calls.clear()

    def always(req: httpx.Request) -> httpx.Response:
        calls.append(req.method)
        raise httpx.ReadError("reset", request=req)

    b2 = wsbroker.Broker("http://broker.test", "t", transport=httpx.MockTransport(always))
    with pytest.raises(wsbroker.Unavailable):
        b2.list()
    assert calls == ["GET", "GET"]  # once more, not forever
