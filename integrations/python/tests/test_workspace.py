"""Every method of the sync client against the real broker, on local and on
docker (when served)."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import pytest

import wsbroker


def test_create_get_list_delete(broker: wsbroker.Broker, ws: wsbroker.Workspace, backend: str) -> None:
    assert ws.id.startswith("ws_") and ws.info.backend == backend and ws.root
    assert broker.get(ws.id).info.id == ws.id
    assert ws.id in [w.id for w in broker.list()]
    assert ws.refresh().created_at is not None
    other = broker.create(backend, env={"A": "1"}, secret_env={"S": "hush"})
    with other:
        assert other.run('echo "$A $S"').text == "1 [REDACTED:S]\n"
        other.set_env({"B": "2"})
        assert other.run('echo "${A:-none} $B"').text == "none 2\n"
    with pytest.raises(wsbroker.NotFound) as e:
        broker.get(other.id)  # deleted on leaving the with block
    assert e.value.code == "not_found" and e.value.status == 404 and e.value.request_id
    kept = broker.create(backend, keep=True)
    with kept:
        pass
    assert broker.get(kept.id).id == kept.id
    broker.delete(kept.id)
    assert kept.id not in [w.id for w in broker.list()]


def test_tool_definitions(broker: wsbroker.Broker) -> None:
    assert [t.name for t in broker.tools()] == ["read", "bash", "edit", "write", "grep", "find", "ls"]


def test_seven_tools(ws: wsbroker.Workspace) -> None:
    t = ws.tools
    assert not t.write("src/a.txt", "one\ntwo\nthree\n").is_error
    assert t.read("src/a.txt", offset=2, limit=1).text.startswith("two")
    r = t.edit("src/a.txt", [("two", "2")])
    assert not r.is_error and r.details and "diff" in r.details
    assert "2" in ws.read_text("src/a.txt")
    assert t.bash("echo hi; exit 4").is_error
    updates: list = []
    res = t.bash("echo one; sleep 0.3; echo two", on_update=updates.append)
    assert "two" in res.text and updates
    assert "src/a.txt:1: one" in t.grep("one").text
    assert "a.txt" in t.find("*.txt").text
    assert "src/" in t.ls().text
    bad = t.read("missing.txt")
    assert bad.is_error and "missing.txt" in bad.text
    results = t.batch([("ls", {"path": "src"}), ("read", {"path": "src/a.txt"})], mode="sequential")
    assert [r.name for r in results] == ["ls", "read"] and "a.txt" in results[0].result.text


def test_files(ws: wsbroker.Workspace) -> None:
    ws.write_bytes("d/e/f.bin", b"\x00\x01" * 1000, mkdirs=True)
    assert ws.read_bytes("d/e/f.bin") == b"\x00\x01" * 1000
    st = ws.stat("d/e/f.bin", access="rw")
    assert st.size == 2000 and st.type == "file" and not st.is_dir
    ws.mkdir("d/g")
    assert [e.name for e in ws.listdir("d")] == ["e", "g"]
    assert ws.realpath("d/e").endswith("/d/e")
    assert ws.exists("d/e/f.bin") and not ws.exists("nope")
    ws.write_bytes("stream.bin", io.BytesIO(os.urandom(3 << 20)))
    with ws.open("stream.bin") as f:
        head = f.read(10)
        rest = f.read()
    assert len(head) == 10 and len(head) + len(rest) == 3 << 20
    assert head + rest == ws.read_bytes("stream.bin")
    ws.write_bytes("gen.txt", (f"{i}\n".encode() for i in range(1000)))
    assert ws.read_text("gen.txt").count("\n") == 1000
    with pytest.raises(wsbroker.NotExist):
        ws.read_bytes("nope")
    with pytest.raises(wsbroker.IsDir) as e:
        ws.read_bytes("d")
    assert isinstance(e.value, wsbroker.Conflict)
    with pytest.raises(wsbroker.NotExist):
        ws.write_bytes("no/parent/x", b"x")


def test_glob_grep(ws: wsbroker.Workspace) -> None:
    for p in ("a.go", "pkg/b.go", "pkg/c.txt", "node_modules/x.go"):
        ws.write_text(p, "package x // TODO\n", mkdirs=True)
    g = ws.glob("*.go", ignore=["**/node_modules/**"])
    assert sorted(g.paths) == ["a.go", "pkg/b.go"]
    assert ws.glob("*", limit=1).limit_reached
    s = ws.grep("todo", ignore_case=True, glob="*.go")
    assert {ln.path for ln in s.lines} >= {"a.go", "pkg/b.go"} and all(ln.match for ln in s.lines)
    assert ws.grep("TODO", literal=True, limit=1).limit_reached
    with pytest.raises(wsbroker.Invalid):
        ws.grep("(")


def test_run_and_stream(ws: wsbroker.Workspace) -> None:
    r = ws.run("echo out; echo err >&2; exit 3")
    assert r.exit_code == 3 and sorted(r.text.split()) == ["err", "out"]
    with pytest.raises(wsbroker.NotExist):
        ws.run("pwd", cwd="no-such-dir")
    assert ws.run("echo $X-$Y", env={"X": "1", "Y": "2"}).text == "1-2\n"
    assert ws.run("wc -c", stdin=b"x" * 100000).text.strip() == "100000"
    assert ws.run("cat", stdin=io.BytesIO(b"from a file")).text == "from a file"
    t = ws.run("sleep 5", timeout=0.5)
    assert t.result.timed_out and t.exit_code != 0
    chunks, times = [], []
    with ws.stream("for i in 1 2 3; do echo $i; sleep 0.3; done") as s:
        for c in s:
            chunks.append(c)
            times.append(time.monotonic())
    assert b"".join(chunks) == b"1\n2\n3\n" and s.result and s.result.exit_code == 0
    assert times[-1] - times[0] > 0.4  # chunks came as they were written
    with pytest.raises(wsbroker.Invalid):
        ws.run("   ")
    with pytest.raises(ValueError):
        ws.run("true", timeout=-1)


def test_processes(ws: wsbroker.Workspace) -> None:
    p = ws.processes.start("for i in 1 2 3; do echo line$i; sleep 0.2; done", tag="count")
    assert p.id.startswith("p-") and p.tag == "count"
    assert p.id in [b.id for b in ws.processes.list().background]
    done = ws.processes.wait(p.id, timeout=30)
    assert done.state == "exited" and done.result and done.result.exit_code == 0
    logs = ws.processes.logs(p.id)
    assert logs.data == b"line1\nline2\nline3\n" and not logs.running and logs.result
    assert ws.processes.logs(p.id, cursor=6).data == b"line2\nline3\n"
    assert b"".join(ws.processes.follow(p.id)) == logs.data
    live = ws.processes.start("echo a; sleep 2; echo b")
    got, states = [], []
    for chunk in ws.processes.follow(live.id):
        got.append(chunk)
        states.append(ws.processes.get(live.id).state)
    assert b"".join(got) == b"a\nb\n"
    assert states[0] == "running"  # the output comes as it is written, not at the end
    assert b"".join(ws.processes.follow(live.id, cursor=2)) == b"b\n"
    assert ws.processes.get(p.id).state == "exited"
    cat = ws.processes.start("cat", stdin=True)
    assert ws.processes.send_stdin(cat.id, b"hello ") == 6
    ws.processes.send_stdin(cat.id, "world", close=True)
    assert ws.processes.wait(cat.id).state == "exited"
    assert ws.processes.logs(cat.id).data == b"hello world"
    cat2 = ws.processes.start("cat", stdin=True)
    ws.processes.close_stdin(cat2.id)
    assert ws.processes.wait(cat2.id).result.exit_code == 0
    sl = ws.processes.start("sleep 600")
    ws.processes.signal(sl.id, "SIGINT")
    assert ws.processes.wait(sl.id).result.exit_code == 130
    sl2 = ws.processes.start("sleep 600")
    killed = ws.processes.kill(sl2.id)
    assert killed.state == "exited"
    with pytest.raises(wsbroker.NotExist):
        ws.processes.get(sl2.id)
    with pytest.raises(wsbroker.Invalid):
        ws.processes.signal(p.id, "SIGSTOP")


def test_live_processes(local_ws: wsbroker.Workspace) -> None:
    p = local_ws.processes.start("sleep 611")
    pids = _wait_for(local_ws, "sleep 611")
    assert local_ws.processes.kill_pids(pids) >= 1
    assert local_ws.processes.wait(p.id).state == "exited"
    local_ws.processes.start("sleep 612")
    _wait_for(local_ws, "sleep 612")
    assert local_ws.processes.kill_pids() >= 1


def _wait_for(ws: wsbroker.Workspace, cmd: str) -> list:
    for _ in range(100):
        procs = ws.processes.list().processes or []
        pids = [p.pid for p in procs if cmd in p.command]
        if pids:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"{cmd} never listed")


def test_pty(ws: wsbroker.Workspace) -> None:
    with ws.pty("bash --norc --noprofile", rows=30, cols=100) as t:
        t.resize(40, 120)
        t.write("stty size; echo pty-$((6*7)); exit 5\n")
        out = t.read_all()
    assert b"40 120" in out and b"pty-42" in out
    assert t.result is not None and t.result.exit_code == 5
    with pytest.raises(ValueError):
        ws.pty(rows=0)
    with pytest.raises(wsbroker.NotExist):
        with ws.pty("true", cwd="no-such-dir") as t:
            t.read_all()


def test_archives(ws: wsbroker.Workspace, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha\n")
    (src / "sub" / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "sub" / "run.sh").chmod(0o755)
    os.symlink("a.txt", src / "link")
    rep = ws.upload(src, "tree")
    assert (rep.files, rep.links) == (2, 1) and not rep.refused
    assert ws.run("tree/sub/run.sh && readlink tree/link").text == "ran\na.txt\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        ti = tarfile.TarInfo("../evil")
        ti.size = 1
        tf.addfile(ti, io.BytesIO(b"x"))
    bad = ws.upload(buf.getvalue(), "tree2")
    assert [r["name"] for r in bad.refused] == ["../evil"]
    back = tmp_path / "back"
    ws.download("tree", back)
    assert (back / "a.txt").read_text() == "alpha\n" and os.readlink(back / "link") == "a.txt"
    assert os.stat(back / "sub" / "run.sh").st_mode & 0o111
    with ws.download_tar("tree", compression="gzip") as t:
        data = b"".join(t)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tf:
        assert "sub/run.sh" in tf.getnames()
    with pytest.raises(wsbroker.NotExist):
        ws.download("missing", tmp_path / "x")
    with pytest.raises(ValueError):
        ws.download_tar("tree", compression="bz2")
