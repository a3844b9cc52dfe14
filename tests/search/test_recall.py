"""Recall: stems beside exact words, titles, clean snippets and emoji queries, on the
current vendor (run it on SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import pytest

from sessions_app.search.hits import plain_text
from sessions_app.search.service import search_conversations

from .conftest import make_chat

pytestmark = pytest.mark.django_db


def ids(owner, query, **kw):
    result = search_conversations(owner=owner, query=query, limit=5, **kw)
    return [c.session_id for c in result.conversations]


def only(owner, query):
    result = search_conversations(owner=owner, query=query, limit=5)
    assert len(result.conversations) == 1, [c.title for c in result.conversations]
    return result.conversations[0]


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("camped", "we went camping near the lake"),
        ("camping", "we camped near the lake"),
        ("trams", "the old tram up the hill"),
        ("tram", "lisbon trams are yellow"),
        ("deployments", "the deployment failed twice"),
    ],
)
def test_a_word_finds_its_other_forms(owner, typed, stored):
    chat = make_chat(owner, [("user", stored)])
    make_chat(owner, [("user", "nothing to see here")])
    assert ids(owner, typed) == [chat.id]
    hit = only(owner, typed).hits[0]
    assert hit.snippet.highlights, hit.snippet  # the stemmed match is highlighted


def test_the_exact_form_ranks_above_a_stemmed_one(owner):
    stemmed = make_chat(owner, [("user", "we camped by the river all week long")])
    exact = make_chat(owner, [("user", "we went camping by the river all week long")])
    assert ids(owner, "camping") == [exact.id, stemmed.id]


def test_the_exact_form_is_found_among_more_stemmed_matches_than_rows_retrieved(owner):
    # Five short messages with another form of the word outrank, on the stemmed index
    # alone, a long one with the very word typed; three rows are retrieved.
    for n in range(5):
        make_chat(owner, [("user", f"we camped {n}")], start=n)
    filler = " ".join(f"note{n}" for n in range(60))
    exact = make_chat(owner, [("user", f"{filler} camping {filler}")], start=10)
    assert exact.id in ids(owner, "camping", rows=3)


def test_exact_words_still_match_exactly(owner):
    chat = make_chat(owner, [("user", "run zxqv-build.sh then restart")])
    assert ids(owner, "zxqv-build.sh") == [chat.id]
    assert ids(owner, '"then restart"') == [chat.id]
    assert ids(owner, "zxq*") == [chat.id]
    deployment = make_chat(owner, [("user", "the deployments of friday")])
    assert ids(owner, "deploym*") == [deployment.id]  # past the stem "deploy"


def test_a_title_is_searched_and_its_stem_too(owner):
    titled = make_chat(owner, [("user", "which line goes to the castle?")], title="Lisbon trams")
    make_chat(owner, [("user", "the bus timetable")], title="Porto buses")
    conv = only(owner, "trams")
    assert conv.session_id == titled.id
    assert conv.hits[0].snippet.text == "which line goes to the castle?"
    assert ids(owner, "tram") == [titled.id]


def test_a_matching_title_lifts_its_conversation(owner):
    mentions = make_chat(owner, [("user", "budget budget: the budget for rent")], title="Rent")
    titled = make_chat(owner, [("user", "the budget is tight this month")], title="Budget")
    assert ids(owner, "budget") == [titled.id, mentions.id]


def test_a_role_filter_ignores_titles(owner):
    make_chat(owner, [("user", "hello")], title="Lisbon trams")
    assert ids(owner, "trams", roles=("assistant",)) == []


def test_another_users_titles_never_come_back(owner, outsider):
    make_chat(outsider, [("user", "hello")], title="Wombat treasury plans")
    make_chat(owner, [("user", "hello")], title="Mine")
    for query in ["wombat", "treasury", "plan", "wombats OR treasuries"]:
        assert ids(owner, query) == [], query
    assert len(ids(outsider, "treasuries")) == 1


def test_deleted_conversations_are_not_found_by_title(owner):
    make_chat(owner, [("user", "hello")], title="Lisbon trams", end_reason="deleted")
    assert ids(owner, "trams") == []


def test_a_retitled_conversation_is_found_by_its_new_title_only(owner):
    chat = make_chat(owner, [("user", "hello")], title="Lisbon trams")
    chat.title = "Porto ferries"
    chat.save(update_fields=["title"])
    assert ids(owner, "trams") == []
    assert ids(owner, "ferry") == [chat.id]
    chat.delete()
    assert ids(owner, "ferry") == []


TOOL_CALLS = [
    {
        "id": "call_abc123",
        "type": "function",
        "function": {"name": "memory", "arguments": json.dumps({"content": "kayakoutpost"})},
    }
]


def test_a_match_in_tool_call_arguments_shows_text_not_json(owner):
    make_chat(owner, [("assistant", "", {"tool_calls": TOOL_CALLS, "status": "complete"})])
    snippet = only(owner, "kayakoutpost").hits[0].snippet
    assert snippet.text == "memory: kayakoutpost"
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["kayakoutpost"]


def test_a_match_in_text_beside_tool_calls_shows_the_text(owner):
    extra = {"tool_calls": TOOL_CALLS, "status": "complete"}
    make_chat(owner, [("assistant", "saving the kayakoutpost note", extra)])
    snippet = only(owner, "kayakoutpost").hits[0].snippet
    assert "call_" not in snippet.text and "{" not in snippet.text
    assert "saving the kayakoutpost note" in snippet.text


def test_snippets_drop_markdown_syntax_and_keep_highlights(owner):
    text = (
        "## Plan\n\n- **Book** the `ferryboat` tickets\n- see [the site](https://x.example)\n"
        "> quoted _ferryboat_ note\n\n```bash\nferryboat --go\n```"
    )
    make_chat(owner, [("assistant", text)])
    snippet = only(owner, "ferryboat").hits[0].snippet
    for syntax in ("##", "**", "`", "](", "> ", "```", "_ferryboat_"):
        assert syntax not in snippet.text, (syntax, snippet.text)
    assert "Book the ferryboat tickets" in snippet.text
    assert "see the site" in snippet.text
    assert {snippet.text[s:e] for s, e in snippet.highlights} == {"ferryboat"}


@pytest.mark.parametrize(
    ("fragment", "text"),
    [
        ("see [the site](https://x.example) now", "see the site now"),
        ("see [the site](https://x.exa", "see the site"),  # cut inside the url
        ("**bold** and _it_ and my_var", "bold and it and my_var"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "a b 1 2"),
        ("1. first\n2. second", "first second"),
    ],
)
def test_plain_text_takes_markdown_out_of_fragments(fragment, text):
    assert plain_text(fragment) == text


def test_an_emoji_only_query_finds_the_emoji(owner):
    chat = make_chat(owner, [("user", "the 🦆 pond at noon")])
    make_chat(owner, [("user", "the pond at noon")])
    result = search_conversations(owner=owner, query="🦆", limit=5)
    assert result.route == "like"
    assert [c.session_id for c in result.conversations] == [chat.id]
    snippet = result.conversations[0].hits[0].snippet
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["🦆"]


def test_lowercase_or_and_not_are_not_required_words(owner):
    chat = make_chat(owner, [("user", "kayak rental prices")])
    # Neither word is in the message: as operators-in-lowercase they are dropped (Hermes).
    assert ids(owner, "kayak or rental") == [chat.id]
    assert ids(owner, "kayak not rental") == [chat.id]
    assert ids(owner, "kayak OR canoe") == [chat.id]
