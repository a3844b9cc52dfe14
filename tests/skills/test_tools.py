"""The agent's skill tools through the shared registry, acting as the conversation's owner."""

from __future__ import annotations

import json

import pytest

from sessions_app.agent.tools import ToolContext, registry
from skills_app import services
from skills_app.models import Skill

from .conftest import make_conversation, skill_md

pytestmark = pytest.mark.django_db

SKILL_TOOLS = {"skills_list", "skill_view", "skill_manage"}


def call(user, name, args, *, origin="tool", ctx=None, session_id=None):
    ctx = ctx or ToolContext(user=user, origin=origin, session_id=session_id)
    return registry.dispatch(ctx, name, json.dumps(args), allowed=SKILL_TOOLS)


def test_the_tools_are_registered_in_the_skills_toolset():
    assert set(registry.names(["skills"])) == SKILL_TOOLS


def test_create_view_list_and_patch_as_the_agent(owner):
    session = make_conversation(owner)
    created = call(
        owner,
        "skill_manage",
        {
            "action": "create",
            "name": "k8s-storage",
            "category": "devops",
            "content": skill_md("k8s-storage"),
        },
        session_id=session.pk,
    )
    assert created.ok, created.payload
    assert created.payload["message"] == "Skill 'k8s-storage' created."
    assert created.notice == ("skill_created", "Skill created: k8s-storage — /skills/k8s-storage/")

    listed = call(owner, "skills_list", {})
    assert listed.payload["skills"] == [
        {
            "name": "k8s-storage",
            "description": "How to do the thing, step by step.",
            "category": "devops",
            "team": False,
        }
    ]
    assert call(owner, "skills_list", {"category": "other"}).payload["count"] == 0

    viewed = call(owner, "skill_view", {"name": "k8s-storage"})
    assert viewed.payload["content"] == skill_md("k8s-storage")

    patched = call(
        owner,
        "skill_manage",
        {
            "action": "patch",
            "name": "k8s-storage",
            "old_string": "Do the thing.",
            "new_string": "Do it carefully.",
        },
        session_id=session.pk,
    )
    assert patched.ok and patched.notice[0] == "skill_updated"
    revision = Skill.objects.get(owner=owner).revisions.first()
    assert (revision.author, revision.source_session_id) == ("agent", session.pk)


def test_files_through_the_tool(owner):
    services.skill_create(user=owner, name="tool-skill", content=skill_md("tool-skill"))
    written = call(
        owner,
        "skill_manage",
        {
            "action": "write_file",
            "name": "tool-skill",
            "file_path": "references/notes.md",
            "file_content": "# Notes",
        },
    )
    assert written.ok
    viewed = call(owner, "skill_view", {"name": "tool-skill", "file_path": "references/notes.md"})
    assert viewed.payload["content"] == "# Notes"
    assert call(owner, "skill_view", {"name": "tool-skill"}).payload["files"] == [
        "references/notes.md"
    ]
    escaped = call(
        owner,
        "skill_manage",
        {
            "action": "write_file",
            "name": "tool-skill",
            "file_path": "../../etc/passwd",
            "file_content": "x",
        },
    )
    assert not escaped.ok and "'..' is not allowed" in escaped.payload["error"]
    removed = call(
        owner,
        "skill_manage",
        {"action": "remove_file", "name": "tool-skill", "file_path": "references/notes.md"},
    )
    assert removed.ok


def test_team_skills_are_readable_but_refused_to_the_agent(owner, superuser):
    services.team_skill_save(actor=superuser, content=skill_md("house-style"))
    listed = call(owner, "skills_list", {})
    assert listed.payload["skills"][0]["team"] is True
    viewed = call(owner, "skill_view", {"name": "house-style"})
    assert viewed.ok and viewed.payload["read_only"] is True
    for args in (
        {"action": "edit", "name": "house-style", "content": skill_md("house-style", body="x")},
        {"action": "patch", "name": "house-style", "old_string": "Check", "new_string": "x"},
        {"action": "delete", "name": "house-style"},
        {"action": "create", "name": "house-style", "content": skill_md("house-style")},
    ):
        result = call(owner, "skill_manage", args)
        assert not result.ok
        assert "team skill" in result.payload["error"]
    assert Skill.objects.get().revisions.count() == 1


def test_the_reviewer_must_read_a_skill_before_changing_it(owner):
    services.skill_create(user=owner, name="k8s-storage", content=skill_md("k8s-storage"))
    ctx = ToolContext(user=owner, origin="review")
    patch = {
        "action": "patch",
        "name": "k8s-storage",
        "old_string": "Do the thing.",
        "new_string": "Do it well.",
    }
    refused = call(owner, "skill_manage", patch, ctx=ctx)
    assert not refused.ok and refused.payload["code"] == "read_first"
    assert call(owner, "skill_view", {"name": "k8s-storage"}, ctx=ctx).ok
    accepted = call(owner, "skill_manage", patch, ctx=ctx)
    assert accepted.ok
    assert Skill.objects.get().revisions.first().author == "review"


def test_the_reviewer_leaves_pinned_skills_alone(owner):
    services.skill_create(user=owner, name="k8s-storage", content=skill_md("k8s-storage"))
    services.skill_set_flags(user=owner, name="k8s-storage", pinned=True)
    ctx = ToolContext(user=owner, origin="review")
    call(owner, "skill_view", {"name": "k8s-storage"}, ctx=ctx)
    result = call(
        owner,
        "skill_manage",
        {"action": "patch", "name": "k8s-storage", "old_string": "Do", "new_string": "x"},
        ctx=ctx,
    )
    assert not result.ok and result.payload["code"] == "protected"


def test_disabled_skills_are_hidden_from_the_agent(owner):
    services.skill_create(user=owner, name="old-way", content=skill_md("old-way"))
    services.skill_set_flags(user=owner, name="old-way", enabled=False)
    assert call(owner, "skills_list", {}).payload["count"] == 0
    assert not call(owner, "skill_view", {"name": "old-way"}).ok
    again = call(
        owner,
        "skill_manage",
        {"action": "create", "name": "old-way", "content": skill_md("old-way")},
    )
    assert "disabled" in again.payload["error"]


def test_one_users_skills_are_invisible_to_anothers_agent(owner, outsider):
    services.skill_create(user=owner, name="private-notes", content=skill_md("private-notes"))
    assert call(outsider, "skills_list", {}).payload["count"] == 0
    viewed = call(outsider, "skill_view", {"name": "private-notes"})
    assert not viewed.ok and viewed.payload["code"] == "not_found"
    for args in (
        {"action": "delete", "name": "private-notes"},
        {"action": "patch", "name": "private-notes", "old_string": "Do", "new_string": "x"},
    ):
        assert not call(outsider, "skill_manage", args).ok
    assert Skill.objects.get(owner=owner).revisions.count() == 1


def test_bad_arguments_get_clear_errors(owner):
    assert (
        "Unknown action"
        in call(owner, "skill_manage", {"action": "zap", "name": "x"}).payload["error"]
    )
    assert (
        "'name' is required" in call(owner, "skill_manage", {"action": "create"}).payload["error"]
    )
    bad = call(owner, "skill_manage", {"action": "create", "name": "x", "content": "no fm"})
    assert "frontmatter" in bad.payload["error"]
