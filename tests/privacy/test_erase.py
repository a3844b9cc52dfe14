"""Erasure: deleting an account removes every row of the person in every table, their
files and queued socket messages, closes their sockets, and leaves their text nowhere in
the SQLite file (WAL included) or Redis; "Forget all memory" forgets exactly memory."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session as LoginSession
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from core.privacy import registry
from core.realtime import notice_to_user, publish, session_group, user_group
from hermes_site.asgi import application
from memory.models import MemoryEntry
from privacy import jobs
from privacy.erase import account_erase, channel_groups_purge
from privacy.export import build_export
from privacy.models import AdminContentAccess, ExportJob
from sessions_app.models import Session, SystemPrompt
from tests.factories import PASSWORD
from tests.privacy.conftest import login, seed

pytestmark = pytest.mark.django_db


def rows_of(user_id: int) -> dict[str, int]:
    return {e.label: e.rows(user_id).count() for e in registry.entries() if e.on_erase != "keep"}


def test_delete_api_needs_the_password_and_then_removes_every_row(
    owner, outsider, superuser, django_capture_on_commit_callbacks
):
    mine = seed(owner, "olv")
    seed(outsider, "osc")
    shared = SystemPrompt.objects.create(hash=SystemPrompt.digest("shared"), prompt="shared")
    Session.objects.filter(pk=mine.temporary.pk).update(system_prompt=shared)
    Session.objects.create(owner=outsider, title="uses shared", system_prompt=shared)
    AdminContentAccess.objects.create(viewer=superuser, subject=owner, action="view", model="x")
    client = login(owner)
    other_client = login(outsider)
    before = rows_of(owner.pk)
    assert all(before.values()), before  # the seed reaches every table
    theirs = rows_of(outsider.pk)

    refused = client.delete("/api/me/", {"password": "wrong"}, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "wrong_password"
    missing = client.delete("/api/me/", {}, content_type="application/json")
    assert missing.status_code == 400
    assert rows_of(owner.pk) == before

    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(
            "/api/me/", {"password": PASSWORD}, content_type="application/json"
        )
    assert response.status_code == 204
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    assert set(rows_of(owner.pk).values()) == {0}
    assert rows_of(outsider.pk) == theirs
    assert not SystemPrompt.objects.filter(pk=mine.session.system_prompt_id).exists()
    assert SystemPrompt.objects.filter(pk=shared.pk).exists()  # still someone else's
    # The audit record stays, anonymous.
    assert AdminContentAccess.objects.get().subject_id is None
    # Their login sessions are gone; the other person's stays.
    assert client.get("/api/me/").status_code in (401, 403)
    assert other_client.get("/api/me/").status_code == 200
    assert LoginSession.objects.count() == 1


def test_account_page_deletes_after_password_and_logs_out(
    owner, django_capture_on_commit_callbacks
):
    seed(owner, "olv")
    client = login(owner)
    wrong = client.post(reverse("account_delete"), {"password": "nope"}, follow=True)
    assert "That is not your password." in wrong.content.decode()
    assert get_user_model().objects.filter(pk=owner.pk).exists()
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(reverse("account_delete"), {"password": PASSWORD})
    assert done.status_code == 200 and "Account deleted" in done.content.decode()
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    assert client.get(reverse("dashboard")).status_code == 302  # logged out


def test_forget_all_memory_forgets_memory_and_nothing_else(owner, outsider):
    mine = seed(owner, "olv")
    seed(outsider, "osc")
    client = login(owner)
    unconfirmed = client.post(reverse("account_forget_memory"), follow=True)
    assert "Tick the box" in unconfirmed.content.decode()
    assert MemoryEntry.objects.filter(owner=owner).exists()
    client.post(reverse("account_forget_memory"), {"confirm": "forget"})
    for entry in registry.entries():
        if entry.memory:
            assert entry.rows(owner).count() == 0, entry.label
            assert entry.rows(outsider).count() > 0, entry.label
    assert Session.objects.filter(owner=owner).count() == 3
    assert mine.session.messages.count() == 4


def test_a_superuser_deletes_an_account_in_the_admin_without_reading_it(
    owner, superuser, django_capture_on_commit_callbacks
):
    mine = seed(owner, "olv")
    client = login(superuser)
    url = reverse("admin:auth_user_delete", args=[owner.pk])
    confirm = client.get(url).content.decode()
    assert not any(v in confirm for v in mine.all_markers())  # counts, never content
    with django_capture_on_commit_callbacks(execute=True):
        client.post(url, {"post": "yes"})
    assert not get_user_model().objects.filter(pk=owner.pk).exists()
    assert set(rows_of(owner.pk).values()) == {0}


@pytest.mark.django_db(transaction=True)
def test_erasure_closes_the_persons_open_sockets(owner):
    client = Client()
    client.force_login(owner)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def run():
        socket = WebsocketCommunicator(
            application,
            "/ws/chat/",
            headers=[
                (b"origin", b"http://127.0.0.1:8000"),
                (b"host", b"127.0.0.1:8000"),
                (b"cookie", cookie),
            ],
        )
        connected, _ = await socket.connect()
        assert connected
        await sync_to_async(account_erase)(user=owner, password=PASSWORD)
        output = await socket.receive_output(timeout=5)
        await socket.wait()
        # The erasure ran in a worker thread: close its connection (PostgreSQL test
        # databases cannot be dropped while one is open).
        await sync_to_async(connections.close_all)()
        return output

    assert asyncio.run(run())["type"] == "websocket.close"


def test_purging_groups_keeps_close_requests_and_other_peoples_messages(redis_channel_layer):
    layer = get_channel_layer()
    mine = async_to_sync(layer.new_channel)()
    theirs = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("user.9001", mine)
    async_to_sync(layer.group_add)("user.9002", theirs)
    notice_to_user(user_id=9001, kind="memory_saved", text="mine-secret")
    async_to_sync(layer.group_send)("user.9001", {"type": "auth.revoked"})
    notice_to_user(user_id=9002, kind="memory_saved", text="theirs-kept")
    assert channel_groups_purge(["user.9001"]) == 1

    async def drain(channel: str) -> list[dict]:
        received = []
        while True:
            try:
                received.append(await asyncio.wait_for(layer.receive(channel), 0.5))
            except TimeoutError:
                return received

    left_mine = async_to_sync(drain)(mine)
    left_theirs = async_to_sync(drain)(theirs)
    assert [m["type"] for m in left_mine] == ["auth.revoked"]
    assert [m["event"]["text"] for m in left_theirs] == ["theirs-kept"]


# --- nothing recoverable ---------------------------------------------------------------------


def sqlite_bytes() -> bytes:
    name = Path(connection.settings_dict["NAME"])
    parts = [name, name.with_name(name.name + "-wal")]
    return b"".join(p.read_bytes() for p in parts if p.exists())


def redis_bytes(url: str) -> bytes:
    import redis

    client = redis.Redis.from_url(url)
    chunks: list[bytes] = []
    for key in client.scan_iter(count=1000):
        chunks.append(key)
        kind = client.type(key)
        if kind == b"string":
            chunks.append(client.get(key) or b"")
        elif kind == b"zset":
            chunks += client.zrange(key, 0, -1)
        elif kind == b"list":
            chunks += client.lrange(key, 0, -1)
        elif kind == b"set":
            chunks += list(client.smembers(key))
        elif kind == b"hash":
            for k, v in client.hgetall(key).items():
                chunks += [k, v]
    client.close()
    return b"\n".join(chunks)


def files_bytes(root: Path) -> bytes:
    chunks = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            chunks.append(name.encode())
            chunks.append((Path(dirpath) / name).read_bytes())
    return b"\n".join(chunks)


@pytest.mark.django_db(transaction=True)
def test_after_deletion_the_persons_text_is_in_no_byte_of_the_database_redis_or_var(
    owner, outsider, var_export_dir, redis_channel_layer
):
    if connection.vendor != "sqlite":
        pytest.skip("byte-level check of the SQLite file (PostgreSQL is VACUUMed by a task)")
    mine = seed(owner, "olv")
    theirs = seed(outsider, "osc")
    job = jobs.export_job_start(user=owner)  # built inline: a zip under var/
    assert ExportJob.objects.get(pk=job.pk).status == "done"
    channel = "specific.privacytest!owner"
    async_to_sync(get_channel_layer().group_add)(user_group(owner.pk), channel)
    async_to_sync(get_channel_layer().group_add)(session_group(mine.session.pk), channel)
    notice_to_user(user_id=owner.pk, kind="memory_saved", text=f"Saved {mine.markers['memory']}")
    publish(
        session_group(mine.session.pk),
        {"type": "assistant.delta", "text": mine.markers["assistant"]},
    )
    markers = [m.encode() for m in mine.all_markers()]
    # The checks can fail: before erasure every marker is there to be found.
    db = sqlite_bytes()
    assert [m for m in markers if m not in db] == []
    assert mine.markers["assistant"].encode() in redis_bytes(redis_channel_layer)
    assert any(var_export_dir.iterdir())

    account_erase(user=owner, password=PASSWORD)

    db = sqlite_bytes()
    assert [m.decode() for m in markers if m in db] == []
    assert theirs.markers["assistant"].encode() in db  # the other person's data is intact
    in_redis = redis_bytes(redis_channel_layer)
    assert [m.decode() for m in markers if m in in_redis] == []
    # var/: the archive (and any leftover of its build) is gone.
    assert files_bytes(var_export_dir) == b""


@pytest.mark.django_db(transaction=True)
def test_after_deletion_the_persons_chinese_text_is_in_no_byte_of_the_database(owner, outsider):
    from sessions_app.models import Message

    if connection.vendor != "sqlite":
        pytest.skip("byte-level check of the SQLite file (PostgreSQL is VACUUMed by a task)")
    mine = Session.objects.create(owner=owner)
    Message.objects.create(session=mine, role="user", content="鹦鹉螺号的秘密航线")
    theirs = Session.objects.create(owner=outsider)
    Message.objects.create(session=theirs, role="user", content="麒麟书院的藏书目录")
    # The CJK index stores pairs of characters: every pair must go too.
    markers = [g.encode() for g in ("鹦鹉", "鹉螺", "螺号", "秘密航线", "航线")]
    assert [m for m in markers if m not in sqlite_bytes()] == []

    account_erase(user=owner, password=PASSWORD)

    db = sqlite_bytes()
    assert [m.decode() for m in markers if m in db] == []
    assert "麒麟".encode() in db  # the other person's text and grams are intact


def crashed_build(user) -> None:
    """An export build killed at 90 % (kill -9: no clean-up runs): its working directory,
    with the person's conversations in state.db, and its partial zip stay behind."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns

        def die(pct: int, _stage: str) -> None:
            if pct >= 90:
                os._exit(0)

        try:
            build_export(user=user, target=jobs.export_path_new(user=user), progress=die)
        finally:
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0


def test_erasure_removes_the_persons_crashed_export_builds_and_no_one_elses(
    owner, outsider, export_dir, django_capture_on_commit_callbacks
):
    mine, theirs = seed(owner, "olv"), seed(outsider, "osc")
    crashed_build(owner)
    crashed_build(outsider)
    builds = sorted(p.name for p in export_dir.iterdir())
    assert [n.split("-")[:2] for n in builds if n.startswith(".build-")] == sorted(
        [[".build", f"u{owner.pk}"], [".build", f"u{outsider.pk}"]]
    )
    title = mine.session.title.encode()
    assert title and title in files_bytes(export_dir)  # the check can fail

    with django_capture_on_commit_callbacks(execute=True):
        report = account_erase(user=owner, password=PASSWORD)

    left = files_bytes(export_dir)
    assert title not in left
    assert theirs.session.title.encode() in left  # the other person's build is theirs
    assert report.files == 2  # the build directory and the partial archive
    assert all(f"u{owner.pk}-" not in p.name for p in export_dir.iterdir())


def test_the_periodic_sweep_removes_crashed_builds_once_no_build_can_still_run(
    owner, export_dir, settings
):
    seed(owner, "olv")
    crashed_build(owner)
    leftovers = list(export_dir.iterdir())
    assert len(leftovers) == 2
    assert jobs.exports_expire() == 0  # it could be a build still running
    old = time.time() - settings.HERMES_EXPORT_TASK_LIMIT - 3700
    for path in leftovers:
        os.utime(path, (old, old))
    assert jobs.exports_expire() == 2
    assert list(export_dir.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_the_follow_up_task_scrubs_storage_on_either_database():
    from privacy.tasks import erasure_followup

    steps = erasure_followup.apply(args=(987654, ["user.987654"])).get()
    if connection.vendor == "postgresql":
        assert "VACUUM (ANALYZE)" in steps
    else:
        assert "fts5 optimize messages_fts" in steps
        assert "PRAGMA wal_checkpoint(TRUNCATE)" in steps
