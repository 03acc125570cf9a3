"""The Python blocks of docs/sdk-python.md and of the README run as a user
would run them (their environment naming the test broker), so the pages
cannot drift from what works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CI, REPO


def _blocks(path: Path) -> list:
    return re.findall(r"\n```python\n(.*?)\n```\n", path.read_text(), re.S)


def _run(code: str, broker_proc) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
    env.update(BROKER_URL=broker_proc.url, BROKER_TOKEN=broker_proc.token,
               PYTHONPATH=str(REPO / "integrations" / "python" / "src"))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, f"{code}\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_sdk_page_blocks(broker_proc) -> None:
    docker, local, aio = _blocks(REPO / "docs" / "sdk-python.md")[:3]
    assert 'create("docker")' in docker and 'create("local")' in local
    assert _run(local, broker_proc) == "0 hello from the local backend\n"
    assert _run(aio, broker_proc) == "".join(f"{i}\n" for i in range(10))
    if "docker" not in broker_proc.backends:
        if CI:
            pytest.fail("CI=true: the docker backend is not served")
        pytest.skip("docker is not served")
    assert re.fullmatch(r"0 hello from \S+\n", _run(docker, broker_proc))


def test_readme_block(broker_proc) -> None:
    (block,) = _blocks(REPO / "README.md")
    assert _run(block, broker_proc).startswith("one\n2\n")
