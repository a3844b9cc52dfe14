"""Fixtures for the privacy tests: one person's data in every table, each text carrying a
unique marker string, so "is it in the export / is it gone after erasure / does another
person ever see it" can be asked of every table at once."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from accounts.models import ApiToken, Membership, Profile, SignInIdentity
from memory.models import Source
from memory.services import Provenance, memory_add, memory_snapshot_freeze
from privacy.models import AdminContentAccess, ChatImportJob, ExportJob
from sessions_app.models import Message, SearchSummary, Session, SystemPrompt
from skills_app.models import ReviewRun, SessionSkillState
from skills_app.services import skill_create, skill_file_write


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def marker(tag: str, what: str) -> str:
    # Letters and digits only: one token for the FTS5 index, one word for grep.
    return f"mk{tag}{what}{secrets.token_hex(5)}"


@dataclass
class Seeded:
    user: Any
    markers: dict[str, str] = field(default_factory=dict)
    session: Session | None = None
    continuation: Session | None = None
    temporary: Session | None = None
    user_message: Message | None = None
    entry_id: int = 0
    skill_name: str = ""
    job: ExportJob | None = None
    token: ApiToken | None = None

    def all_markers(self) -> list[str]:
        return list(self.markers.values())


def seed(user, tag: str) -> Seeded:
    """Data of `user` in every registered table; every text field carries a marker."""
    m = {
        key: marker(tag, key)
        for key in (
            "instructions",
            "identity",
            "token",
            "title",
            "prompt",
            "user",
            "assistant",
            "recall",
            "reasoning",
            "toolargs",
            "toolresult",
            "summary",
            "carried",
            "temporary",
            "query",
            "searchsummary",
            "memory",
            "usermemory",
            "pending",
            "skill",
            "skillfile",
            "review",
            "inference",
        )
    }
    s = Seeded(user=user, markers=m)
    Profile.objects.update_or_create(
        user=user,
        defaults={
            "custom_instructions": m["instructions"],
            "identity": f"You are {m['identity']}.",
        },
    )
    s.token = ApiToken.objects.create(
        user=user, name=m["token"], prefix="hw_abcde", key_hash=ApiToken.hash_key(m["token"])
    )
    Membership.objects.get_or_create(user=user)
    SignInIdentity.objects.create(
        user=user, issuer="https://sso.example.org", subject=f"sub-{user.pk}"
    )
    now = timezone.now() - timedelta(hours=2)
    prompt = SystemPrompt.objects.create(
        hash=SystemPrompt.digest(m["prompt"]), prompt=f"You are Hermes. {m['prompt']}"
    )
    session = Session.objects.create(
        owner=user,
        title=f"Plans {m['title']}",
        system_prompt=prompt,
        started_at=now,
        last_activity_at=now,
        model="gpt-test",
        input_tokens=120,
        output_tokens=30,
        cache_read_tokens=60,
        api_call_count=2,
        message_count=5,
        tool_call_count=1,
        estimated_cost_usd=Decimal("0.001234"),
    )
    s.session = session
    s.user_message = Message.objects.create(
        session=session,
        role="user",
        content=f"Please remember {m['user']}",
        context_block=f"<memory-context>\nrecalled {m['recall']}\n</memory-context>",
        timestamp=now,
    )
    Message.objects.create(
        session=session,
        role="assistant",
        content="",
        status="complete",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "memory", "arguments": f'{{"content": "{m["toolargs"]}"}}'},
            }
        ],
        model="gpt-test",
        prompt_tokens=60,
        completion_tokens=10,
        cached_tokens=20,
        cost_usd=Decimal("0.000400"),
        timestamp=now + timedelta(seconds=1),
    )
    Message.objects.create(
        session=session,
        role="tool",
        tool_call_id="call_1",
        tool_name="memory",
        content=f'{{"success": true, "message": "{m["toolresult"]}"}}',
        timestamp=now + timedelta(seconds=2),
    )
    Message.objects.create(
        session=session,
        role="assistant",
        content=f"Noted: {m['assistant']}",
        reasoning=f"thinking {m['reasoning']}",
        status="complete",
        model="gpt-test",
        prompt_tokens=60,
        completion_tokens=20,
        cached_tokens=40,
        cost_usd=Decimal("0.000834"),
        token_count=20,
        finish_reason="stop",
        timestamp=now + timedelta(seconds=3),
    )
    # A compression continuation: the parent ended, the child opens with the summary and
    # a carried-over message.
    ended = now + timedelta(minutes=5)
    Session.objects.filter(pk=session.pk).update(ended_at=ended, end_reason="compression")
    session.refresh_from_db()
    child = Session.objects.create(
        owner=user,
        parent=session,
        title=f"Plans {m['title']} #2",
        system_prompt=prompt,
        started_at=ended,
        last_activity_at=ended,
        message_count=2,
    )
    s.continuation = child
    Message.objects.create(
        session=child,
        role="user",
        kind="carried",
        content=f"carried {m['carried']}",
        timestamp=ended,
    )
    Message.objects.create(
        session=child,
        role="assistant",
        kind="summary",
        status="complete",
        content=f"[CONTEXT COMPACTION] summary {m['summary']}",
        timestamp=ended,
    )
    s.temporary = Session.objects.create(
        owner=user, title=f"Temp {m['temporary']}", temporary=True, started_at=now
    )
    Message.objects.create(session=s.temporary, role="user", content=f"temp {m['temporary']}")
    SearchSummary.objects.create(
        owner=user,
        session=session,
        query=m["query"],
        query_hash=m["query"],
        last_message_id=s.user_message.pk,
        status="done",
        summary=m["searchsummary"],
    )
    memory = memory_add(
        user=user,
        target="memory",
        content=f"Project codename {m['memory']}",
        provenance=Provenance(source=Source.TOOL, session_id=session.pk),
    )
    s.entry_id = memory.entries[0].pk
    memory_add(user=user, target="user", content=f"Prefers {m['usermemory']}")
    memory_add(
        user=user,
        target="memory",
        content=f"Flushed fact {m['pending']}",
        provenance=Provenance(source=Source.FLUSH, session_id=session.pk),
    )
    memory_snapshot_freeze(session=session)
    skill = skill_create(
        user=user,
        content=(
            f"---\nname: deploy-{tag}\ndescription: Deploy the app ({m['skill']}).\n---\n\n"
            f"# Steps {m['skill']}\n\n1. Run the deploy for {m['skill']}.\n"
        ),
        category="devops",
    )
    s.skill_name = skill.name
    skill_file_write(
        user=user, name=skill.name, file_path="references/notes.md", data=f"notes {m['skillfile']}"
    )
    SessionSkillState.objects.create(
        session=session,
        included_skills=[{"id": skill.pk, "name": skill.name, "category": "devops", "team": False}],
    )
    ReviewRun.objects.create(
        session=session, last_message_id=s.user_message.pk, kind="skill", outcome=m["review"]
    )
    s.job = ExportJob.objects.create(owner=user, stage="Ready", status="failed", error="x")
    ChatImportJob.objects.create(owner=user, status="done", report=["Conversations: 1 imported"])
    seed_inferences(s)
    return s


def seed_inferences(s: Seeded) -> None:
    """Rows in the memory providers' inference tables, while they exist (issue 8)."""
    from django.apps import apps

    try:
        inference_model = apps.get_model("memory", "Inference")
    except LookupError:
        return
    inference = inference_model.objects.create(
        owner=s.user,
        statement=f"Likes {s.markers['inference']}",
        statement_hash=secrets.token_hex(32),
        source_session=s.session,
    )
    inference.evidence.add(s.user_message)
    apps.get_model("memory", "InferenceUse").objects.create(
        inference=inference, message=s.user_message
    )
    apps.get_model("memory", "InferenceState").objects.create(session=s.session, owner=s.user)
    apps.get_model("memory", "InferenceSettings").objects.create(user=s.user)
    apps.get_model("memory", "InferenceTombstone").objects.create(
        owner=s.user, digest=secrets.token_hex(32)
    )


@pytest.fixture(autouse=True)
def _exports_in_tmp(settings, tmp_path_factory) -> None:
    # No test writes into the real var/exports (tests that check var/ use var_export_dir).
    settings.HERMES_EXPORT_DIR = tmp_path_factory.mktemp("exports")


@pytest.fixture
def export_dir(settings, tmp_path) -> Path:
    """Exports of this test go to a folder of its own."""
    path = tmp_path / "exports"
    settings.HERMES_EXPORT_DIR = path
    return path


@pytest.fixture
def var_export_dir(settings) -> Path:
    """Exports under var/ (as deployed), in a folder private to this test run."""
    path = Path(django_settings.VAR_DIR) / f"test-exports-{secrets.token_hex(4)}"
    settings.HERMES_EXPORT_DIR = path
    yield path
    import shutil

    shutil.rmtree(path, ignore_errors=True)


__all__ = ["AdminContentAccess", "Seeded", "export_dir", "login", "marker", "seed"]


@pytest.fixture
def worker_export_dir(monkeypatch, tmp_path, settings) -> Path:
    """The worker process reads its settings from the environment."""
    path = tmp_path / "worker-exports"
    monkeypatch.setenv("HERMES_EXPORT_DIR", str(path))
    settings.HERMES_EXPORT_DIR = path
    return path
