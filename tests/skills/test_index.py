"""The compact skills index frozen into a session's system prompt."""

from __future__ import annotations

import pytest

from sessions_app.models import Session
from skills_app import selectors, services
from skills_app.services import skills_index_freeze

from .conftest import skill_md

pytestmark = pytest.mark.django_db


def test_no_skills_means_no_index(owner):
    session = Session.objects.create(owner=owner)
    assert skills_index_freeze(session=session) == ""
    assert selectors.skills_included(session=session) == []


def test_index_lists_own_and_team_skills_by_category_without_bodies(owner, outsider, superuser):
    services.skill_create(
        user=owner,
        name="k8s-storage",
        category="devops",
        content=skill_md("k8s-storage", description="Fix PVCs stuck in Pending.", body="SECRET"),
    )
    services.skill_create(
        user=owner, name="release-notes", content=skill_md("release-notes", description="Write.")
    )
    services.skill_create(user=owner, name="off", content=skill_md("off"))
    services.skill_set_flags(user=owner, name="off", enabled=False)
    services.skill_create(
        user=outsider, name="not-mine", content=skill_md("not-mine", description="Other's.")
    )
    services.team_skill_save(
        actor=superuser,
        category="devops",
        content=skill_md("deploy-checklist", description="Before every deploy."),
    )
    session = Session.objects.create(owner=owner)

    index = skills_index_freeze(session=session)

    assert index.startswith("## Skills\n")
    assert "skill_view(name)" in index
    block = index[index.index("<available_skills>") :]
    assert block == (
        "<available_skills>\n"
        "devops:\n"
        "  - deploy-checklist (team) — Before every deploy.\n"
        "  - k8s-storage — Fix PVCs stuck in Pending.\n"
        "general:\n"
        "  - release-notes — Write.\n"
        "</available_skills>"
    )
    assert "SECRET" not in index and "not-mine" not in index and "off" not in block
    included = selectors.skills_included(session=session)
    assert [(s["name"], s["team"]) for s in included] == [
        ("deploy-checklist", True),
        ("k8s-storage", False),
        ("release-notes", False),
    ]


def test_long_descriptions_are_cut_to_one_line(owner):
    long = "Use this when " + "the cluster misbehaves " * 30
    services.skill_create(user=owner, name="long", content=skill_md("long", description=long))
    line = next(
        line
        for line in skills_index_freeze(session=Session.objects.create(owner=owner)).splitlines()
        if "long —" in line
    )
    assert len(line) < 230 and line.endswith("…")
