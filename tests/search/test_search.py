"""Retrieval, routing and grouping against the real database (SQLite or PostgreSQL)."""

from __future__ import annotations

import pytest

from core.exceptions import ServiceError
from sessions_app.models import Message, Session
from sessions_app.search import service
from sessions_app.search.backends import choose_route, find_hits
from sessions_app.search.sanitize import parse_query
from sessions_app.search.service import check_roles, search_conversations
from sessions_app.search.sql import Filters

from .conftest import at, compress, make_chat

pytestmark = pytest.mark.django_db


def ids(result):
    return [c.session_id for c in result.conversations]


def search(owner, query, **kw):
    kw.setdefault("limit", 5)
    return search_conversations(owner=owner, query=query, **kw)


# --- routing ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "route"),
    [
        ("deploy script", "words"),
        ("部署", "cjk"),  # 2 CJK characters
        ("谁", "cjk"),
        ("部署脚本", "cjk"),
        ("部署脚本 问题", "cjk"),
        ("kafka OR 部署", "cjk"),
        ("部署脚本 ok", "cjk"),
        ("데이터베이스", "cjk"),
        ("🦆", "like"),
        ("🦆🦆🦆", "trigram"),
    ],
)
def test_routing(query, route):
    assert choose_route(parse_query(query), Filters()) == route


def test_cjk_search_in_tool_output_is_ranked_too(owner):
    chat = make_chat(owner, [("user", "run it"), ("tool", "部署完成，没有错误")])
    result = search(owner, "部署", roles=("tool",))
    assert result.route == "cjk" and ids(result) == [chat.id]


# --- words --------------------------------------------------------------------------------


@pytest.fixture
def library(owner):
    deploy = make_chat(
        owner,
        [
            ("user", "How do we deploy the staging server?"),
            ("assistant", "Run the deploy script with --staging, then check nginx."),
            ("user", "The deploy script failed with a permission error."),
        ],
        title="Deploy script",
    )
    cooking = make_chat(
        owner,
        [("user", "A recipe for risotto please"), ("assistant", "Use arborio rice.")],
        title="Risotto",
        start=60,
    )
    chinese = make_chat(
        owner,
        [
            ("user", "我们讨论了部署脚本的问题，明天再看"),
            ("assistant", "好的，数据库迁移也要检查。"),
        ],
        title="中文对话",
        start=120,
    )
    return deploy, cooking, chinese


def test_latin_words_rank_the_right_conversation_first(owner, library):
    deploy, cooking, _ = library
    result = search(owner, "deploy script")
    assert result.route == "words"
    assert ids(result) == [deploy.id]
    assert ids(search(owner, "risotto OR nginx")) == [deploy.id, cooking.id] or set(
        ids(search(owner, "risotto OR nginx"))
    ) == {deploy.id, cooking.id}


def test_snippets_highlight_the_matched_words(owner, library, caplog):
    (conv,) = search(owner, "permission").conversations
    assert not caplog.records  # the database's own highlighter did it, no fallback
    snippet = conv.hits[0].snippet
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["permission"]
    assert "deploy script failed" in snippet.text
    assert conv.hits[0].snippet.marked().count(">>>permission<<<") == 1


def test_prefix_phrase_and_not(owner, library):
    deploy, cooking, _ = library
    assert ids(search(owner, "risot*")) == [cooking.id]
    assert ids(search(owner, '"permission error"')) == [deploy.id]
    assert ids(search(owner, '"error permission"')) == []
    assert ids(search(owner, "deploy NOT nginx")) == [deploy.id]  # another message matches
    assert ids(search(owner, "arborio NOT rice")) == []


def test_a_prefix_query_highlights_the_words_it_ran_into(owner, library):
    deploy, *_ = library
    (conv,) = search(owner, "permiss*").conversations
    assert conv.session_id == deploy.id
    snippet = conv.hits[0].snippet
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["permission"]


def test_stop_words_are_found_though_the_stemmed_index_drops_them(owner, library):
    # PostgreSQL's 'english' configuration keeps no stop words: "which" is found on the
    # exact index, alone, beside another group and inside a phrase.
    _, cooking, _ = library
    asked = make_chat(owner, [("user", "Which one would you pick?")], start=120)
    alone = search(owner, "which")
    assert (alone.route, ids(alone)) == ("words", [asked.id])
    assert set(ids(search(owner, "risotto OR which"))) == {cooking.id, asked.id}
    assert ids(search(owner, '"which one"')) == [asked.id]
    assert ids(search(owner, "which pick")) == [asked.id]


def test_latin_query_with_no_word_hits_retries_on_trigrams(owner, library):
    deploy, *_ = library
    result = search(owner, "ermissio")  # a substring, not a word
    assert result.route == "words+trigram"
    assert ids(result) == [deploy.id]


# --- CJK ---------------------------------------------------------------------------------


def test_cjk_two_characters_inside_a_sentence(owner, library):
    *_, chinese = library
    result = search(owner, "部署")
    assert result.route == "cjk"
    assert ids(result) == [chinese.id]
    snippet = result.conversations[0].hits[0].snippet
    assert [snippet.text[s:e] for s, e in snippet.highlights] == ["部署"]


def test_cjk_three_or_more_characters(owner, library):
    *_, chinese = library
    result = search(owner, "部署脚本")
    assert result.route == "cjk"
    assert ids(result) == [chinese.id]
    assert ids(search(owner, "数据库迁移")) == [chinese.id]
    assert ids(search(owner, "部署文档")) == []


def test_cjk_words_are_ranked_by_how_much_a_message_is_about_them(owner):
    once = make_chat(
        owner, [("user", "今天开会，顺便提到部署的事情，还有很多别的安排和计划要讨论")]
    )
    often = make_chat(owner, [("user", "部署失败，部署脚本要改，明天重新部署")], start=30)
    make_chat(owner, [("user", "午饭吃什么")], start=60)  # newest, unrelated
    assert ids(search(owner, "部署")) == [often.id, once.id]


def test_a_cjk_word_needs_its_characters_together(owner):
    together = make_chat(owner, [("user", "回滚方案已经准备好了")])
    apart = make_chat(owner, [("user", "方案回去再滚动一下")], start=30)  # 回 滚 apart
    assert ids(search(owner, "回滚")) == [together.id]
    assert ids(search(owner, "滚方案")) == [together.id]  # bigrams 滚方 方案, in order
    assert ids(search(owner, "滚")) == [together.id, apart.id] or set(ids(search(owner, "滚"))) == {
        together.id,
        apart.id,
    }  # one character: a prefix of its gram


def test_latin_words_written_inside_chinese_are_found(owner):
    chat = make_chat(owner, [("user", "我们决定下周把Kafka部署到生产环境")], title="部署")
    english = make_chat(owner, [("user", "kafka lag is fine today")], start=30)
    assert ids(search(owner, "kafka 部署")) == [chat.id]
    assert set(ids(search(owner, "kafka OR 部署"))) == {chat.id, english.id}
    assert ids(search(owner, "kafka OR 部署"))[0] == chat.id  # both words


def test_a_cjk_title_lifts_its_conversation(owner):
    titled = make_chat(owner, [("user", "酒店已经预订好了")], title="Granada旅行")
    other = make_chat(owner, [("user", "酒店已经预订好了")], title="工作", start=30)
    assert ids(search(owner, "旅行 OR 酒店")) == [titled.id, other.id]
    assert ids(search(owner, "granada 旅行")) == [titled.id]  # the title alone answers


def test_mixed_script_queries(owner):
    mixed = make_chat(owner, [("user", "nginx 配置文件 needs a reload after 部署")])
    make_chat(owner, [("user", "nginx only here")], start=30)
    assert ids(search(owner, "nginx 配置文件")) == [mixed.id]  # trigram, both terms
    assert ids(search(owner, "reload 部署")) == [mixed.id]  # LIKE, both terms


def test_like_path_escapes_wildcards(owner):
    percent = make_chat(owner, [("user", "disk at 100% 已满")])
    make_chat(owner, [("user", "disk at 1000 已满")], start=30)
    make_chat(owner, [("user", "xzy 已满")], start=60)
    assert ids(search(owner, "100% 已满")) == [percent.id]
    assert ids(search(owner, "x_y 已满")) == []  # '_' is not a wildcard


# --- scoping and filters -------------------------------------------------------------------


def test_another_users_unique_words_never_come_back(owner, outsider):
    make_chat(outsider, [("user", "zanzibarquux 秘密计划书 secret")], title="Theirs")
    make_chat(owner, [("user", "something else")])
    for query in ["zanzibarquux", "zanzibar*", "秘密计划书", "秘密", "anzibarqu", "secret"]:
        assert search(owner, query).conversations == [], query
    assert len(search(outsider, "zanzibarquux").conversations) == 1


def test_role_filter(owner):
    chat = make_chat(
        owner,
        [
            ("user", "please check uptime"),
            (
                "assistant",
                "",
                {
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "terminal", "arguments": '{"cmd": "uptime"}'},
                        }
                    ]
                },
            ),
            ("tool", "load average 0.42 flurbish", {"tool_call_id": "c"}),
        ],
    )
    assert ids(search(owner, "flurbish", roles=("tool",))) == [chat.id]
    assert ids(search(owner, "flurbish", roles=("user", "assistant"))) == []
    hits = search(owner, "uptime", roles=("assistant",)).conversations[0].hits
    assert [h.role for h in hits] == ["assistant"]  # found in the tool-call arguments


def test_unknown_role_is_refused():
    assert check_roles("user, Assistant") == ("user", "assistant")
    with pytest.raises(ServiceError) as exc:
        check_roles("user,admin")
    assert exc.value.code == "invalid_role"


def test_date_filter(owner):
    early = make_chat(owner, [("user", "quarterly report")], start=0)
    late = make_chat(owner, [("user", "quarterly report")], start=60 * 24 * 10)
    assert ids(search(owner, "quarterly", since=at(60 * 24))) == [late.id]
    assert ids(search(owner, "quarterly", until=at(60 * 24))) == [early.id]


def test_deleted_conversations_are_not_found(owner):
    make_chat(owner, [("user", "ghostword")], end_reason=Session.EndReason.DELETED, ended=5)
    assert search(owner, "ghostword").conversations == []


def test_system_messages_are_not_searched(owner):
    make_chat(owner, [("system", "you are hermes sysprompt")])
    assert search(owner, "sysprompt").conversations == []


# --- grouping and lineage --------------------------------------------------------------------


def test_hits_are_grouped_by_conversation_with_up_to_three_snippets(owner):
    busy = make_chat(owner, [("user", f"kubernetes note {i}") for i in range(6)], title="K8s")
    other = make_chat(owner, [("user", "kubernetes once")], start=100)
    result = search(owner, "kubernetes")
    assert set(ids(result)) == {busy.id, other.id}
    by_id = {c.session_id: c for c in result.conversations}
    assert len(by_id[busy.id].hits) == 3
    assert by_id[busy.id].hit_count == 6
    assert by_id[busy.id].title == "K8s"


def test_a_compression_chain_is_one_result_shown_at_its_tip(owner):
    root = make_chat(owner, [("user", "planning the migration to postgres")], title="Migration")
    tip = compress(root, owner, [("user", "the migration to postgres is done")])
    result = search(owner, "migration postgres")
    (conv,) = result.conversations
    assert conv.session_id == tip.id
    assert conv.root_id == root.id
    assert conv.link == f"/chat/{tip.id}/"
    assert conv.title == "Migration"
    assert conv.started_at == root.started_at
    assert conv.hit_count == 2
    assert conv.last_message_id == Message.objects.filter(session=tip).latest("id").id


def test_the_current_conversations_lineage_is_excluded(owner):
    root = make_chat(owner, [("user", "alpaca wool supplier")])
    current = compress(root, owner, [("user", "alpaca wool again")])
    child = make_chat(owner, [("user", "alpaca delegated")], parent=current, start=500)
    other = make_chat(owner, [("user", "alpaca farm visit")], start=1000)
    assert ids(search(owner, "alpaca", exclude_lineage_of=current.id)) == [other.id]
    assert set(ids(search(owner, "alpaca"))) == {current.id, child.id, other.id}


def test_someone_elses_session_id_excludes_nothing(owner, outsider):
    mine = make_chat(owner, [("user", "llama")])
    theirs = make_chat(outsider, [("user", "llama")])
    assert ids(search(owner, "llama", exclude_lineage_of=theirs.id)) == [mine.id]


def test_limit_caps_conversations(owner):
    for i in range(6):
        make_chat(owner, [("user", f"walrus {i}")], start=i * 10)
    assert len(search(owner, "walrus", limit=3).conversations) == 3


def test_find_hits_scopes_inside_the_sql(owner, outsider):
    # Many of the outsider's hits must not crowd the owner's out of the row limit.
    for i in range(30):
        make_chat(outsider, [("user", "narwhal " * 5)], start=i)
    mine = make_chat(owner, [("user", "narwhal once")])
    page = find_hits(owner_id=owner.pk, query=parse_query("narwhal"), limit=5)
    assert [h.session_id for h in page.hits] == [mine.id]


def test_messages_carried_into_a_continuation_are_found_once(owner):
    root = make_chat(owner, [("user", "the pangolin budget"), ("assistant", "noted")])
    tip = compress(
        root,
        owner,
        [("user", "the pangolin budget", {"kind": "carried"}), ("user", "pangolin again")],
    )
    (conv,) = search(owner, "pangolin").conversations
    assert conv.session_id == tip.id
    assert conv.hit_count == 2
    assert sorted(h.snippet.text for h in conv.hits) == ["pangolin again", "the pangolin budget"]


def _hit(mid, sid, score):
    from sessions_app.search.hits import Hit

    return Hit(message_id=mid, session_id=sid, role="user", timestamp=at(0), score=score)


def test_conversations_that_keep_returning_to_the_topic_rank_higher():
    from sessions_app.search.service import group_hits

    hits = [
        _hit(1, "lucky", 5.0),
        _hit(2, "steady", 3.0),
        _hit(3, "steady", 2.5),
        _hit(4, "steady", 2.0),
        _hit(5, "other", 1.0),
        _hit(6, "steady", 9.0),
    ]
    groups = group_hits(hits, roots={}, limit=2)
    assert list(groups) == ["steady", "lucky"]
    assert [h.message_id for h in groups["steady"]] == [2, 3, 4, 6]


def test_unranked_hits_group_by_count_then_first_appearance():
    from sessions_app.search.service import group_hits

    hits = [_hit(1, "a", 0), _hit(2, "b", 0), _hit(3, "b", 0), _hit(4, "c", 0)]
    assert list(group_hits(hits, roots={"c": "a"}, limit=5)) == ["a", "b"]


def test_sqlite_ranks_only_the_newest_matches_of_a_very_common_query(owner, outsider, monkeypatch):
    from django.db import connection

    from sessions_app.search import backends

    if connection.vendor != "sqlite":
        pytest.skip("the rank window is how SQLite keeps common queries fast")
    monkeypatch.setattr(backends, "RANK_WINDOW", 2)
    monkeypatch.setattr(backends, "RANK_WINDOW_GROWTH", 8)
    oldest = make_chat(owner, [("user", "heron heron heron heron")], start=0)
    weaker = make_chat(
        owner, [("user", f"a heron among many other words, number {i}") for i in range(20)]
    )
    for i in range(5):  # the newest matches are someone else's: the window grows past them
        make_chat(outsider, [("user", "heron")], start=30 + i)
    page = find_hits(owner_id=owner.pk, query=parse_query("heron"), limit=3)
    assert len(page.hits) == 3  # from the 16 newest matches: 11 of the owner's
    assert {h.session_id for h in page.hits} == {weaker.id}
    monkeypatch.setattr(backends, "RANK_WINDOW", 5000)
    page = find_hits(owner_id=owner.pk, query=parse_query("heron"), limit=3)
    assert page.hits[0].session_id == oldest.id  # the best match, once it is ranked
    page = find_hits(owner_id=outsider.pk, query=parse_query("heron"), limit=50)
    assert len(page.hits) == 5  # never another user's


def test_postgresql_ranks_a_recent_slice_of_a_very_common_query(owner, monkeypatch):
    from django.db import connection

    from sessions_app.search import sql

    if connection.vendor != "postgresql":
        pytest.skip("the recent slice is how PostgreSQL keeps common queries fast")
    # The older messages rank higher; only the window makes the newer ones come back.
    chat = make_chat(
        owner,
        [("user", "heron heron heron heron")] * 20
        + [("user", f"a heron among many other words, number {i}") for i in range(10)],
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_message")
    monkeypatch.setattr(sql, "PG_FULL_RANK", 1)
    monkeypatch.setattr(sql, "PG_RANK_WINDOW", 10)
    newest = Message.objects.filter(session=chat).order_by("-id").values_list("id", flat=True)
    page = find_hits(owner_id=owner.pk, query=parse_query("heron"), limit=5)
    assert len(page.hits) == 5
    assert {h.message_id for h in page.hits} <= set(newest[:12])  # the slice is estimated
    # Too few of the owner's hits in the slice: the whole index is ranked after all.
    page = find_hits(owner_id=owner.pk, query=parse_query("heron"), limit=50)
    assert len(page.hits) == 30


def test_a_conversation_deleted_while_the_search_looks_is_left_out(owner, monkeypatch):
    gone = make_chat(owner, [("user", "the vanishing kettle")])
    chains = service.compression_chains

    def deleted_meanwhile(roots, *, owner_id):
        Session.objects.filter(pk=gone.pk).delete()
        return chains(roots, owner_id=owner_id)

    monkeypatch.setattr(service, "compression_chains", deleted_meanwhile)
    result = search(owner, "kettle")
    assert result.conversations == []
