"""create(profile=...): a workspace spec of the broker's config."""

from __future__ import annotations

import asyncio

import pytest

import wsbroker
from conftest import PROFILE, BrokerProcess


def test_create_with_profile(broker: wsbroker.Broker) -> None:
    with broker.create(profile=PROFILE, env={"GREETING": "hi"}) as ws:
        assert ws.info.backend == "local"
        assert ws.run('printf %s "$GREETING"').output == b"hi"


def test_create_with_unknown_profile(broker: wsbroker.Broker) -> None:
    with pytest.raises(wsbroker.Invalid, match='no profile "nosuch" is configured'):
        broker.create(profile="nosuch")


def test_create_with_profile_and_backend(broker: wsbroker.Broker) -> None:
    with pytest.raises(wsbroker.Invalid, match="not both"):
        broker.create("local", profile=PROFILE)


def test_async_create_with_profile(broker_proc: BrokerProcess) -> None:
    async def main() -> str:
        async with wsbroker.AsyncBroker(broker_proc.url, broker_proc.token) as b:
            async with await b.create(profile=PROFILE) as ws:
                return ws.info.backend

    assert asyncio.run(main()) == "local"
