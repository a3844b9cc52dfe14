"""Hermes' compaction handoffs in an imported state.db become this app's summaries: found by
Hermes' summary prefix (current and legacy) and, where the database has it, by its
`_compressed_summary` column — and ordinary messages that merely mention the prefix stay
ordinary."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from django.urls import reverse

from privacy.hermes_import import hermes_import
from sessions_app.compression import SUMMARY_PREFIX, SUMMARY_SUFFIX, plan_compression
from sessions_app.models import Message, Session
from tests.privacy.conftest import login
from tests.privacy.test_import import HERMES_DDL

pytestmark = pytest.mark.django_db

T0 = 1768037400.0
IN_PLACE = "20260112_090000_aaaaaa"
HERMES_PREFIX = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary "
    "below. This is a handoff from a previous context window; answer only the latest "
    "message after it. MEMORY.md and USER.md remain authoritative."
)
SUMMARY = "## Goal\nUpgrade the cluster to 1.30.\n\n## Completed Actions\n1. Drained node-a."
END = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"


def _write(conn: sqlite3.Connection, session: str, rows: list[tuple]) -> None:
    for i, (role, content, flag, active, compacted) in enumerate(rows):
        conn.execute(
            "INSERT INTO messages (session_id, role, content, tool_call_id, timestamp, "
            "_compressed_summary, active, compacted) VALUES (?,?,?,?,?,?,?,?)",
            (session, role, content, "call_x" if role == "tool" else None, T0 + i, flag,
             active, compacted),
        )  # fmt: skip


@pytest.fixture
def in_place_home(tmp_path: Path) -> Path:
    """A Hermes home whose one conversation was compacted in place (Hermes' default now):
    the old rows archived (active 0, compacted 1), the handoff written as a live row whose
    `_compressed_summary` column was left at 0."""
    home = tmp_path / ".hermes"
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.executescript(HERMES_DDL)
    conn.execute(
        "INSERT INTO sessions (id, source, started_at, title) VALUES (?, 'cli', ?, ?)",
        (IN_PLACE, T0, "Cluster upgrade"),
    )
    _write(
        conn,
        IN_PLACE,
        [
            ("user", "Plan the 1.30 upgrade", 0, 0, 1),
            ("assistant", "Drain node-a first.", 0, 0, 1),
            ("user", f"{HERMES_PREFIX}\n{SUMMARY}\n\n{END}", 0, 1, 0),
            ("user", "Now node-b. Why was [CONTEXT COMPACTION] in my logs?", 0, 1, 0),
            ("assistant", "", 0, 1, 0),
            ("tool", "[CONTEXT COMPACTION] appears in this log line", 0, 1, 0),
            ("assistant", "That line is from the agent, not the cluster.", 0, 1, 0),
        ],
    )
    conn.commit()
    conn.close()
    return home


def test_a_handoff_with_hermes_prefix_is_imported_as_a_summary(owner, in_place_home):
    report = hermes_import(user=owner, home=in_place_home)
    assert report.errors == [] and report.sessions_created == 1
    rows = list(Message.objects.filter(session_id=IN_PLACE).order_by("id"))
    assert [(m.role, m.kind) for m in rows] == [
        ("user", "summary"),
        ("user", ""),
        ("assistant", ""),
        ("tool", ""),
        ("assistant", ""),
    ]
    summary = rows[0]
    # This app's own framing around Hermes' summary text, without Hermes' framing.
    assert summary.content == f"{SUMMARY_PREFIX}\n\n{SUMMARY}\n\n{SUMMARY_SUFFIX}"
    assert "Earlier turns were compacted into the summary below. This is" not in summary.content
    # Ordinary messages that mention the prefix are left as they were.
    assert rows[1].content == "Now node-b. Why was [CONTEXT COMPACTION] in my logs?"
    assert rows[3].content == "[CONTEXT COMPACTION] appears in this log line"


def test_a_later_compression_builds_on_the_imported_summary(owner, in_place_home):
    hermes_import(user=owner, home=in_place_home)
    history = [
        {"role": m.role, "content": m.content}
        for m in Message.objects.filter(session_id=IN_PLACE).order_by("id")
        if m.role != "tool"
    ] + [{"role": "user", "content": f"question {i}"} for i in range(8)]
    plan = plan_compression(history, tail_budget=50)
    assert plan is not None
    assert plan.head == [] and plan.previous_summary == SUMMARY


def test_the_chat_shows_the_imported_summary_as_the_compression_marker(owner, in_place_home):
    hermes_import(user=owner, home=in_place_home)
    body = login(owner).get(reverse("chat_session", args=[IN_PLACE])).content.decode()
    assert 'class="compress-marker"' in body
    assert "Upgrade the cluster to 1.30." in body
    assert "This is a handoff from a previous context window" not in body


def test_the_summary_column_and_the_legacy_prefix_are_both_recognised(owner, tmp_path):
    """An older state.db: `[CONTEXT SUMMARY]:` handoffs, and a flagged row whose text has no
    prefix at all."""
    home = tmp_path / ".hermes"
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.executescript(HERMES_DDL)
    conn.execute(
        "INSERT INTO sessions (id, source, started_at) VALUES ('legacy1', 'cli', ?)", (T0,)
    )
    conn.execute(
        "INSERT INTO sessions (id, source, started_at) VALUES ('flagged1', 'cli', ?)", (T0,)
    )
    _write(
        conn,
        "legacy1",
        [
            ("assistant", "[CONTEXT SUMMARY]: The user is moving to Lyon in May.", 0, 1, 0),
            ("user", "Which neighbourhood?", 0, 1, 0),
        ],
    )
    _write(conn, "flagged1", [("user", "Goal: write the grant report.", 1, 1, 0)])
    conn.commit()
    conn.close()
    hermes_import(user=owner, home=home)
    legacy = Message.objects.filter(session_id="legacy1").order_by("id")
    assert [m.kind for m in legacy] == ["summary", ""]
    assert legacy[0].content == (
        f"{SUMMARY_PREFIX}\n\nThe user is moving to Lyon in May.\n\n{SUMMARY_SUFFIX}"
    )
    flagged = Message.objects.get(session_id="flagged1")
    assert flagged.kind == "summary"
    assert (
        flagged.content == f"{SUMMARY_PREFIX}\n\nGoal: write the grant report.\n\n{SUMMARY_SUFFIX}"
    )
    assert Session.objects.filter(owner=owner).count() == 2
