"""The Redis channel layer as deployed: a tab on the process that runs the turn sees the
answer while it streams (and can stop it), and quiet sockets are not torn down."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys

import pytest
from channels_redis.core import RedisChannelLayer

from sessions_app.models import Message
from tests.chat.conftest import events_until, settle
from tests.conftest import ROOT, RUN_ID

LONG_REPLY = " ".join(f"word{i}" for i in range(80)) + "."


@pytest.fixture
def deployed_layer(redis_url, settings):
    """The layer configured the way settings/deployment.py configures it for REDIS_URL."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {**deployed_config(redis_url), "prefix": f"{RUN_ID}deploy"},
        }
    }
    return redis_url


def deployed_config(redis_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["REDIS_URL"] = redis_url
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, django; from django.conf import settings; django.setup(); "
            "print(json.dumps(settings.CHANNEL_LAYERS['default']['CONFIG']))",
        ],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "hermes_site.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_socket_reads_outlast_the_layers_blocking_pop(redis_url):
    # channels_redis waits up to brpop_timeout in BZPOPMIN; a shorter socket timeout (the
    # redis-py 8 default is 5 s, the same) kills every socket that is quiet that long.
    [host] = deployed_config(redis_url)["hosts"]
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout


def test_a_lagging_process_loses_no_stream_events(redis_url):
    """All sockets of one ASGI process share one Redis inbox, and group_send drops
    silently once it holds `capacity` messages. 100 busy tabs whose process fell behind by
    30 events each must all still get every event."""
    config = {**deployed_config(redis_url), "prefix": f"{RUN_ID}lag"}
    layer = RedisChannelLayer(**config)

    async def scenario() -> list[list[int]]:
        tabs = [await layer.new_channel() for _ in range(100)]
        for n, tab in enumerate(tabs):
            await layer.group_add(f"session.{n}", tab)
        for seq in range(1, 31):
            for n in range(len(tabs)):
                await layer.group_send(f"session.{n}", {"type": "client.event", "seq": seq})
        received = []
        for tab in tabs:
            seqs = []
            with contextlib.suppress(TimeoutError):  # a dropped event never comes
                for _ in range(30):
                    seqs.append((await asyncio.wait_for(layer.receive(tab), 5))["seq"])
            received.append(seqs)
        await layer.flush()
        return received

    received = asyncio.run(scenario())
    assert all(seqs == list(range(1, 31)) for seqs in received)


@pytest.mark.django_db(transaction=True)
def test_the_tab_on_the_turns_own_process_sees_the_stream_and_can_stop_it(
    owner, scripted, sockets, deployed_layer
):
    scripted.chunk_delay = 0.05  # about four seconds for the whole answer
    scripted.enqueue(reply=LONG_REPLY)
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Tell me a lot"})
        before = await events_until(ws, "assistant.delta")
        session = before[0]["session"]
        # Reaches the turn while it streams only if this tab got the delta in time.
        await ws.send_json_to({"type": "chat.stop", "session": session})
        after = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return after[-1]

    done = asyncio.run(scenario())
    assert done["status"] == "interrupted"
    saved = Message.objects.get(pk=done["message_id"])
    assert saved.status == "interrupted"
    assert 0 < len(saved.content) < len(LONG_REPLY)
    assert LONG_REPLY.startswith(saved.content)
