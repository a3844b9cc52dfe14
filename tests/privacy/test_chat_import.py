"""Importing ChatGPT and Claude exports: what lands in the account (path, order, times,
titles, placeholders), that it is searchable, private, exported and erased like any
conversation, that re-importing adds only what is new, and that bad files import nothing."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.exceptions import ServiceError
from privacy.chat_import import chat_import
from privacy.erase import account_erase
from privacy.export import build_export
from sessions_app.branches import Alternatives, alternatives_of
from sessions_app.models import Message, Session
from sessions_app.search.service import search_conversations
from tests.conftest import wait_for
from tests.factories import PASSWORD
from tests.privacy.chat_exports import (
    at,
    chatgpt_conversation,
    claude_conversation,
    zipped,
)
from tests.support.zips import lying_zip, truncated_zip

pytestmark = pytest.mark.django_db


def write(tmp_path: Path, data, name="conversations.json") -> Path:
    path = tmp_path / name
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def path_of(session: Session) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in session.messages.filter(active=True).order_by("id")]


def test_chatgpt_export_imports_the_current_branch_with_times_title_and_placeholders(
    owner, tmp_path
):
    export = write(tmp_path, zipped([chatgpt_conversation("c-1", "Weather", "mkgptone")]), "x.zip")
    report = chat_import(user=owner, path=export)
    session = Session.objects.get(owner=owner)
    assert (session.source, session.title) == ("chatgpt", "Weather")
    assert session.started_at == at(0)
    assert path_of(session) == [
        ("user", "Bonjour mkgptone — 東京の天気は？"),
        ("assistant", "Il fait beau à Tōkyō."),
        ("user", "[image not imported]\n\nWhat is in this picture?"),
        ("assistant", "A cat. Кошка mkgptone."),
    ]
    path = session.messages.filter(active=True).order_by("id")
    assert list(path.values_list("timestamp", flat=True)) == [at(10), at(20), at(50), at(70)]
    assert session.last_activity_at == at(70)
    # One chain: each message's parent is the one before it.
    ids = list(path.values_list("id", "parent_id"))
    assert [p for _, p in ids] == [None] + [i for i, _ in ids[:-1]]
    assert (report.sessions_created, report.messages_created) == (1, 4)
    assert report.skipped == {
        "hidden system context": 1,
        "image (a placeholder names it)": 1,
        "tool results (browsing, plugins, code interpreter)": 1,
    }
    # The first wording of the second prompt and its answer: an alternative branch that
    # starts after the first answer, beside the selected one.
    assert report.branch_messages == 2
    assert "2 message(s) on other branches (edits, regenerations) imported as alternatives." in (
        report.lines()
    )
    a1 = session.messages.get(content="Il fait beau à Tōkyō.")
    first, answer = session.messages.filter(active=False).order_by("id")
    assert (first.content, first.parent_id, first.timestamp) == ("first wording", a1.pk, at(30))
    assert (answer.content, answer.parent_id) == ("answer to the first wording", first.pk)
    selected = session.messages.get(content__startswith="[image not imported]")
    places = alternatives_of([session.pk])
    assert places[selected.pk] == Alternatives(index=1, count=2, previous=None, next=first.pk)
    assert places[first.pk] == Alternatives(index=2, count=2, previous=selected.pk, next=None)


def test_claude_export_imports_blocks_attachments_and_times(owner, tmp_path):
    export = write(tmp_path, [claude_conversation("u-1", "Greek", "mkclaude", replies=2)])
    report = chat_import(user=owner, path=export)
    session = Session.objects.get(owner=owner)
    assert (session.source, session.title) == ("claude", "Greek")
    assert path_of(session) == [
        ("user", "Explain mkclaude in Greek: καλημέρα\n\n[file notes.txt not imported]"),
        ("assistant", "Καλημέρα means good morning.\n\n[tool call not imported]"),
        ("user", "follow-up 2"),
        ("assistant", "reply 2"),
    ]
    times = [t.isoformat() for t in session.messages.values_list("timestamp", flat=True)]
    assert times == [
        "2024-05-01T10:00:00+00:00",
        "2024-05-01T10:00:05+00:00",
        "2024-05-02T10:00:00+00:00",
        "2024-05-02T10:00:01+00:00",
    ]
    assert session.started_at.isoformat() == "2024-05-01T09:59:59+00:00"
    assert report.messages_created == 4
    assert report.skipped["attached files (a placeholder names them)"] == 1


def test_imported_text_is_found_by_search_and_only_by_its_owner(owner, outsider, tmp_path):
    chat_import(user=owner, path=write(tmp_path, [claude_conversation("u-1", "G", "mksearchme")]))
    found = search_conversations(owner=owner, query="mksearchme")
    assert [c.session_id for c in found.conversations] == [Session.objects.get(owner=owner).pk]
    assert search_conversations(owner=outsider, query="mksearchme").conversations == []
    assert not Session.objects.filter(owner=outsider).exists()


def test_reimporting_adds_nothing_and_a_newer_export_adds_only_what_is_new(owner, tmp_path):
    first = [claude_conversation("u-1", "Greek", "mkidem")]
    chat_import(user=owner, path=write(tmp_path, first))
    again = chat_import(user=owner, path=write(tmp_path, first))
    assert not again.added_anything and again.sessions_skipped == 1
    assert Message.objects.filter(session__owner=owner).count() == 2
    newer = [
        claude_conversation("u-1", "Greek", "mkidem", replies=3),
        claude_conversation("u-2", "Greek", "mkother"),
    ]
    report = chat_import(user=owner, path=write(tmp_path, newer))
    assert (report.sessions_created, report.messages_appended) == (1, 4)
    session = Session.objects.get(owner=owner, title="Greek")
    assert [c for _, c in path_of(session)][-4:] == [
        "follow-up 2",
        "reply 2",
        "follow-up 3",
        "reply 3",
    ]
    assert session.message_count == 6
    # The second conversation of the same name got a title of its own.
    assert Session.objects.filter(owner=owner, title="Greek (2)").exists()
    assert not chat_import(user=owner, path=write(tmp_path, newer)).added_anything


def test_the_same_export_imports_into_two_accounts(owner, outsider, tmp_path):
    export = write(tmp_path, [chatgpt_conversation("c-1", "Weather", "mktwo")])
    chat_import(user=owner, path=export)
    report = chat_import(user=outsider, path=export)
    assert report.sessions_created == 1
    assert Session.objects.filter(title="Weather").count() == 2


def test_export_contains_imported_conversations_and_erasure_removes_them(
    owner, tmp_path, export_dir
):
    chat_import(user=owner, path=write(tmp_path, [chatgpt_conversation("c", "W", "mkexported")]))
    export_dir.mkdir()
    archive = export_dir / "a.zip"
    build_export(user=owner, target=archive)
    with zipfile.ZipFile(archive) as zf:
        assert any(b"mkexported" in zf.read(n) for n in zf.namelist())
    account_erase(user=owner, password=PASSWORD)
    assert not Message.objects.filter(content__contains="mkexported").exists()


def test_management_command_imports_and_reports(owner, tmp_path, capsys):
    export = write(tmp_path, [claude_conversation("u-1", "Greek", "mkcmd")])
    call_command("import_chats", str(export), "--user", owner.username)
    out = capsys.readouterr().out
    assert "Conversations: 1 imported, 0 already there (2 messages)." in out
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("import_chats", str(write(tmp_path, "[{")), "--user", owner.username)


def broken_tree(kind: str):
    conv = chatgpt_conversation("c-2", "Broken", "mkbroken")
    if kind == "cycle":
        conv["mapping"]["u1"]["parent"] = "a2b"
    elif kind == "cycle off the path":
        conv["mapping"]["x"] = {"id": "x", "parent": "y", "children": ["y"], "message": None}
        conv["mapping"]["y"] = {"id": "y", "parent": "x", "children": ["x"], "message": None}
    else:
        conv["mapping"]["u1"]["parent"] = "gone"
    return [chatgpt_conversation("c-1", "Fine", "mkfine"), conv]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("not json at all", "should be a JSON list"),
        ('{"conversations": []}', "should be a JSON list"),
        ('[{"mapping": {}, "id": "a"}, {"mapping"', "not valid JSON"),
        ([{"foo": 1}], "neither ChatGPT's"),
        ([claude_conversation("u", "n", "m"), {"mapping": {}}], "not a Claude conversation"),
        ([claude_conversation("u", "n", "m"), 7], "not a conversation"),
        ([{"uuid": "u", "chat_messages": "nope"}], "chat_messages is not a list"),
        (broken_tree("cycle"), "has a cycle"),
        (broken_tree("cycle off the path"), "has a cycle"),
        (broken_tree("missing"), "the parent of node u1 is missing"),
    ],
)
def test_a_bad_export_is_refused_clearly_and_imports_nothing(owner, tmp_path, data, message):
    with pytest.raises(ServiceError, match=message):
        chat_import(user=owner, path=write(tmp_path, data))
    assert not Session.objects.filter(owner=owner).exists()


@pytest.mark.parametrize("damage", [lying_zip, truncated_zip])
def test_a_damaged_or_lying_zip_is_refused(owner, tmp_path, damage):
    body = json.dumps([claude_conversation("u", "n", "m")] * 50)
    export = write(tmp_path, damage({"conversations.json": body}), "x.zip")
    with pytest.raises(ServiceError) as refused:
        chat_import(user=owner, path=export)
    assert refused.value.code == "invalid_zip"
    assert not Session.objects.filter(owner=owner).exists()


def test_an_export_over_the_size_limit_is_refused_before_it_is_read(owner, tmp_path, settings):
    settings.HERMES_IMPORT_MAX_MB = 1
    big = [claude_conversation(f"u{i}", "n", "x" * 3000) for i in range(1500)]
    for data, name in ((zipped(big), "x.zip"), (json.dumps(big), "conversations.json")):
        with pytest.raises(ServiceError, match="more than the 4 MiB") as refused:
            chat_import(user=owner, path=write(tmp_path, data, name))
        assert refused.value.code == "too_large"
    assert not Session.objects.filter(owner=owner).exists()


def upload(client, data: bytes, name: str, capture):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    with capture(execute=True):
        return client.post(
            reverse("account_import_chats"), {"export": SimpleUploadedFile(name, data)}
        )


def test_account_page_upload_runs_a_job_whose_summary_and_source_the_person_sees(
    owner, outsider, export_dir, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from privacy.models import ChatImportJob
    from tests.privacy.conftest import login

    client = login(owner)
    data = zipped([chatgpt_conversation("c-1", "Weather", "mkupload")])
    response = upload(client, data, "export.zip", django_capture_on_commit_callbacks)
    assert response.status_code == 302 and response["Location"].endswith("#import-chats")
    job = ChatImportJob.objects.get(owner=owner)
    assert (job.status, job.progress) == ("done", 100)
    assert list(export_dir.iterdir()) == []  # the upload is gone once read
    page = client.get(reverse("account")).content.decode()
    assert "Conversations: 1 imported, 0 already there (4 messages)." in page
    assert "Skipped: 1 image (a placeholder names it)." in page
    session = Session.objects.get(owner=owner)
    chat = client.get(reverse("chat_session", args=[session.pk])).content.decode()
    assert "Imported from ChatGPT" in chat
    inspector = client.get(reverse("session_inspect", args=[session.pk])).content.decode()
    assert "imported from ChatGPT" in inspector
    # Another person sees neither the job nor the conversation.
    stranger = login(outsider)
    assert "Conversations: 1 imported" not in stranger.get(reverse("account")).content.decode()
    assert stranger.get(reverse("chat_session", args=[session.pk])).status_code == 404


def test_a_bad_upload_ends_as_a_failed_job_with_the_reason(
    owner, export_dir, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from tests.privacy.conftest import login

    client = login(owner)
    response = upload(
        client, b"<html>not json</html>", "c.json", django_capture_on_commit_callbacks
    )
    assert response.status_code == 302
    page = client.get(reverse("account")).content.decode()
    assert "should be a JSON list of conversations" in page
    assert not Session.objects.filter(owner=owner).exists()
    assert list(export_dir.iterdir()) == []


def test_an_upload_over_the_size_limit_is_refused_at_once(
    owner, export_dir, settings, django_capture_on_commit_callbacks
):
    from django.urls import reverse

    from privacy.models import ChatImportJob
    from tests.privacy.conftest import login

    settings.HERMES_IMPORT_MAX_MB = 1
    client = login(owner)
    response = upload(client, b"[" + b" " * (2 * 1024 * 1024) + b"]", "c.json",
                      django_capture_on_commit_callbacks)  # fmt: skip
    assert response.status_code == 302
    page = client.get(reverse("account"), follow=True).content.decode()
    assert "larger than 1 MiB" in page and "import_chats" in page
    assert not ChatImportJob.objects.exists()
    assert list(export_dir.iterdir()) == []


def test_a_second_upload_while_one_is_in_progress_is_refused(
    owner, export_dir, django_capture_on_commit_callbacks
):
    from django.urls import reverse
    from django.utils import timezone

    from privacy.models import ChatImportJob
    from tests.privacy.conftest import login

    ChatImportJob.objects.create(
        owner=owner,
        status="running",
        lease_owner="worker",
        lease_expires_at=timezone.now() + timezone.timedelta(minutes=5),
    )
    client = login(owner)
    data = json.dumps([claude_conversation("u-1", "Greek", "mkbusy")]).encode()
    upload(client, data, "c.json", django_capture_on_commit_callbacks)
    page = client.get(reverse("account")).content.decode()
    assert "An import (or the learning from one) is already in progress" in page
    assert ChatImportJob.objects.filter(owner=owner).count() == 1
    assert not Session.objects.filter(owner=owner).exists()


def test_the_api_uploads_an_export_and_reports_the_job_to_its_owner_only(
    owner, outsider, export_dir, django_capture_on_commit_callbacks
):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from tests.privacy.conftest import login

    client = login(owner)
    data = json.dumps([claude_conversation("u-9", "Lisbon trams", "mkapi")]).encode()
    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(
            reverse("api-me-chat-imports"), {"export": SimpleUploadedFile("c.json", data)}
        )
    assert started.status_code == 202
    job = client.get(started["Location"]).json()
    assert (job["status"], job["progress"]) == ("done", 100)
    assert any("1 imported" in line for line in job["report"])
    assert [j["id"] for j in client.get(reverse("api-me-chat-imports")).json()["results"]] == [
        job["id"]
    ]
    assert Session.objects.get(owner=owner).title == "Lisbon trams"
    # Without a file: a clear 400; another person: the job does not exist for them.
    missing = client.post(reverse("api-me-chat-imports"), {})
    assert missing.status_code == 400 and "`export`" in missing.json()["error"]["message"]
    stranger = login(outsider)
    assert stranger.get(started["Location"]).status_code == 404
    assert stranger.get(reverse("api-me-chat-imports")).json()["results"] == []


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_imports_the_upload_and_a_redelivery_adds_nothing(
    owner, worker_export_dir, celery_worker
):
    from privacy.models import ChatImportJob

    worker_export_dir.mkdir()
    name = f"u{owner.pk}-0123abcd.chatimport"
    data = [chatgpt_conversation(f"c-{i}", f"Chat {i}", "mkworker") for i in range(3)]
    (worker_export_dir / name).write_bytes(zipped(data))
    job = ChatImportJob.objects.create(owner=owner, file_name=name)
    celery_worker.send("privacy.chat_import_run", job.pk)
    done = wait_for(
        lambda: ChatImportJob.objects.filter(pk=job.pk, status="done").first(),
        timeout=60,
        what="the chat import job",
    )
    assert done.progress == 100 and done.stage == "Done"
    assert "Conversations: 3 imported, 0 already there (12 messages)." in done.report_lines
    assert not (worker_export_dir / name).exists()
    celery_worker.send("privacy.chat_import_run", job.pk)
    wait_for(
        lambda: celery_worker.log.read_bytes().count(b"succeeded") >= 2, timeout=30, what="log"
    )
    assert Session.objects.filter(owner=owner).count() == 3
    assert Message.objects.filter(session__owner=owner, active=True).count() == 12


def test_an_overlong_export_id_is_kept_as_its_digest_and_still_idempotent(owner, tmp_path):
    conv = claude_conversation("u" * 5000, "Long id", "mklongid")
    export = write(tmp_path, [conv])
    chat_import(user=owner, path=export)
    session = Session.objects.get(owner=owner)
    key = session.model_config["external_id"]
    assert key.startswith("sha256:") and len(key) < 100
    assert len(json.dumps(session.model_config)) < 400
    assert not chat_import(user=owner, path=export).added_anything


def test_the_sidebar_marks_imported_conversations_on_every_page(owner, tmp_path):
    from tests.privacy.conftest import login

    chat_import(user=owner, path=write(tmp_path, [chatgpt_conversation("c", "Weather", "mk")]))
    client = login(owner)
    (item,) = client.get("/chat/list/").json()["items"]
    assert (item["title"], item["imported_from"]) == ("Weather", "ChatGPT")
    (found,) = client.get("/chat/list/", {"q": "Weath"}).json()["items"]
    assert found["imported_from"] == "ChatGPT"


def test_an_export_that_makes_up_content_kinds_keeps_the_summary_short(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Kinds", "mkkinds")
    parts = [{"content_type": f"kind_{i}_" + "x" * 500} for i in range(100)]
    conv["mapping"]["u1"]["message"]["content"] = {
        "content_type": "multimodal_text",
        "parts": [*parts, "still text"],
    }
    report = chat_import(user=owner, path=write(tmp_path, [conv]))
    lines = report.lines()
    assert len(lines) < 40 and max(len(line) for line in lines) < 200
    assert report.skipped["other kinds of content (a placeholder names each)"] > 0
    first = Session.objects.get(owner=owner).messages.order_by("id").first()
    assert first.content.startswith("[kind 0 " + "x" * 33 + " not imported]")  # 40 characters
    assert first.content.endswith("still text")
