"""Staff who are not superusers see only their own rows in every registered admin."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from accounts.models import ApiToken, Profile
from core.privacy.admin_base import OwnedModelAdmin
from sessions_app.models import Message, Session, SystemPrompt

pytestmark = pytest.mark.django_db

MARK_STAFF = "staffmarker7781"
MARK_OTHER = "othermarker4410"


def seed(user, marker):
    """One row of every owned model, with `marker` in its text where there is text."""
    prompt = SystemPrompt.objects.create(hash=SystemPrompt.digest(marker), prompt=marker)
    session = Session.objects.create(owner=user, title=marker, system_prompt=prompt)
    message = Message.objects.create(session=session, role="user", content=marker)
    profile = Profile.objects.create(user=user, custom_instructions=marker)
    token = ApiToken.objects.create(
        user=user, name=marker, prefix="hw_x", key_hash=ApiToken.hash_key(marker)
    )
    return {
        "session": session,
        "message": message,
        "prompt": prompt,
        "profile": profile,
        "token": token,
    }


def owned_admins():
    return [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, OwnedModelAdmin)
    ]


def test_every_app_model_is_registered_in_the_admin():
    from django.apps import apps

    ours = {"accounts", "sessions_app", "memory", "skills_app"}
    missing = [
        m._meta.label
        for m in apps.get_models()
        if m._meta.app_label in ours and m not in admin.site._registry
    ]
    assert missing == []


def test_staff_member_sees_only_their_own_rows(staff_member, outsider):
    mine = seed(staff_member, MARK_STAFF)
    seed(outsider, MARK_OTHER)
    client = Client()
    client.force_login(staff_member)
    for model, _ in owned_admins():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert MARK_OTHER not in body, f"{url} leaks another user's row"
    # Their own rows are there (markers appear in the list or are reachable by id).
    response = client.get(reverse("admin:sessions_app_session_changelist"))
    assert MARK_STAFF in response.content.decode()
    response = client.get(reverse("admin:sessions_app_message_change", args=[mine["message"].pk]))
    assert response.status_code == 200


def test_staff_member_cannot_open_another_users_row_by_id(staff_member, outsider):
    theirs = seed(outsider, MARK_OTHER)
    client = Client()
    client.force_login(staff_member)
    for key, obj in theirs.items():
        meta = obj._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[obj.pk])
        response = client.get(url, follow=True)
        assert MARK_OTHER not in response.content.decode(), f"{key} leaks through {url}"
        delete = reverse(f"admin:{meta.app_label}_{meta.model_name}_delete", args=[obj.pk])
        client.post(delete, {"post": "yes"})
        assert type(obj).objects.filter(pk=obj.pk).exists(), f"{key} deleted by a stranger"


def test_superuser_sees_everyones_rows(superuser, staff_member, outsider, settings):
    # Other people's content is hidden from superusers unless the deployment allows it
    # (tests/privacy/test_admin.py covers the default and the audit log).
    settings.HERMES_ADMIN_CONTENT_ACCESS = True
    seed(staff_member, MARK_STAFF)
    seed(outsider, MARK_OTHER)
    client = Client()
    client.force_login(superuser)
    body = client.get(reverse("admin:sessions_app_session_changelist")).content.decode()
    assert MARK_STAFF in body and MARK_OTHER in body


def test_member_without_staff_flag_cannot_enter_the_admin(owner):
    client = Client()
    client.force_login(owner)
    response = client.get(reverse("admin:index"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
