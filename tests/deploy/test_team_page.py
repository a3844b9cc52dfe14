"""The team page: admins add people (with an invitation link), deactivate them, reset
passwords, set roles and quotas, and see usage. For everyone else it does not exist."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from accounts.models import Membership
from tests.deploy.test_quotas import add_usage
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db
NEW_PASSWORD = "a fresh long passphrase 42"


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def team_admin(db):
    """Someone with the admin role who is not a superuser (and not staff)."""
    user = UserFactory(username="ada")
    Membership.objects.create(user=user, role="admin")
    return user


def member_urls(user_id: int) -> list[str]:
    return [reverse(name, args=[user_id]) for name in ("team_member",)] + [
        reverse(f"team_member_{action}", args=[user_id])
        for action in ("role", "quota", "active", "reset", "invite")
    ]


def test_members_get_404_for_every_team_url(owner, outsider):
    client = logged_in(owner)
    assert client.get(reverse("team")).status_code == 404
    assert client.post(reverse("team"), {"username": "eve"}).status_code == 404
    for url in member_urls(outsider.pk):
        response = client.post(url, {"active": "0", "role": "admin"})
        assert response.status_code == 404, url
    outsider.refresh_from_db()
    assert outsider.is_active
    assert not Membership.objects.filter(user=outsider).exists()
    assert not get_user_model().objects.filter(username="eve").exists()


def test_the_team_link_is_in_the_navigation_only_for_admins(owner, team_admin, superuser):
    assert (
        'href="/accounts/team/"' not in logged_in(owner).get(reverse("dashboard")).content.decode()
    )
    for admin in (team_admin, superuser):
        body = logged_in(admin).get(reverse("team")).content.decode()
        assert 'href="/accounts/team/" aria-current="page">Team' in body
        # The Account section is not also marked current on /accounts/team/.
        assert 'href="/accounts/" aria-current' not in body


def test_admin_sees_everyone_with_usage_and_quota(team_admin, owner, outsider, settings):
    settings.HERMES_DAILY_MESSAGE_LIMIT = 50
    add_usage(owner, messages=7, tokens=1234)
    Membership.objects.create(user=outsider, daily_message_limit=0)
    body = logged_in(team_admin).get(reverse("team")).content.decode()
    assert "olivia" in body and "oscar" in body and "ada" in body
    assert "7 / 50" in body  # olivia: messages today against the team default
    assert "1,234" in body  # tokens today, with thousands separated
    assert "(no limit)" in body  # oscar's personal 0


def test_the_team_page_query_count_does_not_grow_with_people(
    team_admin, django_assert_max_num_queries
):
    client = logged_in(team_admin)
    client.get(reverse("team"))
    for i in range(15):
        # No password: hashing fifteen would only slow the test down.
        add_usage(get_user_model().objects.create_user(f"person{i}"), messages=1, tokens=10)
    with django_assert_max_num_queries(8):
        response = client.get(reverse("team"))
    assert response.content.decode().count("person") >= 15


def test_adding_someone_gives_a_link_with_which_they_choose_a_password(team_admin):
    client = logged_in(team_admin)
    response = client.post(
        reverse("team"),
        {"username": "newbie", "email": "newbie@example.org", "role": "member"},
        follow=True,
    )
    body = response.content.decode()
    assert "newbie was added" in body
    link = re.search(r'value="(http://testserver/accounts/welcome/[^"]+)"', body).group(1)
    user = get_user_model().objects.get(username="newbie")
    assert not user.has_usable_password()
    assert Membership.objects.get(user=user).invited_by == team_admin
    # The link is shown once.
    assert "/accounts/welcome/" not in client.get(reverse("team")).content.decode()

    newbie = Client()
    form_page = newbie.get(link, follow=True)
    assert "Choose your password" in form_page.content.decode()
    done = newbie.post(
        form_page.redirect_chain[-1][0],
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == reverse("dashboard")
    assert "Your password is set" in done.content.decode()
    # Used once: it does not work again.
    assert "does not work any more" in Client().get(link, follow=True).content.decode()
    assert Client().login(username="newbie", password=NEW_PASSWORD)


def test_adding_a_taken_username_explains_and_keeps_the_form(team_admin, owner):
    response = logged_in(team_admin).post(reverse("team"), {"username": "OLIVIA", "role": "member"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "There is already someone called" in body
    assert 'value="OLIVIA"' in body


def test_deactivating_stops_logins_and_reactivating_restores_them(team_admin, owner):
    client = logged_in(team_admin)
    victim_session = logged_in(owner)
    client.post(reverse("team_member_active", args=[owner.pk]), {"active": "0"})
    owner.refresh_from_db()
    assert not owner.is_active
    assert victim_session.get(reverse("dashboard")).status_code == 302  # logged out
    assert not Client().login(username="olivia", password=PASSWORD)
    client.post(reverse("team_member_active", args=[owner.pk]), {"active": "1"})
    assert Client().login(username="olivia", password=PASSWORD)


def test_a_password_reset_voids_the_old_password_and_gives_a_link(team_admin, owner):
    response = logged_in(team_admin).post(
        reverse("team_member_reset", args=[owner.pk]), follow=True
    )
    body = response.content.decode()
    assert "Password reset link" in body
    owner.refresh_from_db()
    assert not owner.has_usable_password()
    assert not Client().login(username="olivia", password=PASSWORD)
    link = re.search(r'value="(http://testserver/accounts/welcome/[^"]+)"', body).group(1)
    page = Client().get(link, follow=True)
    assert "Account: <strong>olivia</strong>" in page.content.decode()


def test_roles_and_quotas_are_set_on_the_member_page(team_admin, owner):
    client = logged_in(team_admin)
    client.post(reverse("team_member_role", args=[owner.pk]), {"role": "admin"})
    client.post(
        reverse("team_member_quota", args=[owner.pk]),
        {"daily_message_limit": "25", "daily_token_limit": ""},
    )
    membership = Membership.objects.get(user=owner)
    assert membership.role == "admin"
    assert (membership.daily_message_limit, membership.daily_token_limit) == (25, None)
    # The new admin now has the page.
    assert logged_in(owner).get(reverse("team")).status_code == 200
    bad = client.post(
        reverse("team_member_quota", args=[owner.pk]),
        {"daily_message_limit": "-3", "daily_token_limit": "x"},
        follow=True,
    )
    assert "Limits are whole numbers" in bad.content.decode()
    assert Membership.objects.get(user=owner).daily_message_limit == 25


def test_a_team_admin_cannot_touch_a_superuser(team_admin, superuser):
    client = logged_in(team_admin)
    page = client.get(reverse("team_member", args=[superuser.pk])).content.decode()
    assert "only a superuser can change it" in page
    response = client.post(
        reverse("team_member_reset", args=[superuser.pk]), follow=True
    ).content.decode()
    assert "Only a superuser can change a superuser" in response
    client.post(reverse("team_member_active", args=[superuser.pk]), {"active": "0"})
    superuser.refresh_from_db()
    assert superuser.is_active and superuser.has_usable_password()


def test_admins_cannot_lock_themselves_out(team_admin):
    client = logged_in(team_admin)
    client.post(reverse("team_member_active", args=[team_admin.pk]), {"active": "0"})
    client.post(reverse("team_member_role", args=[team_admin.pk]), {"role": "member"})
    team_admin.refresh_from_db()
    assert team_admin.is_active
    assert Membership.objects.get(user=team_admin).role == "admin"


def test_a_missing_person_is_a_404(team_admin):
    client = logged_in(team_admin)
    assert client.get(reverse("team_member", args=[999999])).status_code == 404
    assert (
        client.post(reverse("team_member_active", args=[999999]), {"active": "0"}).status_code
        == 404
    )
