"""Property test: any query string gives sane results on this database vendor.

Run on SQLite by default and on PostgreSQL when DATABASE_URL points there. "Sane" means:
no exception, no database refusal logged, only the owner's conversations, at most `limit`.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.search.service import search_conversations

from .conftest import make_chat

pytestmark = pytest.mark.django_db

FRAGMENTS = [
    '"',
    "'",
    "*",
    "^",
    ":",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "+",
    "-",
    ".",
    "_",
    "%",
    "\\",
    "/",
    "NEAR",
    "NEAR(",
    "AND",
    "OR",
    "NOT",
    "and",
    "col:",
    "content:",
    "tool_name:",
    " ",
    "  ",
    "\x00",
    "\x01",
    "\u200b",
    "\u200f",
    "\u202e",
    "\ufeff",
    "\t",
    "\n",
    "deploy",
    "script",
    "chat-send",
    "my-app.config.ts",
    "C++",
    "deploy*",
    '"deploy script"',
    "部署",
    "脚本",
    "部署脚本",
    "数据库迁移",
    "カタカナ",
    "한국어",
    "🚀",
    "👩‍💻",
    "שלום",
    "مرحبا",
    "ß",
    "İ",
    "'; DROP TABLE x; --",
    "%_",
    "*deploy",
    "deploy**",
]

queries = st.one_of(
    st.text(max_size=60),
    st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=14).map("".join),
    st.sampled_from(["", " ", "x" * 10_240, "部" * 3000, '"' * 999, "*" * 500]),
)


@pytest.fixture
def corpus(owner, outsider):
    mine = {
        make_chat(
            owner,
            [
                ("user", "deploy script chat-send my-app.config.ts C++"),
                ("assistant", "部署脚本 数据库迁移 カタカナ 한국어 🚀 שלום"),
            ],
        ).id,
        make_chat(
            owner,
            [
                ("user", "NEAR col content tool_name AND OR NOT"),
                ("tool", "50% done_ok \\ / 'quoted'", {"tool_call_id": "c"}),
            ],
            start=100,
        ).id,
    }
    make_chat(outsider, [("user", "deploy script chat-send 部署脚本 数据库迁移 NEAR 50%")])
    return mine


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=queries)
def test_any_query_gives_sane_results(owner, corpus, caplog, query):
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sessions_app.search"):
        result = search_conversations(owner=owner, query=query, limit=5)
    assert len(result.conversations) <= 5
    assert {c.session_id for c in result.conversations} <= corpus
    for conv in result.conversations:
        for hit in conv.hits:
            assert hit.snippet is not None
            for start, end in hit.snippet.highlights:
                assert 0 <= start < end <= len(hit.snippet.text)
    assert not [r for r in caplog.records if r.name.startswith("sessions_app.search")]
