"""Cancellation and client-side timeouts kill the remote command (the
broker's disconnect rule), checked through the workspace's process list."""

from __future__ import annotations

import asyncio
import time

import pytest

import wsbroker


def _gone(ws: wsbroker.Workspace, marker: str, within: float = 15) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        procs = ws.processes.list().processes
        assert procs is not None, "the local backend lists its processes"
        if not [p for p in procs if marker in p.command]:
            return True
        time.sleep(0.1)
    return False


def _listed(ws: wsbroker.Workspace, marker: str) -> bool:
    return any(marker in p.command for p in ws.processes.list().processes or [])


def test_closed_stream_kills_the_command(local_ws: wsbroker.Workspace) -> None:
    s = local_ws.stream("echo started; sleep 701; echo never")
    assert next(iter(s)) == b"started\n"
    assert _listed(local_ws, "sleep 701")
    s.close()
    assert _gone(local_ws, "sleep 701")


def test_client_timeout_kills_the_command(local_ws: wsbroker.Workspace) -> None:
    t0 = time.monotonic()
    with pytest.raises(wsbroker.Timeout):
        local_ws.run("sleep 702", client_timeout=1)
    assert time.monotonic() - t0 < 10
    assert _gone(local_ws, "sleep 702")
    with pytest.raises(wsbroker.Timeout):  # a chatty command is given up all the same
        local_ws.run("while :; do echo x; sleep 0.05; done; sleep 703", client_timeout=1)
    assert _gone(local_ws, "sleep 0.05")


def test_async_cancel_kills_the_command(broker_proc, local_ws: wsbroker.Workspace) -> None:
    async def main() -> None:
        async with wsbroker.AsyncBroker(broker_proc.url, broker_proc.token) as b:
            ws = await b.get(local_ws.id)

            async def consume() -> None:
                async with ws.stream("echo started; sleep 704") as s:
                    async for _ in s:
                        pass
            task = asyncio.ensure_future(consume())
            for _ in range(100):
                if _listed(local_ws, "sleep 704"):
                    break
                await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with pytest.raises(wsbroker.Timeout):
                await ws.run("sleep 705", client_timeout=0.5)
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(ws.run("sleep 706"), 0.5)
    asyncio.run(main())
    for m in ("sleep 704", "sleep 705", "sleep 706"):
        assert _gone(local_ws, m), m
