"""The notes Hermes learned from an imported history say where they came from: source
"import_review", the import's id beside it, "Learned from your ChatGPT import of <date>" on
the Memory page, in its activity log and in the API, linked to the import's panel. A person
can show them alone, per import, and remove all the notes of one import at once (Memory
page, Account page, API), each change audited — their own imports only. The exports carry
the source where it has a place (export.json), the Hermes files do not, and erasure and
"forget all memory" reach them."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone

from accounts.models import Profile
from memory.models import MemoryEntry, MemoryEvent, Source
from memory.services import (
    Provenance,
    memory_add,
    memory_pending_approve,
    memory_snapshot_freeze,
)
from memory.tools import handle_memory
from privacy.erase import account_erase, memory_forget_all
from privacy.export import build_export
from privacy.hermes_import import hermes_import_zip
from privacy.models import ChatImportJob
from sessions_app.agent.tools import ToolContext
from sessions_app.models import Session
from tests.factories import PASSWORD, UserFactory
from tests.privacy.conftest import login
from tests.privacy.learning import Reviewer, claude_chat

pytestmark = pytest.mark.django_db

BEES = "I keep bees on my balcony in Lyon and sell the honey at the market mkbees."


def day(job: ChatImportJob) -> str:
    return f"{timezone.localtime(job.created_at):%Y-%m-%d}"


def finished_import(owner, source: str = "chatgpt") -> ChatImportJob:
    return ChatImportJob.objects.create(
        owner=owner, status="done", source=source, learn=True, learn_status="done"
    )


def learn(owner, job: ChatImportJob, *notes: str, target: str = "user") -> None:
    """What the import's learning does with a note: the memory tool, called as its review."""
    ctx = ToolContext(user=owner, origin="import_review", client=str(job.pk))
    operations = [{"action": "add", "content": n} for n in notes]
    result = handle_memory(ctx, {"target": target, "operations": operations})
    assert result.ok, result.payload


def contents(owner, **filters) -> set[str]:
    return set(MemoryEntry.objects.filter(owner=owner, **filters).values_list("content", flat=True))


def page(client, **query) -> str:
    response = client.get(reverse("memory_page"), query)
    assert response.status_code == 200
    return response.content.decode()


def panel(job: ChatImportJob) -> str:
    return reverse("account") + f"#chat-import-{job.pk}"


# --- where a note came from ---------------------------------------------------------------


def test_the_learning_writes_as_its_import_and_every_page_names_that_import(
    owner, scripted, export_dir, django_capture_on_commit_callbacks
):
    # A chat's own after-turn review, to tell the two apart.
    memory_add(
        user=owner, target="memory", content="Uses vim", provenance=Provenance(source="review")
    )
    Reviewer(scripted, lambda text: ["Keeps bees in Lyon"] if "mkbees" in text else [])
    client = login(owner)
    data = json.dumps([claude_chat("u-bees", "Bees", [BEES])]).encode()
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("account_import_chats"),
            {"export": SimpleUploadedFile("conversations.json", data), "learn": "1"},
        )

    job = ChatImportJob.objects.get(owner=owner)
    assert (job.source, job.learn_status, job.learning["notes"]) == ("claude", "done", 1)
    note = MemoryEntry.objects.get(owner=owner, content="Keeps bees in Lyon")
    assert (note.source, note.source_client, note.source_session_id) == (
        "import_review",
        str(job.pk),
        None,
    )
    label = f"Learned from your Claude import of {day(job)}"
    body = page(client)
    # Linked to the import, not to one of the conversations the batch read.
    assert f'<a href="{panel(job)}">{label}</a>' in body
    note_html = body[body.index(f'id="entry-{note.pk}"') :]
    note_html = note_html[: note_html.index("</li>")]
    assert "/chat/" not in note_html and "Background review" not in note_html
    assert "Background review" in body  # the chat's review stays what it was

    log = client.get(reverse("memory_log")).content.decode()
    assert f'<a href="{panel(job)}">{label}</a>' in log

    api = client.get(reverse("api-memory-list")).json()["results"]
    learned = next(e for e in api if e["content"] == "Keeps bees in Lyon")
    assert (learned["source"], learned["source_import"], learned["source_label"]) == (
        "import_review",
        job.pk,
        label,
    )
    assert learned["source_session"] is None
    other = next(e for e in api if e["content"] == "Uses vim")
    assert (other["source_label"], other["source_import"]) == ("Background review", None)
    detail = client.get(reverse("api-memory-detail", args=[note.pk])).json()
    assert detail["source_label"] == label

    account = client.get(reverse("account")).content.decode()
    assert f'id="chat-import-{job.pk}"' in account
    assert "1 note learned from this import is in your memory" in account
    assert "Remove the 1 note learned from this import" in account
    assert f"{reverse('memory_page')}?source_import={job.pk}" in account
    payload = client.get(reverse("api-me-chat-import", args=[job.pk])).json()
    assert (payload["source"], payload["learned_notes"]) == (
        "claude",
        {"active": 1, "pending": 0},
    )


def test_approval_mode_holds_learned_notes_and_approving_keeps_their_import(owner):
    Profile.objects.update_or_create(user=owner, defaults={"memory_write_approval": True})
    job = finished_import(owner)
    learn(owner, job, "Drinks green tea")
    pending = MemoryEntry.objects.get(owner=owner)
    assert (pending.status, pending.source, pending.source_client) == (
        "pending",
        "import_review",
        str(job.pk),
    )
    body = page(login(owner))
    assert "Waiting for your approval" in body
    assert f"Learned from your ChatGPT import of {day(job)}" in body

    memory_pending_approve(user=owner, entry_id=pending.pk)

    entry = MemoryEntry.objects.get(owner=owner)
    assert (entry.status, entry.source, entry.source_client) == (
        "active",
        "import_review",
        str(job.pk),
    )
    approved = MemoryEvent.objects.get(owner=owner, action="approve")
    assert (approved.source, approved.source_client) == ("import_review", str(job.pk))


# --- showing them -------------------------------------------------------------------------


def test_the_memory_page_shows_the_notes_of_a_source_or_of_one_import(owner):
    first, second = finished_import(owner), finished_import(owner, "claude")
    learn(owner, first, "Keeps bees", "Lives in Lyon")
    learn(owner, second, "Drinks green tea", target="memory")
    memory_add(user=owner, target="user", content="Typed by hand")
    client = login(owner)

    everything = page(client)
    assert all(t in everything for t in ("Keeps bees", "Drinks green tea", "Typed by hand"))
    # The filter offers each source and each import, with how many notes each wrote.
    first_label = f"Learned from your ChatGPT import of {day(first)}"
    second_label = f"Learned from your Claude import of {day(second)}"
    assert f'href="?source_import={first.pk}">{first_label} <span class="count">2</span>' in (
        everything
    )
    assert f'href="?source_import={second.pk}">{second_label} <span class="count">1</span>' in (
        everything
    )
    assert 'href="?source=import_review">Learned from imported history <span class="count">3' in (
        everything
    )

    learned = page(client, source="import_review")
    assert "Keeps bees" in learned and "Drinks green tea" in learned
    assert "Typed by hand" not in learned
    assert "Showing 3 entries by “Learned from imported history”" in learned
    assert "memory_learned_remove" not in learned and "Remove these" not in learned

    one = page(client, source_import=first.pk)
    assert "Keeps bees" in one and "Lives in Lyon" in one
    assert "Drinks green tea" not in one and "Typed by hand" not in one
    assert f"Showing 2 entries learned from your ChatGPT import of {day(first)}." in one
    assert reverse("memory_learned_remove", args=[first.pk]) in one
    assert "Remove these 2 notes" in one
    assert 'action="/memory/add/' not in one  # the filtered view is for looking and pruning

    manual = page(client, source="manual")
    assert "Typed by hand" in manual and "Keeps bees" not in manual

    # A filter that makes no sense shows everything rather than failing.
    for bad in ({"source": "bogus"}, {"source_import": "abc"}, {"source_import": "-1"}):
        assert "Typed by hand" in page(client, **bad) and "Keeps bees" in page(client, **bad)


def test_the_api_lists_the_notes_of_a_source_or_an_import_and_refuses_a_bad_filter(owner):
    first, second = finished_import(owner), finished_import(owner)
    learn(owner, first, "Keeps bees")
    learn(owner, second, "Drinks green tea")
    memory_add(user=owner, target="user", content="Typed by hand")
    client = login(owner)

    def listed(**query):
        response = client.get(reverse("api-memory-list"), query)
        assert response.status_code == 200, response.content
        return {e["content"] for e in response.json()["results"]}

    assert listed(source="import_review") == {"Keeps bees", "Drinks green tea"}
    assert listed(source_import=first.pk) == {"Keeps bees"}
    assert listed(source="import_review", source_import=second.pk) == {"Drinks green tea"}
    assert listed(source="manual") == {"Typed by hand"}
    for bad in (
        {"source": "bogus"},
        {"source_import": "abc"},
        {"source_import": "١٢"},  # digits, but not ASCII ones
        {"source": "tool", "source_import": first.pk},
    ):
        response = client.get(reverse("api-memory-list"), bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid"


# --- removing them ------------------------------------------------------------------------


def test_removing_an_import_s_notes_takes_all_of_them_and_nothing_else(owner):
    first, second = finished_import(owner), finished_import(owner)
    learn(owner, first, "Keeps bees", "Lives in Lyon")
    learn(owner, first, "Their hives face south", target="memory")
    learn(owner, second, "Drinks green tea")
    memory_add(user=owner, target="user", content="Typed by hand")
    Profile.objects.update_or_create(user=owner, defaults={"memory_write_approval": True})
    learn(owner, first, "Sells honey at the market")  # waits for approval
    client = login(owner)
    assert "Showing 4 entries" in page(client, source_import=first.pk)
    before = MemoryEvent.objects.filter(owner=owner).count()

    response = client.post(reverse("memory_learned_remove", args=[first.pk]), follow=True)

    assert response.redirect_chain[-1][0] == reverse("memory_page")
    assert "Removed 3 notes and rejected 1 waiting for your approval." in (
        response.content.decode()
    )
    assert contents(owner) == {"Drinks green tea", "Typed by hand"}
    # Each change is in the activity log as the person's, with the text that went.
    events = MemoryEvent.objects.filter(owner=owner).order_by("id")[before:]
    assert sorted((e.action, e.source, e.verdict, e.before or e.after) for e in events) == [
        ("reject", "manual", "rejected", "Sells honey at the market"),
        ("remove", "manual", "accepted", "Keeps bees"),
        ("remove", "manual", "accepted", "Lives in Lyon"),
        ("remove", "manual", "accepted", "Their hives face south"),
    ]
    assert all(e.actor_id == owner.pk for e in events)
    # Done twice (a double click): nothing more goes.
    again = client.post(reverse("memory_learned_remove", args=[first.pk]), follow=True)
    assert "nothing to remove" in again.content.decode()
    assert contents(owner) == {"Drinks green tea", "Typed by hand"}


def test_a_note_the_person_edited_is_theirs_and_stays(owner):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees", "Lives in Lyon")
    client = login(owner)
    edited = MemoryEntry.objects.get(owner=owner, content="Lives in Lyon")
    client.post(reverse("memory_entry_edit", args=[edited.pk]), {"content": "Lives in Lille"})

    client.post(reverse("memory_learned_remove", args=[job.pk]))

    assert contents(owner) == {"Lives in Lille"}
    assert MemoryEntry.objects.get(owner=owner).source == "manual"


def test_the_account_page_removes_the_notes_of_one_import(owner, settings):
    old = finished_import(owner)
    learn(owner, old, "Keeps bees")
    # Three newer imports push the old one off the list of the latest; its notes keep it
    # there, so the Memory page's link to it lands.
    newer = [finished_import(owner, "claude") for _ in range(3)]
    learn(owner, newer[0], "Drinks green tea")
    client = login(owner)
    account = client.get(reverse("account")).content.decode()
    assert all(f'id="chat-import-{job.pk}"' in account for job in [old, *newer])
    assert account.count("Remove the 1 note learned from this import") == 2
    assert f"Remove the 1 note learned from your ChatGPT import of {day(old)}?" in account

    response = client.post(reverse("account_import_chats_notes_remove", args=[old.pk]), follow=True)

    assert response.redirect_chain[-1][0] == panel(old)
    body = response.content.decode()
    assert "Removed 1 note." in body
    assert contents(owner) == {"Drinks green tea"}
    # With its notes gone, the old import leaves the list (only the latest three stay).
    assert f'id="chat-import-{old.pk}"' not in body
    api = client.get(reverse("api-me-chat-imports")).json()["results"]
    assert [j["learned_notes"]["active"] for j in api] == [0, 0, 1]


def test_the_api_removes_the_notes_of_one_import(owner):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees", "Lives in Lyon")
    memory_add(user=owner, target="user", content="Typed by hand")
    client = login(owner)

    response = client.delete(reverse("api-me-chat-import-notes", args=[job.pk]))

    assert response.status_code == 200
    assert response.json() == {"removed": 2, "rejected": 0, "message": "Removed 2 notes."}
    assert contents(owner) == {"Typed by hand"}
    assert set(
        MemoryEvent.objects.filter(owner=owner, action="remove").values_list("source", flat=True)
    ) == {"api"}


def test_nobody_can_see_or_remove_another_person_s_learned_notes(owner, outsider):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees")
    # The outsider's own note that claims the owner's import (no path writes that, but if
    # one did, it must not reveal or reach the owner's import).
    theirs = finished_import(outsider)
    learn(outsider, theirs, "Plays chess")
    MemoryEntry.objects.filter(owner=outsider).update(source_client=str(job.pk))
    stranger = login(outsider)

    removed = stranger.post(reverse("memory_learned_remove", args=[job.pk]), follow=True)
    assert contents(owner) == {"Keeps bees"}
    # … it removes the outsider's own rows that name that id, never the owner's.
    assert contents(outsider) == set()
    assert "Removed 1 note." in removed.content.decode()

    learn(outsider, theirs, "Plays go")
    MemoryEntry.objects.filter(owner=outsider).update(source_client=str(job.pk))
    body = page(stranger)
    assert "Plays go" in body and f"import of {day(job)}" not in body
    assert panel(job) not in body and "Learned from imported history" in body
    assert f"import of {day(job)}" not in page(stranger, source_import=job.pk)

    refused = stranger.post(reverse("account_import_chats_notes_remove", args=[job.pk]))
    assert refused.status_code == 404
    assert stranger.delete(reverse("api-me-chat-import-notes", args=[job.pk])).status_code == 404
    listed = stranger.get(reverse("api-memory-list"), {"source_import": job.pk}).json()
    assert [e["content"] for e in listed["results"]] == ["Plays go"]
    assert listed["results"][0]["source_label"] == "Learned from imported history"
    assert f'id="chat-import-{job.pk}"' not in stranger.get(reverse("account")).content.decode()
    assert contents(owner) == {"Keeps bees"}


# --- export, import, erasure --------------------------------------------------------------


def archive(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_export_carries_the_source_and_a_hermes_import_of_it_still_works(owner, export_dir):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees")
    learn(owner, job, "Their hives face south", target="memory")
    export_dir.mkdir()
    target = export_dir / "olivia.zip"
    build_export(user=owner, target=target)
    files = archive(target)

    data = json.loads(files["export.json"])
    rows = {e["content"]: e for e in data["memory_entries"]}
    assert {(r["source"], r["source_client"]) for r in rows.values()} == {
        ("import_review", str(job.pk))
    }
    assert [(j["id"], j["source"]) for j in data["chat_imports"]] == [(job.pk, "chatgpt")]
    events = {(e["source"], e["source_client"]) for e in data["memory_events"]}
    assert events == {("import_review", str(job.pk))}
    # Hermes' own files are the texts alone.
    assert files["memories/USER.md"] == b"Keeps bees"
    assert files["memories/MEMORY.md"] == b"Their hives face south"

    fresh = UserFactory(username="fiona")
    report = hermes_import_zip(user=fresh, upload=io.BytesIO(target.read_bytes()))
    assert report.errors == [] and report.blocked == []
    imported = MemoryEntry.objects.filter(owner=fresh)
    assert {(e.content, e.source, e.source_client) for e in imported} == {
        ("Keeps bees", "import", ""),
        ("Their hives face south", "import", ""),
    }
    # Into the same account it adds nothing, and the notes keep their import.
    again = hermes_import_zip(user=owner, upload=io.BytesIO(target.read_bytes()))
    assert again.errors == []
    assert set(MemoryEntry.objects.filter(owner=owner).values_list("source", flat=True)) == {
        "import_review"
    }


def test_forget_all_memory_and_erasure_reach_the_learned_notes(owner, outsider):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees")
    learn(outsider, finished_import(outsider), "Plays chess")

    memory_forget_all(user=owner)

    assert not MemoryEntry.objects.filter(owner=owner).exists()
    assert not MemoryEvent.objects.filter(owner=owner).exists()
    assert contents(outsider) == {"Plays chess"}
    account = login(owner).get(reverse("account")).content.decode()
    assert "learned from this import" not in account

    learn(owner, job, "Keeps bees")
    account_erase(user=owner, password=PASSWORD)
    assert not MemoryEntry.objects.filter(source=Source.IMPORT_REVIEW, owner_id=owner.pk).exists()
    assert not ChatImportJob.objects.filter(pk=job.pk).exists()
    assert contents(outsider) == {"Plays chess"}


def test_the_conversation_inspector_names_the_import_of_a_note_its_prompt_showed(owner):
    job = finished_import(owner)
    learn(owner, job, "Keeps bees")
    chat = Session.objects.create(owner=owner, title="Later chat")
    memory_snapshot_freeze(session=chat)

    body = login(owner).get(reverse("session_inspect", args=[chat.pk])).content.decode()

    label = f"Learned from your ChatGPT import of {day(job)}"
    assert f'Keeps bees <span class="muted small">— <a href="{panel(job)}">{label}</a>' in body
