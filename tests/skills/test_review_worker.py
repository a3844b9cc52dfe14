"""The background review in a real Celery worker process (Redis/Valkey broker) against the
scripted model: it creates a skill, patches one, decides there is nothing to save, and is
denied tools outside its list. Notices reach the user's open websocket."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections
from django.test import Client

from hermes_site.asgi import application
from sessions_app.agent.tools import registry
from sessions_app.models import Message
from skills_app import services
from skills_app.models import ReviewRun, Skill
from tests.conftest import wait_for

from .conftest import make_conversation, skill_md

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://127.0.0.1:8000")
HOST = (b"host", b"127.0.0.1:8000")


def cookie(user) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def queue_run(session) -> ReviewRun:
    last = Message.objects.filter(session=session).latest("id").id
    return ReviewRun.objects.create(session=session, last_message_id=last, kind="skill")


def finished(run: ReviewRun) -> ReviewRun:
    return wait_for(
        lambda: ReviewRun.objects.filter(pk=run.pk, status__in=["done", "failed"]).first(),
        timeout=30,
        what="the review to finish",
    )


def review_with_socket(worker, run: ReviewRun, user, *, expect_notice: bool):
    """Send the review to the worker while the user has the app open; return what the
    socket received (the notice, or None when nothing arrived)."""
    headers = [ORIGIN, HOST, cookie(user)]

    async def scenario():
        socket = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        connected, _ = await socket.connect(timeout=15)
        assert connected
        try:
            await asyncio.to_thread(worker.send, "skills_app.review_session", run.pk)
            if expect_notice:
                return await socket.receive_json_from(timeout=30)
            await sync_to_async(finished)(run)
            assert await socket.receive_nothing(timeout=0.5)
            return None
        finally:
            await socket.disconnect()
            # The consumer and the polling ran on asgiref's shared sync thread; close its
            # connection or PostgreSQL cannot drop the test database afterwards.
            await sync_to_async(connections.close_all)()

    return asyncio.run(scenario())


def test_worker_review_creates_a_skill_and_tells_the_open_tab(
    owner, outsider, scripted, redis_channel_layer, scripted_worker
):
    session = make_conversation(owner, turns=3)
    transcript = list(Message.objects.filter(session=session).values_list("id", "content"))
    run = queue_run(session)
    scripted.enqueue(
        tool_calls=[
            {
                "name": "skill_manage",
                "arguments": {
                    "action": "create",
                    "name": "k8s-storage",
                    "category": "devops",
                    "content": skill_md(
                        "k8s-storage",
                        description="Fix PersistentVolumeClaims stuck in Pending.",
                        body="# Steps\n\n1. kubectl describe pvc.\n2. Check the StorageClass.",
                    ),
                },
            }
        ]
    )
    scripted.enqueue(reply="Created k8s-storage.")

    event = review_with_socket(scripted_worker, run, owner, expect_notice=True)

    assert event == {
        "type": "notice",
        "session": session.pk,
        "kind": "skill_created",
        "text": "Skill created: k8s-storage — /skills/k8s-storage/",
    }
    run = finished(run)
    assert (run.status, run.outcome) == ("done", "Created k8s-storage.")
    skill = Skill.objects.get(owner=owner, name="k8s-storage")
    assert skill.category == "devops"
    revision = skill.revisions.get()
    assert (revision.author, revision.source_session_id) == ("review", session.pk)
    # The reviewer saw the conversation, then its prompt; none of that was stored.
    first = scripted.requests[0]
    assert "PVC stuck in Pending" in json.dumps(first["messages"])
    assert first["messages"][-1]["content"].startswith("Review the conversation above")
    assert list(Message.objects.filter(session=session).values_list("id", "content")) == transcript
    assert not Skill.objects.filter(owner=outsider).exists()


def test_worker_review_patches_an_existing_skill(owner, scripted, scripted_worker):
    services.skill_create(
        user=owner,
        name="k8s-storage",
        content=skill_md("k8s-storage", body="# Steps\n\n1. Restart the pod."),
    )
    session = make_conversation(owner)
    run = queue_run(session)
    scripted.enqueue(tool_calls=[{"name": "skill_view", "arguments": {"name": "k8s-storage"}}])
    scripted.enqueue(
        tool_calls=[
            {
                "name": "skill_manage",
                "arguments": {
                    "action": "patch",
                    "name": "k8s-storage",
                    "old_string": "1. Restart the pod.",
                    "new_string": "1. Check the StorageClass has a provisioner.",
                },
            }
        ]
    )
    scripted.enqueue(reply="Patched k8s-storage.")

    scripted_worker.send("skills_app.review_session", run.pk)

    assert finished(run).status == "done"
    skill = Skill.objects.get(owner=owner, name="k8s-storage")
    assert "provisioner" in skill.content and "Restart the pod" not in skill.content
    latest = skill.revisions.first()
    assert (latest.number, latest.action, latest.author) == (2, "patch", "review")
    assert latest.source_session_id == session.pk
    assert skill.revisions.get(number=1).content.count("Restart the pod") == 1


def test_worker_review_with_nothing_to_save_changes_nothing(
    owner, scripted, redis_channel_layer, scripted_worker
):
    services.skill_create(user=owner, name="k8s-storage", content=skill_md("k8s-storage"))
    session = make_conversation(owner)
    run = queue_run(session)
    scripted.enqueue(reply="Nothing to save.")

    assert review_with_socket(scripted_worker, run, owner, expect_notice=False) is None

    run.refresh_from_db()
    assert (run.status, run.outcome, run.actions) == ("done", "Nothing to save.", [])
    assert Skill.objects.get(owner=owner).revisions.count() == 1


def test_worker_review_is_denied_tools_outside_its_list(owner, scripted, scripted_worker):
    session = make_conversation(owner)
    before = Message.objects.count()
    run = queue_run(session)
    # A tool the app really has (but the reviewer may not use), and one that does not exist.
    real_tool = next(
        name
        for name in registry.names()
        if name not in {"memory", "skills_list", "skill_view", "skill_manage"}
    )
    scripted.enqueue(
        tool_calls=[
            {"name": real_tool, "arguments": {"query": "secrets"}},
            {"name": "terminal", "arguments": {"command": "cat ~/.ssh/id_rsa"}},
        ]
    )
    scripted.enqueue(reply="Nothing to save.")

    scripted_worker.send("skills_app.review_session", run.pk)

    run = finished(run)
    assert run.status == "done"
    assert [(a["name"], a["ok"]) for a in run.actions] == [(real_tool, False), ("terminal", False)]
    tool_messages = [m for m in scripted.requests[1]["messages"] if m["role"] == "tool"][-2:]
    for message in tool_messages:
        payload = json.loads(message["content"])
        assert payload["code"] == "tool_not_available"
    offered = {t["function"]["name"] for t in scripted.requests[0]["tools"]}
    assert real_tool not in offered and "terminal" not in offered
    assert Message.objects.count() == before
    assert not Skill.objects.exists()
