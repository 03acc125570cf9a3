"""The asyncio client: the same surface, and 100 concurrent calls."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import wsbroker


def test_async_surface(broker_proc, tmp_path: Path) -> None:
    async def main() -> None:
        async with wsbroker.AsyncBroker(broker_proc.url, broker_proc.token) as b:
            async with await b.create("local") as ws:
                await ws.write_text("a.txt", "one\n")
                assert await ws.read_text("a.txt") == "one\n"
                assert (await ws.stat("a.txt")).size == 4
                assert [e.name for e in await ws.listdir()] == ["a.txt"]
                assert (await ws.glob("*.txt")).paths == ["a.txt"]
                assert (await ws.grep("one")).lines[0].line == 1
                r = await ws.run("cat a.txt; exit 2")
                assert (r.exit_code, r.output) == (2, b"one\n")
                assert (await ws.run("wc -c", stdin=b"abc")).text.strip() == "3"
                chunks = [c async for c in ws.stream("echo 1; sleep 0.1; echo 2")]
                assert b"".join(chunks) == b"1\n2\n"
                assert "one" in (await ws.tools.read("a.txt")).text
                assert not (await ws.tools.bash("true")).is_error
                p = await ws.processes.start("echo bg")
                assert (await ws.processes.wait(p.id)).result.exit_code == 0
                assert (await ws.processes.logs(p.id)).data == b"bg\n"
                assert [c async for c in ws.processes.follow(p.id)] == [b"bg\n"]
                async with ws.open("a.txt") as f:
                    assert await f.read() == b"one\n"
                async with ws.pty("bash --norc") as t:
                    await t.write("echo $((6*7)); exit\n")
                    assert b"42" in await t.read_all()
                (tmp_path / "src").mkdir()
                (tmp_path / "src" / "x").write_text("x")
                assert (await ws.upload(tmp_path / "src", "up")).files == 1
                await ws.download("up", tmp_path / "back")
                assert (tmp_path / "back" / "x").read_text() == "x"
                with pytest.raises(wsbroker.NotExist):
                    await ws.read_bytes("missing")
                ws_id = ws.id
            with pytest.raises(wsbroker.NotFound):
                await b.get(ws_id)
    asyncio.run(main())


def test_async_100_concurrent_calls(broker_proc) -> None:
    async def main() -> None:
        async with wsbroker.AsyncBroker(broker_proc.url, broker_proc.token) as b:
            async with await b.create("local") as ws:
                await ws.write_text("f.txt", "x" * 4096)

                async def one(i: int) -> None:
                    if i % 2:
                        assert len(await ws.read_bytes("f.txt")) == 4096
                    else:
                        r = await ws.run(f"echo {i}")
                        assert r.text == f"{i}\n"
                await asyncio.gather(*(one(i) for i in range(100)))
                assert (await ws.processes.list()).processes == []
    asyncio.run(main())
