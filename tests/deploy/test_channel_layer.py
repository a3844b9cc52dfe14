"""The Redis channel layer as deployed: a tab on the process that runs the turn sees the
answer while it streams (and can stop it), and quiet sockets are not torn down."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import subprocess
import sys
import threading
import time

import pytest
from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer
from django.utils.module_loading import import_string

from core.channel_layer import LocalFirstRedisChannelLayer
from core.embedded import start_valkey
from core.realtime import LAYER_ERRORS
from sessions_app.models import Message
from tests.chat.conftest import events_until, settle
from tests.conftest import ROOT, RUN_ID

LONG_REPLY = " ".join(f"word{i}" for i in range(80)) + "."


@pytest.fixture
def deployed_layer(redis_url, settings):
    """The layer configured the way settings/deployment.py configures it for REDIS_URL."""
    deployed = deployed_layer_settings(redis_url)
    settings.CHANNEL_LAYERS = {
        "default": {**deployed, "CONFIG": {**deployed["CONFIG"], "prefix": f"{RUN_ID}deploy"}}
    }
    return redis_url


def deployed_layer_settings(redis_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["REDIS_URL"] = redis_url
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, django; from django.conf import settings; django.setup(); "
            "print(json.dumps(settings.CHANNEL_LAYERS['default']))",
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
    [host] = deployed_layer_settings(redis_url)["CONFIG"]["hosts"]
    assert host["socket_timeout"] > RedisChannelLayer.brpop_timeout


def test_a_lagging_process_loses_no_stream_events(redis_url):
    """All sockets of one ASGI process share one Redis inbox, and group_send drops
    silently once it holds `capacity` messages. 100 busy tabs whose process fell behind by
    30 events each must all still get every event."""
    deployed = deployed_layer_settings(redis_url)
    layer = import_string(deployed["BACKEND"])(**{**deployed["CONFIG"], "prefix": f"{RUN_ID}lag"})

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


# --- the local-first layer: sockets of this process without Redis ---------------------------


class Process(LocalFirstRedisChannelLayer):
    """The deployed layer, counting the messages it read back from Redis."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_from_redis = 0

    async def _pop_inbox(self, client):
        got = await super()._pop_inbox(client)
        self.read_from_redis += len(got)
        return got


def two_processes(redis_url: str, prefix: str, **config) -> list[Process]:
    """Two layers on one Redis, as two ASGI processes have (each its own client prefix)."""
    hosts = [{"address": redis_url, "socket_timeout": 30}]
    return [Process(hosts=hosts, prefix=f"{RUN_ID}{prefix}", **config) for _ in range(2)]


async def tabs(layer: Process, group: str, n: int = 1) -> list[str]:
    """`n` connected tabs of `layer`'s process in `group`, one of them already reading
    (what a connected socket does: it waits in receive)."""
    channels = [await layer.new_channel() for _ in range(n)]
    for channel in channels:
        await layer.group_add(group, channel)
    reading = asyncio.ensure_future(layer.receive(await layer.new_channel()))
    await asyncio.sleep(0)
    reading.cancel()
    return channels


def test_a_group_message_reaches_this_process_directly_and_the_other_through_redis(redis_url):
    here, there = two_processes(redis_url, "lf-group")

    async def scenario():
        [mine], [theirs] = await tabs(here, "session.one"), await tabs(there, "session.one")
        await here.group_send("session.one", {"type": "client.event", "seq": 1, "pair": (1, 2)})
        got_mine = await asyncio.wait_for(here.receive(mine), 5)
        got_theirs = await asyncio.wait_for(there.receive(theirs), 5)
        with contextlib.suppress(TimeoutError):
            extra = await asyncio.wait_for(here.receive(mine), 0.5)
            raise AssertionError(f"delivered twice: {extra}")
        await here.flush()
        return got_mine, got_theirs

    got_mine, got_theirs = asyncio.run(scenario())
    assert (here.read_from_redis, there.read_from_redis) == (0, 1)
    # Both get the same copy Redis makes (a tuple comes back as a list either way).
    assert got_mine == got_theirs == {"type": "client.event", "seq": 1, "pair": [1, 2]}


def test_a_waiting_tab_wakes_for_a_direct_message(redis_url):
    # The tab is already in receive() when the message comes (the normal case of a socket).
    [here, _] = two_processes(redis_url, "lf-wake")

    async def scenario():
        [tab] = await tabs(here, "session.wake")
        waiting = asyncio.ensure_future(here.receive(tab))
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await here.group_send("session.wake", {"type": "client.event", "seq": 1})
        got = await asyncio.wait_for(waiting, 5)
        waited = time.monotonic() - started
        await here.flush()
        return got, waited

    got, waited = asyncio.run(scenario())
    assert got["seq"] == 1
    assert waited < 1  # not after the inbox's 5 s blocking read


def test_one_senders_messages_to_a_socket_of_this_process_keep_their_order(redis_url):
    [here, _] = two_processes(redis_url, "lf-order")

    async def scenario():
        [tab] = await tabs(here, "session.order")
        for seq in range(1, 31):
            if seq % 3:
                await here.group_send("session.order", {"type": "client.event", "seq": seq})
            else:
                await here.send(tab, {"type": "client.event", "seq": seq})
        seqs = [(await asyncio.wait_for(here.receive(tab), 5))["seq"] for _ in range(30)]
        await here.flush()
        return seqs

    assert asyncio.run(scenario()) == list(range(1, 31))


def test_a_full_socket_of_this_process_refuses_a_send_and_is_skipped_by_a_group(redis_url, caplog):
    [here, _] = two_processes(redis_url, "lf-full", capacity=2)

    async def scenario():
        full, other = await tabs(here, "session.full", 2)
        await here.send(full, {"type": "client.event", "seq": 1})
        await here.send(full, {"type": "client.event", "seq": 2})
        with pytest.raises(ChannelFull):
            await here.send(full, {"type": "client.event", "seq": 3})
        with caplog.at_level(logging.INFO, logger="core.channel_layer"):
            await here.group_send("session.full", {"type": "client.event", "seq": 4})
        seqs = [(await here.receive(full))["seq"] for _ in range(2)]
        other_got = (await asyncio.wait_for(here.receive(other), 5))["seq"]
        await here.flush()
        return seqs, other_got

    seqs, other_got = asyncio.run(scenario())
    assert seqs == [1, 2]  # nothing dropped from the queue, the new message refused
    assert other_got == 4
    assert "1 of 2 channels over capacity in group session.full" in caplog.text


def test_a_sender_on_another_event_loop_goes_through_redis_and_arrives(redis_url):
    # async_to_sync in a thread of its own runs a loop of its own: an asyncio queue must
    # not be touched from there, so the message takes the Redis path.
    [here, _] = two_processes(redis_url, "lf-loop")

    async def scenario():
        [tab] = await tabs(here, "session.loop")
        await asyncio.to_thread(
            asyncio.run, here.group_send("session.loop", {"type": "client.event", "seq": 7})
        )
        got = await asyncio.wait_for(here.receive(tab), 5)
        await here.flush()
        return got

    assert asyncio.run(scenario())["seq"] == 7
    assert here.read_from_redis == 1


def test_a_tab_that_left_the_group_gets_nothing_more_and_leaves_no_queue(redis_url):
    [here, _] = two_processes(redis_url, "lf-left")

    async def scenario():
        stays, leaves = await tabs(here, "session.left", 2)
        await here.group_discard("session.left", leaves)
        await here.group_send("session.left", {"type": "client.event", "seq": 1})
        got = await asyncio.wait_for(here.receive(stays), 5)
        await here.flush()
        return got

    assert asyncio.run(scenario())["seq"] == 1
    assert dict(here.receive_buffer) == {}  # the read queue went with its message


def test_every_waiting_tab_hears_when_redis_goes_away(tmp_path):
    server, url = start_valkey(tmp_path / "v")
    [here, _] = two_processes(url, "lf-down")
    stop = functools.cache(server.stop)  # once, whether the scenario got there or not

    async def scenario():
        waiting = [asyncio.ensure_future(here.receive(c)) for c in await tabs(here, "s.down", 3)]
        await asyncio.sleep(0.2)
        stop()
        return await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 20)

    try:
        outcomes = asyncio.run(scenario())
    finally:
        stop()
    assert len(outcomes) == 3
    assert all(isinstance(o, LAYER_ERRORS) for o in outcomes), outcomes


def test_one_layer_serves_one_event_loop_after_another_and_each_shuts_down(redis_url):
    # Django caches one layer per process; tests (and management commands) run one
    # asyncio.run after another on it. A loop that ended while the inbox reader was sending
    # a command to Redis used to lose the shutdown's cancellation and wait forever.
    [here, there] = two_processes(redis_url, "lf-loops")

    async def tab_opens_as_the_loop_ends(steps: int) -> None:
        # The socket's first receive starts this loop's reader; the loop ends `steps` later.
        reading = asyncio.ensure_future(here.receive(await here.new_channel()))
        for _ in range(steps):
            await asyncio.sleep(0)
        reading.cancel()

    async def a_tab_gets_its_event() -> dict:
        channel = await here.new_channel()
        await here.group_add("s.loops", channel)
        await there.group_send("s.loops", {"type": "client.event", "seq": 1})
        return await asyncio.wait_for(here.receive(channel), 10)

    finished: list[object] = []

    def loops() -> None:
        for steps in range(12):
            finished.append(asyncio.run(tab_opens_as_the_loop_ends(steps)))
        finished.append(asyncio.run(a_tab_gets_its_event()))

    runner = threading.Thread(target=loops, daemon=True)
    runner.start()
    runner.join(60)
    assert len(finished) == 13, f"loop {len(finished)} did not shut down"
    assert finished[-1]["seq"] == 1
