"""Memory and skills plug into the conversation through sessions_app/agent/extensions.py
(sessions_app imports neither): what they register from ready() is what a turn uses."""

from __future__ import annotations

import pytest

from memory.providers import MemoryManager
from memory.services import memory_add
from sessions_app.agent.extensions import (
    after_turn_jobs,
    memory_providers_for,
    prompt_sections,
)
from sessions_app.agent.prompt import build_system_prompt
from tests.factories import MemoryEntryFactory, SessionFactory, SkillFactory

pytestmark = pytest.mark.django_db


def test_memory_and_skills_fill_the_extension_points(owner):
    assert isinstance(memory_providers_for(owner), MemoryManager)
    assert [s.name for s in prompt_sections()] == ["memory_snapshot", "skills_index"]
    assert [name for name, _job in after_turn_jobs()] == ["skill_review"]


def test_the_frozen_prompt_has_the_memory_snapshot_then_the_skills_index(owner):
    memory_add(user=owner, target="memory", content="Project uses Django 5.2")
    SkillFactory(owner=owner, name="deploy-the-site")
    prompt = build_system_prompt(session=SessionFactory(owner=owner), provider_block="")
    assert "Project uses Django 5.2" in prompt
    assert "deploy-the-site" in prompt
    assert prompt.index("Project uses Django 5.2") < prompt.index("deploy-the-site")


def test_a_temporary_chat_gets_the_skills_index_but_no_memory(owner):
    MemoryEntryFactory(owner=owner, content="Name: Olivia")
    SkillFactory(owner=owner, name="deploy-the-site")
    prompt = build_system_prompt(
        session=SessionFactory(owner=owner, temporary=True), provider_block=""
    )
    assert "deploy-the-site" in prompt
    assert "Olivia" not in prompt
    assert "MEMORY (your personal notes)" not in prompt
