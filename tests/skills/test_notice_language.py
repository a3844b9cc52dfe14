"""The chat notices of the skill tools and of the background review are said in the
person's language (their Account page's choice); what goes back to the model stays English."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from accounts.models import Profile
from sessions_app.agent.tools import ToolContext, registry
from skills_app.services import review

from .conftest import make_conversation, skill_md

pytestmark = pytest.mark.django_db


def manage(user, **args):
    ctx = ToolContext(user=user, origin="tool")
    return registry.dispatch(ctx, "skill_manage", json.dumps(args), allowed={"skill_manage"})


def speaks(user, language: str) -> None:
    Profile.objects.update_or_create(user=user, defaults={"language": language})


def test_skill_notices_follow_the_persons_language(owner, outsider):
    speaks(owner, "zh-hans")
    speaks(outsider, "en")
    args = {"action": "create", "name": "k8s-storage", "content": skill_md("k8s-storage")}

    chinese, english = manage(owner, **args), manage(outsider, **args)

    assert chinese.notice == ("skill_created", "已创建技能：k8s-storage — /skills/k8s-storage/")
    assert english.notice == ("skill_created", "Skill created: k8s-storage — /skills/k8s-storage/")
    assert chinese.payload["message"] == english.payload["message"]
    assert english.payload["message"] == "Skill 'k8s-storage' created."

    deleted = manage(owner, action="delete", name="k8s-storage")
    assert deleted.notice == ("skill_updated", "已删除技能：k8s-storage")
    assert deleted.payload["message"] == "Skill 'k8s-storage' deleted."


def test_the_reviews_memory_notice_is_in_the_persons_language(owner, monkeypatch):
    speaks(owner, "zh-hans")
    session = make_conversation(owner)
    sent = []
    monkeypatch.setattr(review, "notice_to_user", lambda **notice: sent.append(notice))
    memory_call = SimpleNamespace(
        ok=True, name="memory", notice=None, arguments={"action": "add"}, payload={}
    )
    run = SimpleNamespace(session=session, session_id=session.pk)

    review._announce(run, SimpleNamespace(tool_results=[memory_call]))

    assert [n["text"] for n in sent] == ["记忆已更新 — /memory/"]
