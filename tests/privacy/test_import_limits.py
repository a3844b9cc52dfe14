"""A Hermes home is foreign data: a state.db that would compute its messages is refused,
every imported text is cut to its cap (and the report says so), and one import reads a
bounded amount of text."""

from __future__ import annotations

import io
import sqlite3
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from django.db.models.functions import Length
from django.urls import reverse

from memory.models import MemoryEntry
from privacy.hermes_import import hermes_import, hermes_import_zip
from sessions_app.models import Message, Session
from tests.privacy.conftest import login
from tests.privacy.test_import import HERMES_DDL, T0

pytestmark = pytest.mark.django_db

# 20 MB of text per message if SQLite were allowed to compute it.
BOMB_BYTES = 10_000_000


def bomb_zip(*, shape: str = "generated") -> bytes:
    """The issue's archive: a state.db of a few KiB whose messages.content is an expression."""
    buffer = io.BytesIO()
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT, started_at REAL)")
    db.execute("INSERT INTO sessions VALUES ('s1', 'cli', ?)", (T0,))
    if shape == "generated":
        db.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT, role TEXT, "
            f"timestamp REAL, content TEXT AS (hex(zeroblob({BOMB_BYTES}))))"
        )
        db.executemany(
            "INSERT INTO messages (session_id, role, timestamp) VALUES ('s1', 'user', ?)",
            [(T0 + i,) for i in range(4)],
        )
    else:  # a view where the messages table belongs
        db.execute(
            "CREATE VIEW messages AS SELECT 1 AS id, 's1' AS session_id, 'user' AS role, "
            f"{T0} AS timestamp, hex(zeroblob({BOMB_BYTES})) AS content"
        )
    db.commit()
    data = db.serialize()
    db.close()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("state.db", data)
    return buffer.getvalue()


def imported_chars(user) -> int:
    lengths = Message.objects.filter(session__owner=user).annotate(n=Length("content"))
    return sum(lengths.values_list("n", flat=True))


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ("generated", "'messages.content' is a generated column"),
        ("view", "'messages' is a view"),
    ],
)
def test_a_state_db_that_computes_its_messages_is_refused_in_bounded_memory(owner, shape, reason):
    data = bomb_zip(shape=shape)
    assert len(data) < 2048  # the was 607 bytes
    tracemalloc.start()
    try:
        report = hermes_import_zip(user=owner, upload=io.BytesIO(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"peak Python memory {peak:,} bytes"
    assert not Session.objects.filter(owner=owner).exists()
    assert imported_chars(owner) == 0
    (error,) = report.errors
    assert error.startswith("state.db was refused and no conversation was imported")
    assert reason in error


def test_the_person_sees_the_refusal_on_the_account_page(owner):
    upload = io.BytesIO(bomb_zip())
    upload.name = "hermes.zip"
    response = login(owner).post(reverse("account_import"), {"home": upload}, follow=True)
    body = response.content.decode()
    assert "Import finished with problems." in body
    assert "state.db was refused and no conversation was imported" in body
    assert "generated column" in body
    assert not Message.objects.filter(session__owner=owner).exists()


def hermes_home(root: Path, rows: list[tuple[str, str, dict[str, str]]]) -> Path:
    """A home whose state.db has one session per (id, title) and the given message fields."""
    home = root / ".hermes"
    home.mkdir()
    db = sqlite3.connect(home / "state.db")
    db.executescript(HERMES_DDL)
    for n, (sid, title, fields) in enumerate(rows):
        db.execute(
            "INSERT INTO sessions (id, source, started_at, title) VALUES (?, 'cli', ?, ?)",
            (sid, T0 + n, title),
        )
        names = ", ".join(fields)
        db.execute(
            f"INSERT INTO messages (session_id, role, timestamp, {names}) "  # noqa: S608
            f"VALUES (?, 'assistant', ?, {', '.join('?' * len(fields))})",
            (sid, T0 + n, *fields.values()),
        )
    db.commit()
    db.close()
    return home


def test_every_long_field_is_cut_to_its_cap_and_the_report_says_so(owner, tmp_path, settings):
    settings.HERMES_MAX_MESSAGE_CHARS = 32_000
    calls = '[{"id": "c", "type": "function", "function": {"name": "t", "arguments": "%s"}}]'
    home = hermes_home(
        tmp_path,
        [
            (
                "20260110_093000_a1b2c3",
                "T" * 300,
                {
                    "content": "a" * 2_000_011,
                    "reasoning": "r" * 40_000,
                    "tool_calls": calls % ("x" * 50_000),
                },
            ),
            ("20260110_093000_d4e5f6", "Short", {"content": "fits"}),
        ],
    )
    (home / "memories").mkdir()
    (home / "memories" / "MEMORY.md").write_text("big note " * 40_000)
    (home / "SOUL.md").write_text("You are Hermes. " * 5_000)
    report = hermes_import(user=owner, home=home)
    long = Message.objects.get(session_id="20260110_093000_a1b2c3")
    assert len(long.content) == 32_000 and len(long.reasoning) == 32_000
    assert long.tool_calls is None
    assert Session.objects.get(pk="20260110_093000_a1b2c3").title == "T" * 100
    assert Message.objects.get(session_id="20260110_093000_d4e5f6").content == "fits"
    lines = report.lines()
    assert "Shortened: 1 message texts cut to 32,000 characters (the chat's message limit)." in (
        lines
    )
    assert "Shortened: 1 reasoning texts cut to 32,000 characters (the chat's message limit)." in (
        lines
    )
    assert "Shortened: 1 tool calls longer than 32,000 characters, dropped." in lines
    assert "Shortened: 1 titles cut to 100 characters." in lines
    assert "Error: MEMORY.md is larger than 256 KiB; nothing imported from it." in lines
    assert "Error: SOUL.md is larger than 64 KiB; nothing imported from it." in lines
    assert not MemoryEntry.objects.filter(owner=owner).exists()


def test_one_import_stops_at_its_read_budget(owner, tmp_path, settings):
    settings.HERMES_IMPORT_MAX_MB = 1  # a budget of 4 MiB of text
    settings.HERMES_MAX_MESSAGE_CHARS = 32_000
    rows = [(f"20260110_0930{n:02d}_a1b2c3", f"Chat {n}", {"content": "b" * 1_000_000})
            for n in range(8)]  # fmt: skip
    report = hermes_import(user=owner, home=hermes_home(tmp_path, rows))
    # 32,000 characters a message: all eight fit.
    assert report.errors == [] and report.sessions_created == 8
    settings.HERMES_MAX_MESSAGE_CHARS = 1_000_000
    Session.objects.filter(owner=owner).delete()
    report = hermes_import(user=owner, home=tmp_path / ".hermes")
    assert 0 < report.sessions_created < 8
    assert imported_chars(owner) <= 4 * 1024 * 1024
    (error,) = report.errors
    assert error.startswith(f"Stopped at conversation {rows[report.sessions_created][0]}")
