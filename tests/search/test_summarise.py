"""Query-focused summaries: prompt, cache, bounded concurrency, timeout and fallback.

The model is the scripted OpenAI-compatible server over real HTTP. Tests that need the
summaries to run in parallel threads use `transactional_db` (other connections must see
the rows); one test runs the task in a real Celery worker process.
"""

from __future__ import annotations

import threading
import time

import pytest

from devtools.scripted_llm import Fault
from hermes_site.celery import app as celery_app
from sessions_app.agent.tools import ToolContext, registry
from sessions_app.models import Message, SearchSummary
from sessions_app.search import summarise
from sessions_app.search.service import search_conversations, search_summaries_wait
from tests.conftest import wait_for

from .conftest import compress, make_chat, summary_requests


def run_tool(user, args, session_id=None):
    ctx = ToolContext(user=user, session_id=session_id)
    return registry.dispatch(ctx, "session_search", args, allowed={"session_search"})


def deploy_chats(owner, n=1):
    return [
        make_chat(
            owner,
            [
                ("user", f"deploy plan {i}: use blue-green on server s{i}"),
                ("assistant", f"Decided: blue-green deploy for s{i}, rollback via tag v{i}."),
            ],
            title=f"Deploy {i}",
            start=i * 100,
        )
        for i in range(n)
    ]


@pytest.mark.django_db
def test_tool_returns_a_focused_summary_with_title_date_and_link(owner, scripted):
    (chat,) = deploy_chats(owner)
    scripted.add_rule("Search topic:", reply="They chose blue-green deploys; rollback by tag.")
    result = run_tool(owner, {"query": "deploy rollback"})
    assert result.ok
    (item,) = result.payload["results"]
    assert item["summary"] == "They chose blue-green deploys; rollback by tag."
    assert item["title"] == "Deploy 0"
    assert item["link"] == f"/chat/{chat.id}/"
    assert item["when"].startswith("2025-03-01")
    assert "snippets" not in item

    (request,) = summary_requests(scripted)
    assert request["temperature"] == 0.1
    prompt = request["messages"][-1]["content"]
    for part in (
        "Search topic: deploy rollback",
        "Session source: web",
        "Session date: 2025-03-01",
        "CONVERSATION TRANSCRIPT:",
        "[USER]: deploy plan 0",
        "[ASSISTANT]: Decided: blue-green",
    ):
        assert part in prompt
    assert "not instructions" in request["messages"][0]["content"]


@pytest.mark.django_db
def test_identical_requests_are_cached_until_the_conversation_changes(owner, scripted):
    (chat,) = deploy_chats(owner)
    scripted.add_rule("Search topic:", reply="first summary")
    assert run_tool(owner, {"query": "deploy"}).payload["results"][0]["summary"] == "first summary"
    # Same query (modulo case and spacing), same conversation, same last message: no call.
    again = run_tool(owner, {"query": "  DEPLOY "}).payload["results"][0]
    assert again["summary"] == "first summary"
    assert len(summary_requests(scripted)) == 1
    assert SearchSummary.objects.count() == 1

    Message.objects.create(session=chat, role="user", content="one more deploy question")
    scripted.reset()
    scripted.add_rule("Search topic:", reply="second summary")
    assert run_tool(owner, {"query": "deploy"}).payload["results"][0]["summary"] == (
        "second summary"
    )
    assert len(summary_requests(scripted)) == 1


@pytest.mark.django_db
def test_summariser_failure_falls_back_to_snippets(owner, scripted):
    deploy_chats(owner, 2)
    scripted.set_fault(Fault.server_error(500))
    result = run_tool(owner, {"query": "blue-green"})
    assert result.ok
    assert len(result.payload["results"]) == 2
    for item in result.payload["results"]:
        assert item["summary"] is None
        assert item["summary_status"] == "failed"
        # One span on SQLite, one per word on PostgreSQL.
        assert any(">>>blue" in s["text"] for s in item["snippets"]), item
    assert "0 summarised" in result.summary
    assert set(SearchSummary.objects.values_list("status", flat=True)) == {"failed"}


@pytest.mark.django_db
def test_a_failed_summary_is_tried_again_next_time(owner, scripted):
    deploy_chats(owner)
    scripted.set_fault(Fault.server_error(503, times=1))
    scripted.add_rule("Search topic:", reply="recovered")
    assert run_tool(owner, {"query": "deploy"}).payload["results"][0]["summary"] is None
    assert run_tool(owner, {"query": "deploy"}).payload["results"][0]["summary"] == "recovered"


@pytest.mark.django_db
def test_an_empty_answer_counts_as_a_failure(owner, scripted):
    deploy_chats(owner)
    scripted.add_rule("Search topic:", reply="   ")
    item = run_tool(owner, {"query": "deploy"}).payload["results"][0]
    assert item["summary"] is None and item["summary_status"] == "failed"


@pytest.mark.django_db
def test_no_model_configured_means_snippets_and_no_requests(owner, no_llm):
    deploy_chats(owner)
    result = run_tool(owner, {"query": "deploy"})
    assert result.ok
    (item,) = result.payload["results"]
    assert item["summary_status"] == "unavailable"
    assert item["snippets"]
    assert not SearchSummary.objects.exists()


@pytest.mark.django_db
def test_transcript_covers_the_whole_compression_chain(owner, scripted):
    root = make_chat(owner, [("user", "the okapi project starts")], title="Okapi")
    compress(root, owner, [("user", "okapi project finished"), ("tool", "x" * 2000)])
    scripted.add_rule("Search topic:", reply="ok")
    run_tool(owner, {"query": "okapi"})
    prompt = summary_requests(scripted)[0]["messages"][-1]["content"]
    assert prompt.index("the okapi project starts") < prompt.index("okapi project finished")
    assert "[TOOL:terminal]: " + "x" * 250 + "\n...[truncated]...\n" in prompt


@pytest.mark.django_db
def test_long_transcripts_are_cut_to_the_window(owner, scripted, settings):
    settings.HERMES_SEARCH_TRANSCRIPT_CHARS = 2000
    filler = [("user", "filler text " * 40) for _ in range(20)]
    make_chat(owner, [*filler, ("user", "the capybara decision"), *filler])
    scripted.add_rule("Search topic:", reply="ok")
    run_tool(owner, {"query": "capybara"})
    prompt = summary_requests(scripted)[0]["messages"][-1]["content"]
    assert "...[earlier conversation truncated]..." in prompt
    assert "...[later conversation truncated]..." in prompt
    assert "the capybara decision" in prompt
    assert len(prompt) < 3000


# --- concurrency, timeout: real threads, so the rows must be committed -----------------------


@pytest.mark.django_db(transaction=True)
def test_concurrency_is_bounded(owner, scripted, settings):
    settings.HERMES_SEARCH_SUMMARY_CONCURRENCY = 2
    deploy_chats(owner, 4)
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def reply(body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        # Hold each call until a second one is in flight (or 3 s pass), so a pool of two
        # shows exactly two at once and an unbounded one would show more.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            with lock:
                if state["now"] >= 2:
                    break
            time.sleep(0.02)
        time.sleep(0.1)
        with lock:
            state["now"] -= 1
        return "summary"

    scripted.add_rule("Search topic:", reply=reply)
    result = run_tool(owner, {"query": "deploy", "limit": 4})
    assert [r["summary"] for r in result.payload["results"]] == ["summary"] * 4
    assert state["max"] == 2


@pytest.mark.django_db(transaction=True)
def test_limit_is_capped_at_five(owner, scripted):
    deploy_chats(owner, 7)
    scripted.add_rule("Search topic:", reply="s")
    assert len(run_tool(owner, {"query": "deploy", "limit": 50}).payload["results"]) == 5
    assert len(summary_requests(scripted)) == 5


@pytest.mark.django_db(transaction=True)
def test_slow_summaries_time_out_to_snippets_and_finish_in_the_background(
    owner, scripted, settings
):
    settings.HERMES_SEARCH_SUMMARY_TIMEOUT = 1.0
    fast, slow = deploy_chats(owner, 2)
    scripted.add_rule("deploy plan 1", reply="slow summary", fault=Fault(latency=2.5))
    scripted.add_rule("Search topic:", reply="fast summary")
    result = run_tool(owner, {"query": "deploy"})
    assert result.ok
    items = {i["session_id"]: i for i in result.payload["results"]}
    assert items[fast.id]["summary"] == "fast summary"
    assert items[slow.id]["summary"] is None
    assert items[slow.id]["summary_status"] == "timeout"
    assert items[slow.id]["snippets"]

    summarise.join_background()
    again = {i["session_id"]: i for i in run_tool(owner, {"query": "deploy"}).payload["results"]}
    assert again[slow.id]["summary"] == "slow summary"
    assert len(summary_requests(scripted)) == 2  # the second search used the cache


@pytest.mark.django_db(transaction=True)
def test_waiting_is_bounded_by_the_timeout_argument(owner, scripted):
    deploy_chats(owner, 1)
    scripted.add_rule("Search topic:", reply="late", fault=Fault(latency=2))
    result = search_conversations(owner=owner, query="deploy")
    search_summaries_wait(owner=owner, query="deploy", result=result, timeout=0.3)
    assert result.conversations[0].summary_status == "timeout"


# --- the real worker --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_summary_task_runs_in_a_real_worker(owner, scripted_worker, scripted):
    (chat,) = deploy_chats(owner)
    scripted.add_rule("Search topic:", reply="Worker-made summary.")
    last = Message.objects.filter(session=chat).latest("id").id
    row = summarise.summary_request(
        owner=owner, query="deploy", root_id=chat.id, last_message_id=last
    )
    scripted_worker.send("sessions_app.summarise_search_hit", row.id)
    wait_for(
        lambda: SearchSummary.objects.get(id=row.id).status == "done",
        timeout=60,
        what="the worker to write the summary",
    )
    row.refresh_from_db()
    assert row.summary == "Worker-made summary."
    assert row.attempts == 1
    (request,) = summary_requests(scripted)
    assert request["temperature"] == 0.1
    # Running it again is harmless: the row is already done, no second model call.
    scripted_worker.send("sessions_app.summarise_search_hit", row.id)
    time.sleep(1)
    assert len(summary_requests(scripted)) == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_tool_waits_for_summaries_written_by_the_worker(
    owner, scripted_worker, scripted, settings, monkeypatch
):
    """Not inline: the tool dispatches to the real worker and watches the cache rows."""
    settings.OPENAI_BASE_URL = scripted.base_url
    settings.OPENAI_API_KEY = "x"
    settings.HERMES_MODEL = "scripted"
    deploy_chats(owner, 2)
    scripted.add_rule("Search topic:", reply="from the worker")
    monkeypatch.setattr(
        summarise,
        "_dispatch",
        lambda summary_id: scripted_worker.send("sessions_app.summarise_search_hit", summary_id),
    )
    celery_app.conf.task_always_eager = False
    try:
        result = run_tool(owner, {"query": "deploy"})
    finally:
        celery_app.conf.task_always_eager = True
    assert [r["summary"] for r in result.payload["results"]] == ["from the worker"] * 2
