"""Background review in-process: when it triggers, what the reviewer sees, what it may do,
and that it runs once per turn. (tests/skills/test_review_worker.py runs it in a real
Celery worker.)"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from accounts.models import Profile
from core.realtime import user_group
from devtools.scripted_llm import Fault
from sessions_app.models import Message
from skills_app.models import ReviewRun, SessionSkillState, Skill
from skills_app.services import review
from skills_app.services.review import review_after_turn, review_messages, review_run_execute

from .conftest import make_conversation, skill_md

pytestmark = pytest.mark.django_db


def turn(session, iterations, capture):
    with capture(execute=True):
        review_after_turn(session_id=session.pk, tool_iterations=iterations)


def state(session) -> SessionSkillState:
    return SessionSkillState.objects.get(session=session)


def test_busy_turns_queue_a_skill_review_that_runs_after_commit(
    owner, scripted, django_capture_on_commit_callbacks
):
    session = make_conversation(owner)
    scripted.enqueue(reply="Nothing to save.")
    turn(session, 4, django_capture_on_commit_callbacks)
    turn(session, 5, django_capture_on_commit_callbacks)
    assert not ReviewRun.objects.exists()
    assert state(session).iterations_since_skill_review == 9

    turn(session, 1, django_capture_on_commit_callbacks)

    run = ReviewRun.objects.get()
    assert (run.kind, run.status, run.outcome) == ("skill", "done", "Nothing to save.")
    assert run.last_message_id == Message.objects.filter(session=session).latest("id").id
    assert state(session).iterations_since_skill_review == 0
    assert state(session).turns_since_memory_review == 3
    prompt = scripted.requests[0]["messages"][-1]["content"]
    assert prompt.startswith(review.SKILL_PROMPT_START)
    assert prompt.endswith(review.TOOLS_SUFFIX)


def test_every_tenth_user_turn_queues_a_memory_review(
    owner, scripted, settings, django_capture_on_commit_callbacks
):
    settings.HERMES_MEMORY_REVIEW_TURNS = 3
    session = make_conversation(owner)
    scripted.enqueue(reply="Nothing to save.")
    for _ in range(3):
        turn(session, 0, django_capture_on_commit_callbacks)
    run = ReviewRun.objects.get()
    assert run.kind == "memory"
    assert scripted.requests[0]["messages"][-1]["content"].startswith(review.MEMORY_PROMPT_START)
    tools = {t["function"]["name"] for t in scripted.requests[0]["tools"]}
    assert tools == {"memory", "skills_list", "skill_view", "skill_manage"}


def test_both_due_gives_the_combined_prompt(
    owner, scripted, settings, django_capture_on_commit_callbacks
):
    settings.HERMES_MEMORY_REVIEW_TURNS = 1
    session = make_conversation(owner)
    scripted.enqueue(reply="Nothing to save.")
    turn(session, 12, django_capture_on_commit_callbacks)
    assert ReviewRun.objects.get().kind == "combined"
    prompt = scripted.requests[0]["messages"][-1]["content"]
    assert review.SKILL_PROMPT_START in prompt and review.MEMORY_PROMPT_START in prompt


def test_memory_reviews_respect_the_users_memory_switch(
    owner, scripted, settings, django_capture_on_commit_callbacks
):
    settings.HERMES_MEMORY_REVIEW_TURNS = 1
    Profile.objects.create(user=owner, memory_enabled=False)
    session = make_conversation(owner)
    turn(session, 0, django_capture_on_commit_callbacks)
    assert not ReviewRun.objects.exists()
    scripted.enqueue(reply="Nothing to save.")
    turn(session, 10, django_capture_on_commit_callbacks)
    assert ReviewRun.objects.get().kind == "skill"
    tools = {t["function"]["name"] for t in scripted.requests[0]["tools"]}
    assert "memory" not in tools


def test_reviews_can_be_switched_off(owner, settings, django_capture_on_commit_callbacks):
    settings.HERMES_REVIEW_ENABLED = False
    session = make_conversation(owner)
    turn(session, 50, django_capture_on_commit_callbacks)
    assert not ReviewRun.objects.exists() and not SessionSkillState.objects.exists()


def test_a_turn_is_reviewed_once_however_often_the_task_runs(
    owner, scripted, django_capture_on_commit_callbacks
):
    session = make_conversation(owner)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        review_after_turn(session_id=session.pk, tool_iterations=10)
        review_after_turn(session_id=session.pk, tool_iterations=10)  # same last message
    assert len(callbacks) == 1
    run = ReviewRun.objects.get()
    assert state(session).iterations_since_skill_review == 10  # the second was not consumed
    scripted.enqueue(reply="Nothing to save.")
    assert review_run_execute(run_id=run.pk) == "done"
    assert review_run_execute(run_id=run.pk) == "skipped"
    assert len(scripted.requests) == 1


def test_a_model_failure_marks_the_run_failed_and_changes_nothing(owner, scripted):
    session = make_conversation(owner)
    run = ReviewRun.objects.create(session=session, last_message_id=1, kind="skill")
    scripted.set_fault(Fault.server_error(500))
    assert review_run_execute(run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "llm_server_error" in run.error
    assert not Skill.objects.exists()


def test_a_review_past_its_time_limit_is_failed_and_its_lease_freed(owner, scripted, settings):
    settings.HERMES_REVIEW_TIME_LIMIT = 1
    session = make_conversation(owner)
    run = ReviewRun.objects.create(session=session, last_message_id=1, kind="skill")
    scripted.set_fault(Fault(latency=3))
    assert review_run_execute(run_id=run.pk) == "failed"
    run.refresh_from_db()
    assert (run.status, run.error) == ("failed", "Stopped after the 1s time limit.")
    assert (run.lease_owner, run.lease_expires_at) == ("", None)


def test_reviewer_sees_the_whole_conversation_with_the_frozen_prompt(owner, scripted):
    from sessions_app.models import SystemPrompt

    session = make_conversation(owner, turns=2)
    prompt = SystemPrompt.objects.create(hash=SystemPrompt.digest("sys"), prompt="You are Hermes.")
    session.system_prompt = prompt
    session.save()
    messages = review_messages(session=session, kind="skill")
    assert messages[0] == {"role": "system", "content": "You are Hermes."}
    assert [m["role"] for m in messages[1:-1]] == ["user", "assistant", "tool", "assistant"] * 2
    assert messages[2]["tool_calls"][0]["function"]["name"] == "session_search"
    assert messages[-1]["content"] == review.review_prompt("skill")


def test_a_routed_model_gets_the_last_24_messages_and_a_digest(owner, scripted, settings):
    settings.HERMES_SUMMARY_MODEL = "scripted-small"
    session = make_conversation(owner, turns=10)  # 40 messages
    Message.objects.filter(session=session, role="user").update(content="U" * 500)
    messages = review_messages(session=session, kind="skill")
    digest = messages[1]["content"]
    assert digest.startswith("[Digest of the earlier part")
    lines = digest.splitlines()[1:]
    assert lines[0] == "USER: " + "U" * 300
    assert lines[1] == "ASSISTANT: [called session_search]"
    assert lines[2].startswith("ASSISTANT: The StorageClass") and len(lines[2]) <= 211
    recent = messages[2:-1]
    assert len(recent) == 24 and recent[0]["role"] == "user"


def test_review_prompts_and_their_replies_never_replay(owner, scripted):
    session = make_conversation(owner)
    Message.objects.create(session=session, role="user", content=review.review_prompt("skill"))
    Message.objects.create(
        session=session, role="assistant", status="complete", content="Nothing to save."
    )
    Message.objects.create(session=session, role="user", content="Thanks!")
    contents = [m.get("content") for m in review_messages(session=session, kind="skill")[1:-1]]
    assert "Nothing to save." not in contents
    assert "Thanks!" in contents
    assert not any(str(c).startswith(review.SKILL_PROMPT_START) for c in contents)


def test_an_unanswered_tool_call_is_dropped_from_the_replay(owner):
    session = make_conversation(owner)
    Message.objects.create(session=session, role="user", content="again")
    Message.objects.create(
        session=session,
        role="assistant",
        status="interrupted",
        content="",
        tool_calls=[{"id": "lost", "type": "function", "function": {"name": "x", "arguments": ""}}],
    )
    replay = review_messages(session=session, kind="skill")[1:-1]
    assert replay[-1] == {"role": "user", "content": "again"}


def listen(user):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(user.pk), channel)
    return layer, channel


def received(listener) -> list[dict]:
    layer, channel = listener

    async def next_event():
        try:
            return await asyncio.wait_for(layer.receive(channel), 0.5)
        except TimeoutError:
            return None

    events = []
    while (message := async_to_sync(next_event)()) is not None:
        events.append(message["event"])
    return events


def test_review_creates_skill_records_revision_and_notices_once(owner, scripted):
    session = make_conversation(owner)
    listener = listen(owner)
    run = ReviewRun.objects.create(session=session, last_message_id=1, kind="skill")
    scripted.enqueue(
        tool_calls=[
            {
                "name": "skill_manage",
                "arguments": {
                    "action": "create",
                    "name": "k8s-storage",
                    "content": skill_md("k8s-storage"),
                },
            }
        ]
    )
    scripted.enqueue(
        tool_calls=[
            {
                "name": "skill_manage",
                "arguments": {
                    "action": "patch",
                    "name": "k8s-storage",
                    "old_string": "Do the thing.",
                    "new_string": "Set a provisioner.",
                },
            }
        ]
    )
    scripted.enqueue(reply="Saved k8s-storage.")
    assert review_run_execute(run_id=run.pk) == "done"
    skill = Skill.objects.get(owner=owner)
    assert [(r.author, r.source_session_id) for r in skill.revisions.all()] == [
        ("review", session.pk),
        ("review", session.pk),
    ]
    run.refresh_from_db()
    assert [a["ok"] for a in run.actions] == [True, True]
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    # Created and then patched in one run: one notice, "created", linking to the skill.
    assert received(listener) == [
        {
            "type": "notice",
            "session": session.pk,
            "kind": "skill_created",
            "text": "Skill created: k8s-storage — /skills/k8s-storage/",
        }
    ]


def test_a_memory_review_saves_a_fact_and_says_memory_updated(owner, scripted):
    session = make_conversation(owner)
    run = ReviewRun.objects.create(session=session, last_message_id=1, kind="memory")
    listener = listen(owner)
    scripted.enqueue(
        tool_calls=[
            {
                "name": "memory",
                "arguments": {
                    "action": "add",
                    "target": "user",
                    "content": "User runs Kubernetes on bare metal.",
                },
            }
        ]
    )
    scripted.enqueue(reply="Saved one fact.")
    assert review_run_execute(run_id=run.pk) == "done"
    run.refresh_from_db()
    assert run.actions[0]["name"] == "memory" and run.actions[0]["ok"], run.actions
    [event] = received(listener)
    assert event["kind"] == "memory_saved"
    assert event["text"].endswith(" — /memory/")
    assert Message.objects.filter(session=session, content__contains="bare metal").count() == 0
