"""Backups and restore (core/backups.py, `manage.py backup` / `restore`), on whichever
database DATABASE_URL names: a backup taken while memory is being written restores into a
fresh database with every person's data and search intact; one taken while a chat turn
streams keeps the person's message and the answer so far; a damaged or foreign file is
refused and changes nothing; scheduled backups keep only the newest few."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection, connections
from websockets.sync.client import connect

from core import backups
from core.leases import leases_recover_dead
from core.tasks import backup as backup_task
from memory.models import Inference, MemoryEntry, MemoryEvent
from memory.services.entries import memory_add
from model_catalog.crypto import encrypt
from model_catalog.models import ModelEntry
from sessions_app import services
from sessions_app.models import Message, Session
from sessions_app.search.service import search_conversations
from skills_app.models import Skill, SkillFile
from tests.conftest import free_port, start_daphne, stop_process, wait_for
from tests.factories import InferenceFactory, MemoryEntryFactory, SkillFactory, conversation_with
from tests.sessions_app.test_crash_recovery import model_env, socket_headers

ROOT = Path(__file__).resolve().parents[2]
RESTORED = "restored"
#: What "every person's data" means here, each listed per owner.
OWNED = {
    Session: "owner",
    Message: "session__owner",
    MemoryEntry: "owner",
    Skill: "owner",
    SkillFile: "skill__owner",
    Inference: "owner",
}


def _postgres_admin() -> psycopg.Connection:
    params = connection.settings_dict
    return psycopg.connect(
        host=params["HOST"] or None,
        port=params["PORT"] or None,
        user=params["USER"] or None,
        password=params["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )


@pytest.fixture
def fresh_database(tmp_path) -> Iterator[str]:
    """An empty database of the configured vendor, reachable as the `restored` alias."""
    params = dict(connection.settings_dict)
    if connection.vendor == "sqlite":
        params["NAME"] = str(tmp_path / "fresh.sqlite3")
    else:
        params["NAME"] = f"{connection.settings_dict['NAME']}_fresh_{uuid.uuid4().hex[:8]}"
        with _postgres_admin() as admin:
            admin.execute(f'CREATE DATABASE "{params["NAME"]}"')
    # Under the alias the test database allows; reached as connections[RESTORED].
    connections[RESTORED] = type(connections["default"])(params, alias="default")
    try:
        yield RESTORED
    finally:
        connections[RESTORED].close()
        del connections[RESTORED]
        if params["ENGINE"].endswith("postgresql"):
            with _postgres_admin() as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{params["NAME"]}" WITH (FORCE)')


@contextmanager
def as_default(alias: str) -> Iterator[None]:
    """Run the app's own code (search) against the database `alias`."""
    default = connections["default"]
    connections["default"] = connections[alias]
    try:
        yield
    finally:
        connections["default"] = default


def everything_of(user, using: str = "default") -> dict[str, list[dict]]:
    return {
        model.__name__: list(
            model.objects.using(using).filter(**{path: user.pk}).order_by("pk").values()
        )
        for model, path in OWNED.items()
    }


def search_of(user, query: str) -> list[dict]:
    result = search_conversations(owner=user, query=query, limit=10)
    assert result.conversations, f"nothing found for {query!r}"
    return [dataclasses.asdict(hit) for hit in result.conversations]


def tables_in(alias: str) -> list[str]:
    return connections[alias].introspection.table_names()


@pytest.fixture
def people(owner, outsider):
    """Two people with conversations, memory, skills and inferences of their own."""
    for person, word in ((owner, "heliotrope"), (outsider, "marigold")):
        conversation_with(person, f"The {word} garden needs water", "Plan the trip to Lisbon")
        conversation_with(person, f"Is {word} a colour or a flower?")
        MemoryEntryFactory(owner=person, content=f"Grows {word} on the balcony.")
        SkillFactory(owner=person, name=f"{word}-care")
        InferenceFactory(owner=person, statement=f"Cares about {word}")
    return owner, outsider


@pytest.mark.django_db(transaction=True)
def test_backup_during_memory_writes_restores_everyone_into_a_fresh_database(
    people, fresh_database, tmp_path, settings
):
    settings.HERMES_MEMORY_CHAR_LIMIT = 100_000
    owner, outsider = people
    expected = {p.pk: everything_of(p) for p in people}
    expected_search = {
        owner.pk: search_of(owner, "heliotrope garden"),
        outsider.pk: search_of(outsider, "marigold"),
    }
    stop = threading.Event()
    written = {owner.pk: 0, outsider.pk: 0}
    errors: list[BaseException] = []

    def write_memory(person) -> None:
        try:
            while not stop.is_set():
                memory_add(user=person, target="memory", content=f"note {written[person.pk]}")
                written[person.pk] += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connections.close_all()

    writers = [threading.Thread(target=write_memory, args=(p,)) for p in people]
    for writer in writers:
        writer.start()
    archive = tmp_path / "site.tar"
    try:
        while min(written.values()) < 3 and not errors:
            stop.wait(0.01)
        before = dict(written)
        out = io.StringIO()
        call_command("backup", output=archive, stdout=out)
        during = dict(written)
    finally:
        stop.set()
        for writer in writers:
            writer.join(timeout=30)
    assert not errors, errors
    assert during != before, "no memory write ran while the backup did"
    assert f"database written to {archive}" in out.getvalue()
    assert "stored model API keys cannot be decrypted without it" in out.getvalue()

    restored = backups.backup_restore(archive=archive, using=fresh_database)
    assert restored.migrations_to_apply == 0
    assert restored.notes == []
    for person in people:
        got = everything_of(person, fresh_database)
        notes = [e for e in got["MemoryEntry"] if e["content"].startswith("note ")]
        # A snapshot: the writes before it, none torn, each with its audit event.
        assert len(notes) >= before[person.pk]
        assert {e["content"] for e in notes} == {f"note {i}" for i in range(len(notes))}
        events = MemoryEvent.objects.using(fresh_database).filter(owner=person)
        assert events.filter(action="add").count() >= len(notes)
        got["MemoryEntry"] = [e for e in got["MemoryEntry"] if e not in notes]
        assert got == expected[person.pk]
    with as_default(fresh_database):
        assert search_of(owner, "heliotrope garden") == expected_search[owner.pk]
        assert search_of(outsider, "marigold") == expected_search[outsider.pk]
        # Still one person's search: the other's words are not found.
        assert not search_conversations(owner=owner, query="marigold").conversations


@pytest.mark.django_db(transaction=True)
def test_restore_refuses_a_database_that_has_users_unless_forced(people, tmp_path):
    archive = tmp_path / "site.tar"
    backups.backup_create(output=archive)
    with pytest.raises(CommandError, match="already has users.*--force"):
        call_command("restore", str(archive))
    owner, _ = people
    Session.objects.filter(owner=owner).delete()
    out = io.StringIO()
    call_command("restore", str(archive), "--force", stdout=out)
    assert Session.objects.filter(owner=owner).count() == 2
    assert out.getvalue().startswith("Restored the backup of ")


def damaged_copies(archive: Path, tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """Files a restore must refuse, with the message it gives."""
    data = archive.read_bytes()
    truncated = tmp_path / "truncated.tar"
    truncated.write_bytes(data[: len(data) // 2])
    foreign = tmp_path / "foreign.tar"
    with tarfile.open(foreign, "w") as tar:
        tar.add(ROOT / "README.md", arcname="README.md")
    not_tar = tmp_path / "notes.txt"
    not_tar.write_text("my shopping list\n")
    hollow = tmp_path / "hollow.tar"
    with tarfile.open(hollow, "w") as tar:
        tar.addfile(_directory(backups.MANIFEST))
    other = "postgresql" if connection.vendor == "sqlite" else "sqlite"
    return {
        "truncated": (truncated, "not a complete Hermes backup|damaged or truncated"),
        "foreign": (foreign, "not a Hermes backup"),
        "not a tar": (not_tar, "not a complete Hermes backup"),
        "manifest a folder": (hollow, "its manifest.json is no file"),
        "newer format": (
            with_manifest(archive, tmp_path / "newer.tar", format_version=2),
            "format version 2; this Hermes reads version 1",
        ),
        "newer migrations": (
            with_manifest(archive, tmp_path / "later.tar", migrations={"memory": ["9999_later"]}),
            r"newer Hermes .* migrations this code lacks \(memory.9999_later\)",
        ),
        "other vendor": (
            with_manifest(archive, tmp_path / "other.tar", vendor=other),
            f"backup is of a {other} database",
        ),
        "manifest without checksums": (
            with_manifest(archive, tmp_path / "nosum.tar", files=[]),
            "manifest is damaged",
        ),
    }


def _directory(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


def with_manifest(archive: Path, target: Path, **changes: object) -> Path:
    """A copy of `archive` whose manifest says something else."""
    with tarfile.open(archive) as src, tarfile.open(target, "w") as tar:
        for member in src.getmembers():
            content = src.extractfile(member).read()
            if member.name == backups.MANIFEST:
                content = json.dumps({**json.loads(content), **changes}).encode()
                member.size = len(content)
            tar.addfile(member, io.BytesIO(content))
    return target


@pytest.mark.django_db(transaction=True)
def test_damaged_or_foreign_files_are_refused_and_touch_nothing(people, fresh_database, tmp_path):
    archive = tmp_path / "site.tar"
    backups.backup_create(output=archive)
    owner, _ = people
    before = everything_of(owner)
    for name, (path, message) in damaged_copies(archive, tmp_path).items():
        with pytest.raises(backups.BackupError, match=message):
            backups.backup_restore(archive=path, using=fresh_database)
        assert tables_in(fresh_database) == [], name
        with pytest.raises(CommandError, match=f"Nothing was restored: .*({message})"):
            call_command("restore", str(path), "--force")
        assert everything_of(owner) == before, name
    leftovers = [p.name for p in Path(settings.VAR_DIR).glob(".hermes-restore-*")]
    assert leftovers == []


@pytest.mark.django_db(transaction=True)
def test_secrets_only_when_asked_and_restore_says_which_api_keys_it_cannot_read(
    fresh_database, tmp_path, settings
):
    settings.HERMES_ENCRYPTION_KEY = "the old key"
    ModelEntry.objects.create(
        name="gpt", model_id="gpt", base_url="http://x/v1", api_key_encrypted=encrypt("sk-1")
    )
    plain, secret = tmp_path / "plain.tar", tmp_path / "secret.tar"
    backups.backup_create(output=plain)
    backups.backup_create(output=secret, include_secrets=True)
    assert tarfile.open(plain).getnames() == [backups.MANIFEST, "database." + _ext()]
    assert backups.SECRETS in tarfile.open(secret).getnames()
    assert oct(secret.stat().st_mode & 0o777) == "0o600"

    settings.HERMES_ENCRYPTION_KEY = "a new key"
    restored = backups.backup_restore(archive=secret, using=fresh_database)
    assert restored.notes == [
        "The API keys of 1 model(s) (gpt) cannot be decrypted with this deployment's "
        "HERMES_ENCRYPTION_KEY (or SECRET_KEY when it is unset): set the key the backup was "
        "made with, or enter those API keys again in the admin."
    ]
    written = restored.secrets_file.read_text()
    assert "HERMES_ENCRYPTION_KEY=the old key\n" in written
    assert oct(restored.secrets_file.stat().st_mode & 0o777) == "0o600"
    restored.secrets_file.unlink()


def _ext() -> str:
    return "sqlite3" if connection.vendor == "sqlite" else "pgdump"


@pytest.mark.django_db(transaction=True)
def test_scheduled_backups_keep_the_newest(owner, tmp_path, settings):
    settings.HERMES_BACKUP_DIR = tmp_path / "backups"
    settings.HERMES_BACKUP_KEEP = 2
    made = [Path(backup_task.delay().get()) for _ in range(3)]
    assert sorted(p.name for p in (tmp_path / "backups").iterdir()) == [m.name for m in made[1:]]


def test_scheduled_backups_are_off_by_default_and_on_with_an_interval():
    assert "backup" not in settings.CELERY_BEAT_SCHEDULE
    env = {**os.environ, "HERMES_BACKUP_INTERVAL_HOURS": "6"}
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.CELERY_BEAT_SCHEDULE['backup'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "hermes_site.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'task': 'hermes_site.backup', 'schedule': 21600.0" in out


@pytest.mark.django_db(transaction=True)
def test_restoring_an_older_backup_says_to_migrate(owner, fresh_database, tmp_path):
    archive = tmp_path / "site.tar"
    manifest = backups.backup_create(output=archive)
    older = dict(manifest["migrations"], memory=manifest["migrations"]["memory"][:-1])
    restored = backups.backup_restore(
        archive=with_manifest(archive, tmp_path / "older.tar", migrations=older),
        using=fresh_database,
    )
    assert restored.migrations_to_apply == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_backup_during_a_streaming_chat_turn_keeps_what_the_user_sent(
    owner, llm_server, fresh_database, tmp_path
):
    """A turn streams from the scripted model in daphne while `manage.py backup` runs: the
    archive holds the person's message and the answer as far as it was saved, and once
    restored (and the dead turn's lease recovered) the answer is `interrupted` with exactly
    that text and the conversation takes a new turn; the live site finishes its answer."""
    reply = "".join(f"word{i} " for i in range(200))
    llm_server.reset()
    llm_server.chunk_delay = 0.05  # ten seconds of streaming
    llm_server.enqueue(reply=reply)
    port = free_port()
    env = {
        **model_env(llm_server),
        "HERMES_STREAM_SAVE_INTERVAL": "0.1",
        "HERMES_REVIEW_ENABLED": "false",
        "HERMES_LEASE_SECONDS": "120",
    }
    headers = socket_headers(owner, port)
    archive = tmp_path / "during-turn.tar"
    daphne = start_daphne(port, tmp_path / "daphne.log", env)
    try:
        with connect(f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers) as ws:
            ws.send(json.dumps({"type": "chat.send", "session": None, "text": "Order heliotrope"}))
            wait_for(
                lambda: Message.objects.filter(role="assistant").exclude(content="").exists(),
                timeout=30,
                what="part of the answer to be saved",
            )
            call_command("backup", output=archive, stdout=io.StringIO())
            answer = Message.objects.get(role="assistant")
            assert answer.status == "streaming", "the turn ended before the backup did"
            types: list[str] = []
            while "assistant.done" not in types:
                event = json.loads(ws.recv(timeout=60))
                assert event["type"] != "error", event
                types.append(event["type"])
    finally:
        llm_server.chunk_delay = 0.0
        stop_process(daphne)
    answer.refresh_from_db()
    assert (answer.status, answer.content) == ("complete", reply)

    backups.backup_restore(archive=archive, using=fresh_database)
    restored = Message.objects.using(fresh_database)
    (sent,) = restored.filter(role="user")
    assert (sent.content, sent.session_id) == ("Order heliotrope", answer.session_id)
    (partial,) = restored.filter(role="assistant")
    assert partial.status == "streaming" and partial.content
    assert reply.startswith(partial.content) and partial.content != reply
    with as_default(fresh_database):
        # The restored site's start: the turn's process is gone, its answer is closed.
        assert leases_recover_dead() == {"turn": 1}
        partial.refresh_from_db(using=fresh_database)
        assert (partial.status, partial.finish_reason) == ("interrupted", "process_died")
        assert reply.startswith(partial.content) and partial.content
        again = services.turn_begin(user=owner, session_id=answer.session_id, text="Again")
        assert again.lease is not None
        again.lease.release()
    assert restored.filter(role="user").count() == 2
