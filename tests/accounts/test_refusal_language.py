"""A refusal of the services reaches a person in their language — the page's flash, a form's
error, the API's error `message` — while its code, what the logs keep and what the agent
reads in a tool result stay English."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import translation
from rest_framework.test import APIClient

from accounts import services
from accounts.models import Membership, Profile
from core.exceptions import ServiceError
from sessions_app.agent.tools import ToolContext, registry
from tests.factories import SessionFactory

pytestmark = pytest.mark.django_db


def reader(user, language: str) -> Client:
    """`user` signed in, having chosen `language` on the Account page."""
    Profile.objects.update_or_create(user=user, defaults={"language": language})
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def team_admin(owner):
    Membership.objects.create(user=owner, role=Membership.Role.ADMIN)
    return owner


def test_a_team_action_the_service_refuses_is_flashed_in_chinese(team_admin):
    page = reader(team_admin, "zh-hans").post(
        reverse("team_member_active", args=[team_admin.pk]), {"active": "0"}, follow=True
    )

    body = page.content.decode()
    assert "你不能停用自己的账户。" in body
    assert "You cannot deactivate your own account." not in body


def test_the_same_refusal_reads_english_to_an_english_reader(team_admin):
    page = reader(team_admin, "en").post(
        reverse("team_member_active", args=[team_admin.pk]), {"active": "0"}, follow=True
    )

    assert "You cannot deactivate your own account." in page.content.decode()


def test_a_refusal_raised_while_chinese_is_active_keeps_english_for_the_logs(team_admin):
    with translation.override("zh-hans"), pytest.raises(ServiceError) as refused:
        services.member_set_active(actor=team_admin, user_id=team_admin.pk, active=False)

    assert refused.value.message == "You cannot deactivate your own account."
    assert str(refused.value) == refused.value.message
    with translation.override("zh-hans"):
        assert refused.value.text == "你不能停用自己的账户。"
    with translation.override("en"):
        assert refused.value.text == refused.value.message


def test_the_add_person_form_names_a_duplicate_in_chinese(team_admin, outsider):
    page = reader(team_admin, "zh-hans").post(
        reverse("team"), {"username": "OSCAR", "email": "", "role": "member"}
    )

    assert page.status_code == 400
    assert "已经有人叫 &#x27;OSCAR&#x27; 了。" in page.content.decode()


def test_renaming_a_conversation_to_nothing_is_refused_in_chinese(owner):
    session = SessionFactory(owner=owner, title="Trip")

    page = reader(owner, "zh-hans").post(
        reverse("chat_rename", args=[session.pk]), {"title": "   "}, follow=True
    )

    body = page.content.decode()
    assert "标题至少需要一个可见字符。" in body
    assert "A title needs at least one visible character." not in body
    session.refresh_from_db()
    assert session.title == "Trip"


def api_client(user, accept_language: str) -> APIClient:
    client = APIClient(HTTP_ACCEPT_LANGUAGE=accept_language)
    client.force_authenticate(user)
    return client


def test_an_api_refusal_says_its_message_in_the_asked_language_and_keeps_its_code(owner):
    chinese = api_client(owner, "zh-hans").get("/api/search/", {"q": "trip", "role": "robot"})
    english = api_client(owner, "en").get("/api/search/", {"q": "trip", "role": "robot"})

    assert chinese.status_code == english.status_code == 400
    assert chinese.json()["error"]["code"] == english.json()["error"]["code"] == "invalid_role"
    assert chinese.json()["error"]["message"] == (
        "未知角色 'robot'；请使用 user, assistant, tool（以逗号分隔）。"
    )
    assert english.json()["error"]["message"] == (
        "Unknown role 'robot'; use user, assistant, tool (comma-separated)."
    )


def test_the_search_page_says_a_bad_role_in_chinese(owner):
    page = reader(owner, "zh-hans").get(reverse("session_list"), {"q": "trip", "role": "robot"})

    assert "未知角色 &#x27;robot&#x27;" in page.content.decode()


def test_the_agent_reads_the_same_search_refusal_in_english_while_chinese_is_active(owner):
    context = ToolContext(user=owner, session_id=None, message_id=None, origin="tool")

    with translation.override("zh-hans"):
        result = registry.dispatch(
            context,
            "session_search",
            json.dumps({"query": "trip", "role": "robot"}),
            allowed={"session_search"},
        )

    assert not result.ok
    assert "Unknown role 'robot'; use user, assistant, tool" in result.payload["error"]
    assert result.payload["error"].isascii()
