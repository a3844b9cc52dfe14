"""Mail is written in its recipient's language, whoever sends it: a person who reads 简体中文
gets their invitation, reset link, "forgot password" link and "archive ready" notice in
Chinese even when an English-speaking admin (or a worker, outside any request) sends it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from accounts.models import Membership, Profile
from privacy.jobs import _tell_ready
from privacy.models import ExportJob
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def outbox(settings):
    settings.EMAIL_URL = "locmem://"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.HERMES_PUBLIC_URL = "https://hermes.example.org"
    settings.PASSWORD_RESET_TIMEOUT = 3 * 86400


@pytest.fixture
def reader(db):
    """Someone who chose 简体中文 on the Account page."""
    user = UserFactory(username="lin", email="lin@example.org")
    Profile.objects.create(user=user, language="zh-hans")
    return user


@pytest.fixture
def english_admin(db):
    admin = UserFactory(username="ada")
    Membership.objects.create(user=admin, role="admin")
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(admin)
    return client


def test_an_invitation_is_in_the_recipients_language(english_admin, reader):
    reader.set_unusable_password()
    reader.save()
    page = english_admin.post(reverse("team_member_invite", args=[reader.pk]), follow=True)
    assert "It was mailed to" in page.content.decode()  # the admin's page stays English
    [message] = mail.outbox
    assert message.subject == "邀请你加入 Hermes Web"
    assert "lin，你好：" in message.body
    assert "3 天后失效" in message.body
    assert "If you did not expect this" not in message.body


def test_someone_just_added_is_invited_in_the_language_of_who_adds_them(db):
    admin = UserFactory(username="wang")
    Membership.objects.create(user=admin, role="admin")
    Profile.objects.create(user=admin, language="zh-hans")
    client = Client()
    client.force_login(admin)
    client.post(reverse("team"), {"username": "mei", "email": "mei@example.org", "role": "member"})
    [message] = mail.outbox
    assert message.subject == "邀请你加入 Hermes Web"
    assert "wang 为你在 Hermes Web 创建了账户。你的用户名是：mei" in message.body


def test_a_reset_link_from_the_team_page_is_in_the_recipients_language(english_admin, reader):
    english_admin.post(reverse("team_member_reset", args=[reader.pk]))
    [message] = mail.outbox
    assert message.subject == "为 Hermes Web 设置新密码"
    assert "ada 重置了你在 Hermes Web 的密码" in message.body


def test_forgot_password_mail_is_in_the_accounts_language_not_the_browsers(reader):
    Client(HTTP_ACCEPT_LANGUAGE="en").post(reverse("password_reset"), {"email": "lin@example.org"})
    [message] = mail.outbox
    assert message.subject == "为 Hermes Web 设置新密码"
    assert "请通过此链接设置新密码" in message.body


def test_the_archive_ready_notice_is_in_the_owners_language(reader):
    expires = datetime(2026, 12, 3, 9, 44, tzinfo=UTC)
    job = ExportJob.objects.create(owner=reader, status="done", expires_at=expires)
    _tell_ready(job_id=job.pk, origin="")
    [message] = mail.outbox
    assert message.subject == "你的 Hermes Web 归档已准备好"
    # The date reads as Chinese dates do, not "3 十二月 2026".
    assert "2026年12月3日 09:44 UTC" in message.body


def test_an_english_reader_still_gets_english(english_admin, db):
    person = UserFactory(username="bob", email="bob@example.org")
    english_admin.post(reverse("team_member_reset", args=[person.pk]))
    [message] = mail.outbox
    assert message.subject == "Choose a new password for Hermes Web"
    assert "expires in 3 days" in message.body
