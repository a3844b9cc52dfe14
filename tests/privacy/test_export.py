"""Download my data: the archive holds everything of its owner and nothing of anyone else,
its state.db is a Hermes database with working full-text search, and jobs are private,
report progress and expire."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from core.privacy import registry
from privacy import jobs
from privacy.export import build_export
from privacy.models import ExportJob
from tests.conftest import wait_for
from tests.privacy.conftest import login, seed

pytestmark = pytest.mark.django_db


def archive_bytes(path_or_bytes) -> dict[str, bytes]:
    source = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    with zipfile.ZipFile(source) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_export_holds_every_marker_of_its_owner_and_none_of_another(
    owner, outsider, export_dir, settings
):
    settings.OPENAI_BASE_URL = "https://llm-user:s3cretpass@llm.example.org/v1"
    settings.HERMES_MODEL = "gpt-test"
    mine = seed(owner, "olv")
    theirs = seed(outsider, "osc")
    target = export_dir / "a.zip"
    export_dir.mkdir()
    build_export(user=owner, target=target)
    files = archive_bytes(target)
    blob = b"\n".join(files.values())
    missing = [k for k, v in mine.markers.items() if v.encode() not in blob]
    assert missing == []
    leaked = [k for k, v in theirs.markers.items() if v.encode() in blob]
    assert leaked == []
    assert b"s3cretpass" not in blob  # the endpoint is named without its credentials
    assert {
        "manifest.json",
        "export.json",
        "state.db",
        "memories/MEMORY.md",
        "memories/USER.md",
        "SOUL.md",
        "skills/devops/deploy-olv/SKILL.md",
        "skills/devops/deploy-olv/references/notes.md",
    } <= set(files)


def test_export_json_has_every_registered_section_and_the_information_sheet(
    owner, export_dir, settings
):
    settings.OPENAI_BASE_URL = "https://llm.example.org/v1"
    seed(owner, "olv")
    export_dir.mkdir()
    build_export(user=owner, target=export_dir / "a.zip")
    files = archive_bytes(export_dir / "a.zip")
    data = json.loads(files["export.json"])
    manifest = json.loads(files["manifest.json"])
    sections = {e.section for e in registry.entries() if e.section}
    assert sections <= set(data)
    assert data["account"]["username"] == "olivia" and "password" not in data["account"]
    conversation = next(c for c in data["conversations"] if c["end_reason"] == "compression")
    assert [m["role"] for m in conversation["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert conversation["messages"][0]["context_block"].startswith("<memory-context>")
    assert conversation["messages"][1]["prompt_tokens"] == 60
    assert any(c["temporary"] for c in data["conversations"])
    entry = next(e for e in data["memory_entries"] if e["source"] == "tool")
    assert entry["source_session_id"] == conversation["id"]
    assert data["skills"][0]["files"][0]["path"] == "references/notes.md"
    assert data["skills"][0]["revisions"]
    assert "key_hash" not in data["api_tokens"][0]
    if "inferences" in data:  # with the messages each inference came from
        assert data["inferences"][0]["evidence_ids"] == [
            m["id"] for m in conversation["messages"] if m["role"] == "user"
        ]
    snapshot = data["memory_snapshots"][0]
    assert snapshot["session_id"] == conversation["id"] and snapshot["entries_ids"]
    info = manifest["information"]
    assert info["recipients"][0]["endpoint"] == "https://llm.example.org/v1"
    assert {"purposes", "categories", "retention", "rights", "source"} <= set(info)
    assert manifest["counts"]["conversations"] == 3
    assert manifest["schema_version"] == 1


def test_exported_state_db_is_a_hermes_database_with_working_search(owner, export_dir, tmp_path):
    mine = seed(owner, "olv")
    export_dir.mkdir()
    build_export(user=owner, target=export_dir / "a.zip")
    db_path = tmp_path / "state.db"
    db_path.write_bytes(archive_bytes(export_dir / "a.zip")["state.db"])
    conn = sqlite3.connect(db_path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert {
        "sessions",
        "messages",
        "system_prompts",
        "state_meta",
        "schema_version",
        "messages_fts",
        "messages_fts_trigram",
        "messages_fts_insert",
        "messages_fts_delete",
        "messages_fts_update",
    } <= names
    # Hermes' own FTS tables with their own tokenizers; none of the site's extra indexes.
    assert not {n for n in names if "fts_stem" in n or "title_fts" in n}
    tokenizers = dict(
        conn.execute(
            "SELECT name, sql FROM sqlite_master"
            " WHERE name IN ('messages_fts', 'messages_fts_trigram')"
        ).fetchall()
    )
    assert "tokenize='unicode61'" in tokenizers["messages_fts"]
    assert "porter" not in tokenizers["messages_fts"]
    assert "tokenize='trigram'" in tokenizers["messages_fts_trigram"]
    assert conn.execute("SELECT version FROM schema_version").fetchone() == (30,)
    assert conn.execute("SELECT value FROM state_meta WHERE key='fts_storage_version'").fetchone()
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    # Word index: a marker from an assistant answer is found.
    hits = conn.execute(
        "SELECT m.session_id, m.role FROM messages_fts f JOIN messages m ON m.id = f.rowid "
        "WHERE messages_fts MATCH ?",
        (mine.markers["assistant"],),
    ).fetchall()
    assert hits == [(mine.session.pk, "assistant")]
    # Trigram index: a substring inside a word is found too.
    part = mine.markers["user"][4:14]
    assert conn.execute(
        "SELECT count(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH ?",
        (f'"{part}"',),
    ).fetchone() == (1,)
    # Lineage, titles and timestamps as REAL unix seconds.
    child = conn.execute(
        "SELECT parent_session_id, title, typeof(started_at) FROM sessions WHERE id = ?",
        (mine.continuation.pk,),
    ).fetchone()
    assert child == (mine.session.pk, mine.continuation.title, "real")
    assert conn.execute(
        "SELECT _compressed_summary FROM messages WHERE session_id = ? AND role = 'assistant'",
        (mine.continuation.pk,),
    ).fetchone() == (1,)
    # The FTS stays in sync with writes, as in Hermes.
    conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, 1)",
        (mine.session.pk, "brandnewword"),
    )
    assert conn.execute(
        "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'brandnewword'"
    ).fetchone() == (1,)
    conn.close()


def test_small_account_downloads_the_zip_straight_from_the_api(owner, export_dir):
    seed(owner, "olv")
    response = login(owner).get("/api/me/export/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert "attachment" in response["Content-Disposition"]
    files = archive_bytes(b"".join(response.streaming_content))
    assert "state.db" in files
    # Built, sent, and nothing left on disk.
    assert not any(p.is_file() for p in export_dir.iterdir())


def test_large_account_gets_a_job_to_poll_and_only_its_owner_can_download(
    owner, outsider, export_dir, settings, django_capture_on_commit_callbacks
):
    settings.HERMES_EXPORT_SYNC_MAX_MESSAGES = 1
    seed(owner, "olv")
    client = login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.get("/api/me/export/")
    assert response.status_code == 202
    job = response.json()["job"]
    assert response["Location"] == job["url"]
    status = client.get(job["url"]).json()  # tasks run inline in unit tests
    assert status["status"] == "done" and status["progress"] == 100
    download = client.get(status["download_url"])
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    stranger = login(outsider)
    assert stranger.get(job["url"]).status_code == 404
    assert stranger.get(status["download_url"]).status_code == 404
    page_url = reverse("account_export_download", args=[job["id"]])
    assert stranger.get(page_url).status_code == 404
    assert client.get(page_url).status_code == 200


def test_a_second_request_while_building_returns_the_same_job(owner, export_dir, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from hermes_site.celery import app

    app.conf.task_always_eager = False
    try:
        job = ExportJob.objects.create(
            owner=owner,
            status="running",
            started_at=timezone.now(),
            lease_owner="export@elsewhere:1#x",
            lease_expires_at=timezone.now() + timedelta(seconds=20),
        )
        assert jobs.export_job_start(user=owner).pk == job.pk
    finally:
        app.conf.task_always_eager = True


def test_a_build_whose_process_died_is_failed_and_a_new_export_starts(
    owner, export_dir, django_capture_on_commit_callbacks
):
    stuck = ExportJob.objects.create(
        owner=owner,
        status="running",
        progress=75,
        started_at=timezone.now(),
        lease_owner="export@elsewhere:1#x",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.export_job_start(user=owner)
    stuck.refresh_from_db()
    assert job.pk != stuck.pk
    assert (stuck.status, stuck.lease_owner) == ("failed", "")
    assert "stopped unexpectedly" in stuck.error_text
    assert ExportJob.objects.get(pk=job.pk).status == "done"


@pytest.fixture
def broker_down(settings):
    """Celery pointed at a port where no broker listens (tasks really sent, not inline)."""
    from hermes_site.celery import app
    from tests.conftest import free_port

    previous = app.conf.broker_url
    app.conf.task_always_eager = False
    app.conf.broker_url = f"redis://127.0.0.1:{free_port()}/0"
    app._pool = None
    app.amqp._producer_pool = None
    yield
    app.conf.broker_url = previous
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.task_always_eager = True


@pytest.mark.django_db(transaction=True)
def test_a_broker_outage_answers_503_and_leaves_no_queued_job(owner, export_dir, broker_down):
    response = login(owner).post(reverse("api-me-exports"))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "queue_unavailable"
    assert list(ExportJob.objects.filter(owner=owner).values_list("status", flat=True)) == [
        "failed"
    ]


def test_expired_exports_are_deleted_and_refused(
    owner, export_dir, django_capture_on_commit_callbacks
):
    seed(owner, "olv")
    with django_capture_on_commit_callbacks(execute=True):
        job = jobs.export_job_start(user=owner)
    job.refresh_from_db()
    path = export_dir / job.file_name
    assert job.status == "done" and path.exists()
    ExportJob.objects.filter(pk=job.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    response = login(owner).get(reverse("api-me-export-download", args=[job.pk]))
    assert response.status_code == 410
    assert response.json()["error"]["code"] == "expired"
    assert jobs.exports_expire() == 1
    assert not path.exists()
    assert ExportJob.objects.get(pk=job.pk).status == "expired"
    assert jobs.exports_expire() == 0  # idempotent


def test_account_page_starts_an_export_and_lists_it(
    owner, export_dir, django_capture_on_commit_callbacks
):
    seed(owner, "olv")
    client = login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("account_export"))
    body = client.get(reverse("account")).content.decode()
    job = ExportJob.objects.get(owner=owner, status="done")
    assert "Download zip" in body
    assert reverse("account_export_download", args=[job.pk]) in body


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_builds_the_archive_with_progress(owner, worker_export_dir, celery_worker):
    seed(owner, "olv")
    job = ExportJob.objects.create(owner=owner, task_id="t-" + str(owner.pk))
    celery_worker.send("accounts.export_build", job.pk)
    done = wait_for(
        lambda: ExportJob.objects.filter(pk=job.pk, status="done").first(),
        timeout=60,
        what="the export job",
    )
    assert done.progress == 100 and done.size > 0 and done.stage == "Ready"
    assert (worker_export_dir / done.file_name).exists()
    # Delivered again (acks_late redelivery): the second run builds nothing new.
    celery_worker.send("accounts.export_build", job.pk)
    wait_for(
        lambda: celery_worker.log.read_bytes().count(b"succeeded") >= 2, timeout=30, what="log"
    )
    assert ExportJob.objects.get(pk=job.pk).file_name == done.file_name
    assert [p.name for p in worker_export_dir.iterdir() if p.is_file()] == [done.file_name]
