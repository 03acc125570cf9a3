"""The test session's broker: built from this checkout (`go build`), started
on a free loopback port with a generated config, the local backend always
and docker too when CI=true or an engine with the workspace image is there
(under CI=true a missing docker fails instead of skipping)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, List

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "integrations" / "python" / "src"))

import wsbroker  # noqa: E402

IMAGE = "wsbroker/workspace:current"
CI = os.environ.get("CI") == "true"
# The profile the session's broker is configured with.
PROFILE = "plain"


def _docker_ready() -> str:
    """'' when the docker engine and the workspace image are there, else why not."""
    if shutil.which("docker") is None:
        return "no docker command"
    r = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=60)
    if r.returncode != 0:
        return f"docker image inspect {IMAGE}: {r.stderr.decode().strip()}"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    def __init__(self, url: str, token: str, backends: List[str], state: Path, log: Path) -> None:
        self.url, self.token, self.backends, self.state, self.log = url, token, backends, state, log


@pytest.fixture(scope="session")
def broker_proc() -> Iterator[BrokerProcess]:
    tmp = Path(tempfile.mkdtemp(prefix="wsbroker-pytest-"))
    bindir = tmp / "bin"
    go = os.environ.get("GO", "go")
    # The broker, and beside it (static, as `make build` does) the helpers it
    # injects into containers: every cmd/wsb-*.
    helpers = [(d.name, f"./cmd/{d.name}", {"CGO_ENABLED": "0"})
               for d in sorted((REPO / "cmd").glob("wsb-*")) if d.is_dir()]
    for out, pkg, extra in [("broker", "./cmd/broker", {})] + helpers:
        subprocess.run([go, "build", "-o", str(bindir / out), pkg], cwd=REPO, check=True,
                       env={**os.environ, **extra}, timeout=600)
    why_not = _docker_ready()
    if why_not and CI:
        pytest.fail(f"CI=true and docker is not usable: {why_not}")
    backends = ["local"] + ([] if why_not else ["docker"])
    state = tmp / "state"
    port = _free_port()
    cfg = tmp / "broker.yaml"
    # No disk of its own for local workspaces: the 1 GiB download test
    # writes a 1 GiB file (serve's default disk is 1 GiB, docs/backends.md).
    cfg.write_text(f"listen: 127.0.0.1:{port}\nstateDir: {state}\ndefaultBackend: local\n"
                   "local:\n  limits:\n    diskBytes: -1\n"
                   # A profile for test_profiles.py: a create may name it.
                   f"profiles:\n  {PROFILE}:\n    backend: local\n"
                   + ("docker: {}\n" if "docker" in backends else ""))
    log = tmp / "broker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    with open(log, "wb") as logf:
        p = subprocess.Popen([str(bindir / "broker"), "serve", "--config", str(cfg)],
                             stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        token_file = state / "token"
        while True:
            if p.poll() is not None:
                pytest.fail(f"broker exited ({p.returncode}):\n{log.read_text()}")
            if token_file.exists() and _listening(port):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"broker did not listen within 120 s:\n{log.read_text()}")
            time.sleep(0.05)
        yield BrokerProcess(url, token_file.read_text().strip(), backends, state, log)
    finally:
        p.terminate()
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if os.environ.get("WSBROKER_TEST_KEEP") is None:
            shutil.rmtree(tmp, ignore_errors=True)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def broker(broker_proc: BrokerProcess) -> Iterator[wsbroker.Broker]:
    with wsbroker.Broker(broker_proc.url, broker_proc.token) as b:
        yield b


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`backend` runs a test on local, and on docker when it is served (the
    broker decides at session start; a docker test with no docker skips,
    and fails under CI=true)."""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["local", "docker"])


@pytest.fixture
def ws(broker: wsbroker.Broker, broker_proc: BrokerProcess, backend: str) -> Iterator[wsbroker.Workspace]:
    if backend not in broker_proc.backends:
        if CI:
            pytest.fail(f"CI=true: the {backend} backend is not served")
        pytest.skip(f"{backend}: {_docker_ready()}")
    with broker.create(backend) as w:
        yield w


@pytest.fixture
def local_ws(broker: wsbroker.Broker) -> Iterator[wsbroker.Workspace]:
    with broker.create("local") as w:
        yield w
