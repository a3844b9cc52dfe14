"""Branches in the export and the Hermes import: every branch is exported; in state.db the
rows off the selected path are Hermes' rewound rows (active 0, compacted 0), so Hermes
continues from the selected path; an import keeps the selected path and says what it left."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile

from privacy.export import build_export
from privacy.hermes_import import hermes_import_zip
from sessions_app.models import Message, Session
from tests.factories import UserFactory, conversation_with


def branched(owner) -> Session:
    session = conversation_with(owner, "first question", "second question")
    second = session.messages.get(content="second question")
    Message.objects.filter(session=session, id__gte=second.pk).update(active=False)
    edited = Message.objects.create(
        session=session, role="user", content="second, edited", parent_id=second.parent_id
    )
    Message.objects.create(
        session=session,
        role="assistant",
        status="complete",
        content="Edited answer.",
        parent=edited,
    )
    return session


def test_every_branch_is_exported_and_state_db_marks_the_others_rewound(
    owner, outsider, export_dir, tmp_path
):
    session = branched(owner)
    conversation_with(outsider, "not mine")
    export_dir.mkdir()
    build_export(user=owner, target=export_dir / "a.zip")
    with zipfile.ZipFile(export_dir / "a.zip") as archive:
        (tmp_path / "state.db").write_bytes(archive.read("state.db"))
        exported = json.loads(archive.read("export.json"))
    conn = sqlite3.connect(tmp_path / "state.db")
    rows = conn.execute(
        "SELECT content, active, compacted FROM messages WHERE session_id = ? ORDER BY id",
        (session.pk,),
    ).fetchall()
    assert rows == [
        ("first question", 1, 0),
        ("Answer 0.", 1, 0),
        ("second question", 0, 0),
        ("Answer 1.", 0, 0),
        ("second, edited", 1, 0),
        ("Edited answer.", 1, 0),
    ]
    # What Hermes resumes (live rows) is the selected path.
    live = conn.execute(
        "SELECT content FROM messages WHERE session_id = ? AND active = 1 ORDER BY id",
        (session.pk,),
    ).fetchall()
    assert [r[0] for r in live] == [
        "first question",
        "Answer 0.",
        "second, edited",
        "Edited answer.",
    ]
    assert conn.execute("SELECT count(*) FROM messages WHERE content = 'not mine'").fetchone() == (
        0,
    )
    (conversation,) = exported["conversations"]
    messages = {m["content"]: m for m in conversation["messages"]}
    assert messages["second question"]["active"] is False
    assert messages["second, edited"]["parent_id"] == messages["Answer 0."]["id"]


def test_import_keeps_the_selected_path_and_reports_the_rewound_rows(owner, export_dir):
    branched(owner)
    export_dir.mkdir()
    build_export(user=owner, target=export_dir / "a.zip")
    fresh = UserFactory(username="fiona")
    report = hermes_import_zip(user=fresh, upload=io.BytesIO((export_dir / "a.zip").read_bytes()))
    (session,) = Session.objects.filter(owner=fresh)
    rows = list(session.messages.order_by("id"))
    assert [m.content for m in rows] == [
        "first question",
        "Answer 0.",
        "second, edited",
        "Edited answer.",
    ]
    assert all(m.active for m in rows)
    assert [m.parent_id for m in rows] == [None, *[m.pk for m in rows[:-1]]]
    assert any("2 message(s) on other branches" in w for w in report.warnings)
