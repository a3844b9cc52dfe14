"""The Redis channel layer, with the sockets of this process reached without Redis.

channels_redis' core layer sends every message through Redis, even to a socket of the same
process, and each process reads its messages back one at a time: an eval, a BZPOPMIN, a ZADD
to a backup queue and a ZPOPMIN to clear it, with one of the process's waiting sockets doing
the reading for all of them. A streaming answer goes from the turn to the socket of the
person who asked, which nginx routed to the process the turn runs in, so under load every
process queued its own deltas behind that loop (200 people: turn overhead p95 6.4 s at 30 ms
coalescing).

This layer puts a message for a channel of this process straight into the queue its
receiver reads, and sends through Redis only to channels of other processes: tabs of the
same person on another process, a turn's control messages from a socket elsewhere, Celery
workers' events. Group membership stays in Redis (every process sees every member, group
expiry as before); a group send reads it in one round trip. What arrives from Redis for
this process is read by one task of its own (:meth:`_read_inbox`), which hands each message
to its channel's queue: receivers only wait on their queue, so a direct message wakes its
receiver at once, and a receiver that is cancelled (a closing socket) never interrupts the
read of a message meant for another.

What stays the same for receivers: each gets its own copy made by the layer's serializer
(so what cannot go through Redis fails here too), a full channel refuses a send
(ChannelFull) and is skipped by a group send, messages from one sender to one channel
arrive in order (a sender on the receivers' event loop always takes the direct path), and
when Redis is gone every waiting receiver gets the error. A sender on another event loop of
the process (``async_to_sync`` in a thread of its own) goes through Redis, as asyncio queues
may only be used from their own loop.

The default with Redis (HERMES_CHANNEL_LAYER=local-first); `redis` and `redis-pubsub` name
channels_redis' own layers.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool
from redis import asyncio as aioredis

logger = logging.getLogger(__name__)

#: Messages the inbox reader takes from Redis in one round trip when that many wait.
INBOX_BATCH = 100
#: How much longer than its blocking pop a read from Redis may take before it has failed.
READ_GRACE_S = 5


class _InboxFailed:
    """Put in the queue of each waiting receiver when the read from Redis failed."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class LocalFirstRedisChannelLayer(RedisChannelLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inbox = f"specific.{self.client_prefix}!"
        # The loop this process's channels are received on (the ASGI server's), and the
        # task there that reads what other processes sent to them.
        self._receiving_loop: asyncio.AbstractEventLoop | None = None
        self._reader: asyncio.Task[None] | None = None
        self._waiting: collections.Counter[str] = collections.Counter()

    def _direct(self, channel: str) -> bool:
        """True when `channel` belongs to this process and we run on its receivers' loop."""
        if not channel.startswith(self._inbox):
            return False
        try:
            return asyncio.get_running_loop() is self._receiving_loop
        except RuntimeError:
            return False

    def _deliver(self, channel: str, message: dict[str, Any]) -> bool:
        """Queue a copy of `message` for its receiver in this process; False if full."""
        queue = self.receive_buffer[channel]
        if queue.full():
            return False
        queue.put_nowait(self.deserialize(self.serialize(message)))
        return True

    # --- receiving ---------------------------------------------------------------------

    async def receive(self, channel: str) -> dict[str, Any]:
        if not channel.startswith(self._inbox):
            return await super().receive(channel)
        self._ensure_reader()
        queue = self.receive_buffer[channel]
        self._waiting[channel] += 1
        try:
            item = await queue.get()
        finally:
            self._waiting[channel] -= 1
            if not self._waiting[channel]:
                del self._waiting[channel]
                # An emptied queue goes (a socket's channel is not reused once it closes).
                if queue.empty() and self.receive_buffer.get(channel) is queue:
                    del self.receive_buffer[channel]
        if isinstance(item, _InboxFailed):
            raise item.error
        return item

    def _ensure_reader(self) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader
        if reader is not None and not reader.done():
            if self._receiving_loop is loop:
                return
            if self._receiving_loop is not None and not self._receiving_loop.is_closed():
                raise RuntimeError("Two event loops are trying to receive() on one channel layer")
        self._receiving_loop = loop
        self._reader = loop.create_task(self._read_inbox(), name=f"channel-inbox:{self._inbox}")

    async def _read_inbox(self) -> None:
        """Hand what Redis holds for this process's channels to their queues, until the
        loop ends; a failure goes to every waiting receiver (the next receive starts over).

        The reader has a connection of its own without a socket timeout: with one, redis-py
        writes through asyncio.wait_for, which on Python 3.11 swallows a cancellation that
        arrives as the write completes (the reader then blocked its loop's shutdown for
        good). Its reads are bounded by asyncio.timeout instead, which never does that."""
        index = self.consistent_hash(self._inbox)
        client = aioredis.Redis(
            connection_pool=create_pool({**self.hosts[index], "socket_timeout": None})
        )
        try:
            while True:
                for target, message in await self._pop_inbox(client):
                    for channel in target if isinstance(target, list) else [target]:
                        self.receive_buffer[channel].put_nowait(message)
        except Exception as error:  # noqa: BLE001 - whatever stopped the read, receivers hear it
            for channel in list(self._waiting):
                self.receive_buffer[channel].put_nowait(_InboxFailed(error))
        finally:
            await client.aclose(close_connection_pool=True)

    async def _pop_inbox(self, client: aioredis.Redis) -> list[tuple[Any, dict[str, Any]]]:
        """The messages waiting for this process (up to INBOX_BATCH in one round trip), or
        else the first to arrive within the blocking pop's timeout, as (target, message).

        No backup queue as channels_redis keeps for a receiver that may be cancelled: the
        inbox is this process's alone (its client prefix), so what a reader stopped between
        the pop and the queues would have been for sockets that are closing with it."""
        key = self.prefix + self._inbox
        async with asyncio.timeout(self.brpop_timeout + READ_GRACE_S):
            popped = await client.zpopmin(key, INBOX_BATCH)
            if not popped:
                got = await client.bzpopmin(key, timeout=self.brpop_timeout)
                popped = [] if got is None else [(got[1], got[2])]
        unpacked = []
        for member, _score in popped:
            message = self.deserialize(member)
            unpacked.append((message.pop("__asgi_channel__", self._inbox), message))
        return unpacked

    # --- sending -----------------------------------------------------------------------

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        if self._direct(channel):
            assert self.require_valid_channel_name(channel)
            if not self._deliver(channel, message):
                raise ChannelFull(channel)
            return
        await super().send(channel, message)

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert self.require_valid_group_name(group), "Group name not valid"
        key = self._group_key(group)
        pipe = self.connection(self.consistent_hash(group)).pipeline(transaction=False)
        pipe.zremrangebyscore(key, min=0, max=int(time.time()) - self.group_expiry)
        pipe.zrange(key, 0, -1)
        _expired, members = await pipe.execute()
        full = 0
        remote = []
        for channel in (member.decode("utf8") for member in members):
            if self._direct(channel):
                full += not self._deliver(channel, message)
            else:
                remote.append(channel)
        if remote:
            sent = await asyncio.gather(
                *(super(LocalFirstRedisChannelLayer, self).send(c, message) for c in remote),
                return_exceptions=True,
            )
            for outcome in sent:
                if isinstance(outcome, ChannelFull):
                    full += 1
                elif isinstance(outcome, BaseException):
                    raise outcome
        if full:
            # The same words as channels_redis' own log line, which operators grep for.
            logger.info("%s of %s channels over capacity in group %s", full, len(members), group)
