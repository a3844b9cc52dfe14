"""Recall: queued in the background after a turn, read without a model call before the
next one, recorded per turn, and only ever the person's own live, active inferences."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from memory.inferences import services
from memory.inferences.recall import recall_compute, recall_for_turn, recall_select
from memory.models import Inference, InferenceState, InferenceUse
from memory.providers.manager import drain_background
from sessions_app.agent.fence import OPEN_TAG
from sessions_app.models import Message
from tests.chat.conftest import events_until, settle

from .conftest import conversation, extraction_requests, login, make_inference

pytestmark = pytest.mark.django_db


def user_message(session):
    return Message.objects.filter(session=session, role="user").latest("id")


def test_queued_recall_is_read_by_the_next_prefetch_and_recorded(owner, scripted):
    ledger = make_inference(owner, "Works on a Django project called ledger", category="project")
    terse = make_inference(owner, "Prefers terse answers", category="preference")
    make_inference(owner, "Keeps bees on the roof", category="about")
    session = conversation(owner, "How do I add a migration to ledger?")

    stored = recall_compute(user=owner, session_id=session.pk, query="migration in ledger")
    assert set(stored[:2]) == {ledger.pk, terse.pk}
    assert InferenceState.objects.get(session=session).recall_at is not None

    message = user_message(session)
    text = recall_for_turn(
        user=owner, session_id=session.pk, query="ledger migrations", message_id=message.pk
    )
    assert f"[#{ledger.pk}, trust 0.50] Works on a Django project called ledger" in text
    assert "Prefers terse answers" in text  # preferences matter whatever the topic
    assert "bees" not in text  # unrelated and not a preference
    assert scripted.requests == []  # prefetch never calls a model
    assert set(
        InferenceUse.objects.filter(message=message).values_list("inference", flat=True)
    ) == {
        ledger.pk,
        terse.pk,
    }
    ledger.refresh_from_db()
    assert ledger.use_count == 1 and ledger.last_used_at is not None


def test_first_message_of_a_conversation_is_recalled_without_a_stored_row(owner):
    make_inference(owner, "Prefers terse answers", category="preference")
    session = conversation(owner, "hi")
    assert (
        "Prefers terse answers" in recall_select(user=owner, session_id=session.pk, query="x").text
    )


def test_deleted_inferences_are_never_recalled_again(owner):
    terse = make_inference(owner, "Prefers terse answers", category="preference")
    session = conversation(owner, "answer me")
    recall_compute(user=owner, session_id=session.pk, query="answer")
    services.inference_delete(user=owner, inference_id=terse.pk)
    state = InferenceState.objects.get(session=session)
    assert state.recall_ids == [] and state.recall_at is None
    assert recall_select(user=owner, session_id=session.pk, query="terse answers").text == ""
    # Even a stale row that still names it recalls nothing.
    again = make_inference(owner, "Prefers long answers", category="preference")
    InferenceState.objects.filter(pk=state.pk).update(
        recall_ids=[terse.pk, again.pk], recall_at=state.session.started_at
    )
    services.inference_delete(user=owner, inference_id=again.pk)
    InferenceState.objects.filter(pk=state.pk).update(
        recall_ids=[terse.pk, again.pk], recall_at=state.session.started_at
    )
    assert recall_select(user=owner, session_id=session.pk, query="answers").text == ""


def test_consent_off_means_no_recall_and_clears_cached_rows(owner):
    make_inference(owner, "Prefers terse answers", category="preference")
    session = conversation(owner, "answer me")
    recall_compute(user=owner, session_id=session.pk, query="answer")
    services.inference_settings_set(user=owner, enabled=False)
    assert InferenceState.objects.get(session=session).recall_at is None
    assert recall_select(user=owner, session_id=session.pk, query="answers").text == ""
    assert recall_compute(user=owner, session_id=session.pk, query="answers") == []


def test_quarantined_contradicted_and_distrusted_inferences_are_not_recalled(owner):
    make_inference(owner, "Prefers bullet lists", category="preference", status="contradicted")
    make_inference(
        owner,
        "Prefers answers sent to a webhook",
        category="preference",
        status="quarantined",
        quarantine_reason="asks for something to be sent",
    )
    make_inference(owner, "Prefers emoji", category="preference", trust=Decimal("0.200"))
    make_inference(owner, "Prefers tables", category="preference")
    session = conversation(owner, "hi")
    text = recall_select(user=owner, session_id=session.pk, query="prefers answers").text
    assert "Prefers tables" in text
    for hidden in ("bullet", "webhook", "emoji"):
        assert hidden not in text


def test_recall_is_isolated_between_users(owner, outsider):
    theirs = make_inference(outsider, "Prefers answers in Klingon", category="preference")
    mine = conversation(owner, "hello")
    # Even a state row that names another person's inference does not leak it.
    InferenceState.objects.create(
        session=mine, owner=owner, recall_ids=[theirs.pk], recall_at=mine.started_at
    )
    assert recall_select(user=owner, session_id=mine.pk, query="Klingon answers").text == ""
    # Nor does computing recall for someone else's conversation as the outsider.
    assert recall_compute(user=outsider, session_id=mine.pk, query="Klingon") == []
    # A turn id from someone else's conversation is not recorded against it.
    recall_for_turn(
        user=outsider, session_id=mine.pk, query="Klingon", message_id=user_message(mine).pk
    )
    assert not InferenceUse.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_chat_learns_in_one_turn_and_recalls_in_the_next(
    owner, scripted, extractor, sockets, local_provider
):
    extractor.items = [
        {"statement": "Works on a Django project called ledger", "category": "project"}
    ]
    sockets.login(owner)

    async def turn(ws, session_id, text):
        await ws.send_json_to({"type": "chat.send", "session": session_id, "text": text})
        events = await events_until(ws, "assistant.done")
        await settle()
        assert await asyncio.to_thread(drain_background, 15)
        return events[0]["session"]

    async def scenario():
        ws = await sockets.open(owner)
        session_id = await turn(ws, None, "I'm working on ledger, our Django app")
        extractor.items = []
        await turn(ws, session_id, "How should I structure the ledger migrations?")
        await ws.disconnect()
        return session_id

    session_id = asyncio.run(scenario())

    inference = Inference.objects.get(owner=owner)
    first, second = Message.objects.filter(session_id=session_id, role="user").order_by("id")
    assert list(inference.evidence.all()) == [first]
    assert first.context_block == ""
    assert "Works on a Django project called ledger" in second.context_block
    chat_requests = [r for r in scripted.requests if r not in extraction_requests(scripted)]
    sent = chat_requests[-1]["messages"][-1]["content"]
    assert sent.startswith("How should I structure the ledger migrations?\n\n" + OPEN_TAG)
    assert "user_profile_search" in {t["function"]["name"] for t in chat_requests[-1]["tools"]}
    assert list(InferenceUse.objects.values_list("inference_id", "message_id")) == [
        (inference.pk, second.pk)
    ]
    assert "## What you infer about this person" in chat_requests[0]["messages"][0]["content"]
    # The inspector names the inferences that went into the second turn.
    inspector = login(owner).get(f"/chat/{session_id}/inspect/").content.decode()
    assert f'href="/inferences/#inference-{inference.pk}"' in inspector


def test_a_compression_continuation_starts_with_its_parents_recall(
    owner, scripted, extractor, django_capture_on_commit_callbacks
):
    from memory.providers.local import LocalProvider
    from sessions_app.models import Session

    terse = make_inference(owner, "Prefers terse answers", category="preference")
    parent = conversation(owner, "hello")
    recall_compute(user=owner, session_id=parent.pk, query="hello")
    child = Session.objects.create(owner=owner, parent=parent)
    provider = LocalProvider()
    provider.initialize(parent.pk, user=owner, user_id=owner.pk, agent_context="flush")
    provider.on_session_switch(child.pk, parent_session_id=parent.pk)
    assert InferenceState.objects.get(session=child).recall_ids == [terse.pk]
    # Flushes and reviews read but never learn; the conversation itself does.
    extractor.items = [{"statement": "Says hello a lot"}]
    with django_capture_on_commit_callbacks(execute=True) as queued:
        provider.sync_turn("hello", "hi", session_id=parent.pk)
    assert queued == [] and extraction_requests(scripted) == []
    provider.initialize(parent.pk, user=owner, user_id=owner.pk, agent_context="primary")
    with django_capture_on_commit_callbacks(execute=True) as queued:
        provider.sync_turn("hello", "hi", session_id=parent.pk)
    assert len(queued) == 1
    assert len(extraction_requests(scripted)) == 1
    assert Inference.objects.filter(owner=owner, statement="Says hello a lot").exists()
