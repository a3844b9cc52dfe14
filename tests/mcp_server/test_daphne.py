"""The MCP server under the real daphne, as `make run` and `make serve` start it (no ASGI
lifespan events): a client connects, lists, writes memory and reads it back."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

import pytest

from memory.models import MemoryEntry
from tests.conftest import ROOT, free_port, subprocess_env, wait_for

from .conftest import token_for, with_session


@pytest.fixture
def mcp_daphne(transactional_db, tmp_path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "daphne.log"
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    argv += ["--verbosity", "0", "hermes_site.asgi_proxy:application"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=subprocess_env(), stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return True
        except OSError:
            assert proc.poll() is None, log.read_text()
            return False

    try:
        wait_for(up, timeout=60, interval=0.2, what="daphne")
        yield f"{url}/mcp/"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_an_mcp_client_works_against_daphne(mcp_daphne, owner):
    key = token_for(owner, "memory:read", "memory:write", name="desktop")

    async def work(session):
        tools = await session.list_tools()
        added = await session.call_tool(
            "memory", {"action": "add", "target": "memory", "content": "Builds with make."}
        )
        again = await session.call_tool(
            "memory", {"action": "add", "target": "memory", "content": "Deploys with nginx."}
        )
        text = await session.read_resource("hermes://memory/MEMORY.md")
        return tools.tools, added, again, text.contents[0].text

    tools, added, again, text = with_session(mcp_daphne, key, work)
    assert [t.name for t in tools] == ["memory"]
    assert json.loads(added.content[0].text)["message"] == "Entry added."
    assert not again.isError
    assert text == "Builds with make.\n§\nDeploys with nginx."
    assert (
        MemoryEntry.objects.filter(owner=owner, source="mcp", source_client="desktop").count() == 2
    )
