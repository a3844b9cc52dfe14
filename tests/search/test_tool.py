"""The `session_search` tool's modes, as the agent calls it through the registry."""

from __future__ import annotations

import json

import pytest

from sessions_app.agent.tools import ToolContext, registry
from sessions_app.models import Message, Session

from .conftest import compress, make_chat

pytestmark = pytest.mark.django_db


def call(user, args, session_id=None):
    ctx = ToolContext(user=user, session_id=session_id)
    if not isinstance(args, str):
        args = json.dumps(args)
    return registry.dispatch(ctx, "session_search", args, allowed={"session_search"})


def test_registered_in_the_search_toolset():
    assert "session_search" in registry.names(["search"])
    schema = registry.schemas(["session_search"])[0]["function"]
    assert set(schema["parameters"]["properties"]) >= {
        "query",
        "limit",
        "session_id",
        "around_message_id",
        "window",
    }


def test_no_query_lists_recent_conversations_without_the_current_one(owner, no_llm):
    old = make_chat(
        owner, [("user", "how do I bake bread?"), ("assistant", "Flour.")], title="Bread"
    )
    current = make_chat(owner, [("user", "hello")], start=100)
    result = call(owner, {}, session_id=current.id)
    assert result.ok
    assert result.payload["mode"] == "recent"
    (item,) = result.payload["results"]
    assert item["session_id"] == old.id
    assert item["title"] == "Bread"
    assert item["preview"] == "how do I bake bread?"
    assert item["message_count"] == 2
    assert item["link"] == f"/chat/{old.id}/"


def test_whitespace_query_browses(owner, no_llm):
    make_chat(owner, [("user", "x")])
    assert call(owner, {"query": "   "}).payload["mode"] == "recent"


def test_browse_shows_a_compressed_conversation_once_at_its_tip(owner, no_llm):
    root = make_chat(owner, [("user", "start")], title="Long one")
    tip = compress(root, owner, [("user", "continued")])
    (item,) = call(owner, {}).payload["results"]
    assert item["session_id"] == tip.id
    assert item["preview"] == "start"


def test_query_excludes_the_current_lineage(owner, no_llm):
    root = make_chat(owner, [("user", "marmot migration")])
    current = compress(root, owner, [("user", "marmot again")])
    other = make_chat(owner, [("user", "marmot elsewhere")], start=500)
    payload = call(owner, {"query": "marmot"}, session_id=current.id).payload
    assert [r["session_id"] for r in payload["results"]] == [other.id]


def test_no_match_says_so(owner, no_llm):
    make_chat(owner, [("user", "x")])
    result = call(owner, {"query": "nothingmatchesthis"})
    assert result.ok
    assert result.payload["results"] == []
    assert result.payload["message"] == "No matching conversations found."


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "NEAR(", "col:x", "*", "^", "!!!", "\x00", "🚀🚀", "\u200b", "x" * 10_000],
)
def test_hostile_queries_are_answered(owner, no_llm, query):
    make_chat(owner, [("user", "col x unbalanced near")])
    assert call(owner, {"query": query}).ok


def test_read_a_short_conversation(owner, no_llm):
    chat = make_chat(
        owner, [("system", "hidden"), ("user", "q"), ("assistant", "a")], title="Short"
    )
    payload = call(owner, {"session_id": chat.id}).payload
    assert payload["mode"] == "read"
    assert payload["title"] == "Short"
    assert [(m["role"], m["content"]) for m in payload["messages"]] == [
        ("user", "q"),
        ("assistant", "a"),
    ]


def test_read_a_long_conversation_gives_start_and_end(owner, no_llm):
    chat = make_chat(owner, [("user", f"message {i}") for i in range(40)])
    payload = call(owner, {"session_id": chat.id}).payload
    contents = [m.get("content") for m in payload["messages"]]
    assert contents[:20] == [f"message {i}" for i in range(20)]
    assert payload["messages"][20] == {"omitted": 10}
    assert contents[21:] == [f"message {i}" for i in range(30, 40)]
    assert payload["message_count"] == 40


def test_read_caps_long_messages(owner, no_llm):
    chat = make_chat(owner, [("user", "y" * 5000)])
    (message,) = call(owner, {"session_id": chat.id}).payload["messages"]
    assert len(message["content"]) == 4000
    assert message["content_truncated"] and message["original_content_chars"] == 5000


def test_scroll_around_a_message(owner, no_llm):
    chat = make_chat(owner, [("user", f"m{i}") for i in range(30)])
    anchor = Message.objects.get(session=chat, content="m15")
    payload = call(
        owner, {"session_id": chat.id, "around_message_id": anchor.id, "window": 2}
    ).payload
    assert payload["mode"] == "scroll"
    assert [m["content"] for m in payload["messages"]] == ["m13", "m14", "m15", "m16", "m17"]


def test_scroll_window_is_clamped(owner, no_llm):
    chat = make_chat(owner, [("user", f"m{i}") for i in range(60)])
    anchor = Message.objects.get(session=chat, content="m30")
    payload = call(
        owner, {"session_id": chat.id, "around_message_id": anchor.id, "window": 500}
    ).payload
    assert len(payload["messages"]) == 41


def test_another_users_conversation_is_not_found(owner, outsider, no_llm):
    theirs = make_chat(outsider, [("user", "private")])
    anchor = Message.objects.get(session=theirs)
    for args in (
        {"session_id": theirs.id},
        {"session_id": theirs.id, "around_message_id": anchor.id},
    ):
        result = call(owner, args)
        assert not result.ok
        assert result.payload["code"] == "not_found"
        assert "private" not in json.dumps(result.payload)


def test_a_deleted_conversation_is_not_found_and_an_id_may_have_spaces(owner, no_llm):
    chat = make_chat(owner, [("user", "kept for a moment")])
    result = call(owner, {"session_id": f"  {chat.id} "})
    assert result.ok and result.payload["messages"][0]["content"] == "kept for a moment"
    Session.objects.filter(pk=chat.pk).update(end_reason=Session.EndReason.DELETED)
    result = call(owner, {"session_id": chat.id})
    assert result.payload["code"] == "not_found"
    assert "kept for a moment" not in json.dumps(result.payload)


def test_scroll_anchor_must_belong_to_the_conversation(owner, no_llm):
    a = make_chat(owner, [("user", "a")])
    b = make_chat(owner, [("user", "b")])
    anchor = Message.objects.get(session=b)
    result = call(owner, {"session_id": a.id, "around_message_id": anchor.id})
    assert result.payload["code"] == "not_found"


@pytest.mark.parametrize(
    "args",
    [
        {"query": 5},
        {"query": "x", "limit": "many"},
        {"query": "x", "role": "admin"},
        {"session_id": 7},
        {"session_id": "s", "around_message_id": "x"},
    ],
)
def test_bad_arguments_are_clear_errors(owner, no_llm, args):
    result = call(owner, args)
    assert not result.ok
    assert result.payload["code"] in {"invalid_arguments", "invalid_role", "not_found"}


def test_bad_json_arguments(owner, no_llm):
    result = call(owner, "{not json")
    assert not result.ok and result.payload["code"] == "invalid_arguments"
