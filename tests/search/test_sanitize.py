"""The query sanitiser: Hermes' expected input → output table, and hostile input."""

from __future__ import annotations

import sqlite3

import pytest

from sessions_app.search.sanitize import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    contains_cjk,
    parse_query,
    sanitize_fts5_query,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hello world", "hello world"),
        ("hello AND", "hello"),
        ("OR world", "world"),
        ("***", ""),
        ("deploy*", "deploy*"),
        ('"exact phrase"', '"exact phrase"'),
        ("chat-send", '"chat-send"'),
        ('"my chat-send thing"', '"my chat-send thing"'),
        ("my-app.config.ts", '"my-app.config.ts"'),
        ("docker-compose_up", '"docker-compose_up"'),
        ("P2.2 OR simulate.p2", '"P2.2" OR "simulate.p2"'),
    ],
)
def test_hermes_expected_results(raw, expected):
    assert sanitize_fts5_query(raw) == expected


def test_todo_colon_fix_keeps_both_words():
    assert sanitize_fts5_query("TODO: fix").split() == ["TODO", "fix"]


def test_c_plus_plus_loses_its_plus_signs():
    assert "+" not in sanitize_fts5_query("C++")
    assert sanitize_fts5_query("C++") == "C"


def test_unterminated_quote_is_dropped():
    assert '"' not in sanitize_fts5_query('"unterminated')
    assert sanitize_fts5_query('"unterminated') == "unterminated"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("col:x", "col x"),  # never a column filter
        ("content:secret", "content secret"),
        ("NEAR(a b)", "NEAR a b"),  # NEAR without its group is just a word
        ("{content tool_name}:x", 'content "tool_name" x'),
        ("^start", "start"),
        ("*", ""),
        ("a OR OR b", "a OR b"),
        ("NOT x", "x"),
        ("cats AND NOT dogs", "cats NOT dogs"),
        ("a*b", '"a b"'),
        ('"phrase"*', '"phrase"*'),
        ("-flag", "flag"),
        ("50%", "50"),
        ("it's", "it s"),
        ("AND OR NOT", ""),
        ("and or not", ""),  # operator words not in capitals are dropped (Hermes)
        ("camping or hiking", "camping hiking"),
        ("trams not buses", "trams buses"),
        ('"or"', '"or"'),  # a quoted phrase is a word
    ],
)
def test_syntax_is_neutralised(raw, expected):
    assert sanitize_fts5_query(raw) == expected


def test_percent_is_kept_inside_cjk_queries_for_the_escaped_like_path():
    assert sanitize_fts5_query("部署 50%") == '部署 "50%"'


@pytest.mark.parametrize(
    "raw",
    ["", "   ", "\t\n", "!!!", "?!.,;:", "()", '""', "\u200b\u200f", "\x00"],
)
def test_nothing_searchable_gives_an_empty_query(raw):
    assert sanitize_fts5_query(raw) == ""
    assert not parse_query(raw)


def test_invisible_and_control_characters_split_words():
    assert sanitize_fts5_query("deploy\x00script") == "deploy script"
    assert sanitize_fts5_query("deploy\u200bscript") == "deploy script"
    assert sanitize_fts5_query("\u202edeploy") == "deploy"


def test_rtl_text_is_kept():
    assert sanitize_fts5_query("שלום עולם") == "שלום עולם"
    assert sanitize_fts5_query("مرحبا") == "مرحبا"


def test_emoji_next_to_words_is_ignored():
    assert sanitize_fts5_query("deploy 🚀") == "deploy"


def test_an_emoji_only_query_is_kept_as_a_quoted_term():
    assert sanitize_fts5_query("🦆") == '"🦆"'
    assert sanitize_fts5_query("🦆 OR 🐍") == '"🦆" OR "🐍"'
    assert [t.text for t in parse_query("🦆").groups[0]] == ["🦆"]
    assert parse_query("🦆").has_symbols


def test_length_and_term_caps():
    assert len(sanitize_fts5_query("x" * 10_000)) == MAX_QUERY_CHARS
    many = " ".join(f"w{i}" for i in range(100))
    assert len(sanitize_fts5_query(many).split()) == MAX_TERMS


def test_parse_query_groups_or_and_not():
    parsed = parse_query('deploy "build script" OR rollback NOT staging')
    assert [[(t.text, t.phrase, t.negated) for t in g] for g in parsed.groups] == [
        [("deploy", False, False), ("build script", True, False)],
        [("rollback", False, False), ("staging", False, True)],
    ]
    assert parsed.positive_terms == ["deploy", "build script", "rollback"]


def test_prefix_terms_are_marked():
    (group,) = parse_query("depl*").groups
    assert group[0].prefix and group[0].text == "depl"


def test_contains_cjk_ranges():
    assert contains_cjk("部署")
    assert contains_cjk("カタカナ")
    assert contains_cjk("한국어")
    assert not contains_cjk("deploy")


@pytest.mark.parametrize(
    "raw",
    [
        'multi-agent "unclosed',
        "a'b",
        "cats NOT",
        'x"y"z',
        "foo - bar",
        "a..b",
        "**deploy**",
        "(a OR b) AND (c",
        '"" OR ""',
        "NEAR(",
        "x AND AND y",
        "OR",
        "\\",
        "'; DROP TABLE x; --",
    ],
)
def test_output_is_always_valid_fts5(raw):
    """FTS5 itself is the judge: the sanitised text must never be a syntax error."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(content, tool_name)")
    db.execute("INSERT INTO t VALUES ('multi agent a b deploy', 'x')")
    query = sanitize_fts5_query(raw)
    if query:
        db.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()


def test_an_operator_word_with_a_prefix_star_is_quoted_not_an_operator():
    # Found by the fuzz test: `AND*` reached FTS5 as the AND operator ("syntax error").
    assert sanitize_fts5_query("AND*0_0") == '"AND"* "0_0"'


# --- CJK grams ------------------------------------------------------------------------------


def test_a_cjk_term_becomes_its_bigrams_and_a_single_character_a_prefix():
    from sessions_app.search.cjk import split_for_grams, term_pieces
    from sessions_app.search.sanitize import Term

    assert term_pieces(Term("部署")) == [("部署", False, True)]
    assert term_pieces(Term("数据库")) == [("数据", False, True), ("据库", False, True)]
    assert term_pieces(Term("谁")) == [("谁", True, True)]
    assert term_pieces(Term("Kafka部署")) == [("Kafka", False, False), ("部署", False, True)]
    assert term_pieces(Term("kuber", prefix=True)) == [("kuber", True, False)]
    split = split_for_grams(parse_query("kafka OR 部署 NOT 回滚"))
    assert split.fts5() == '("kafka") OR ("部署")'  # a NOT is left to the recheck
    assert split.tsquery() == "('kafka') | ('部署')"
    assert split.latin_part.fts == "kafka"
    assert split.query.fts == "kafka OR 部署 NOT 回滚"
