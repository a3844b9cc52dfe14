"""E-mail against a real SMTP server (aiosmtpd on a free port): Team invitations and reset
links, "Forgot password", and the export-ready notice. Mail never breaks the action: with
the server down the invitation is made and the page says the mail was not sent."""

from __future__ import annotations

import email
import re
from collections.abc import Iterator
from email.message import Message

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import Membership
from hermes_site.settings.deployment import email_settings
from tests.conftest import free_port
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db
NEW_PASSWORD = "a fresh long passphrase 42"


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 (aiosmtpd API)
        self.messages.append((list(envelope.rcpt_tos), email.message_from_bytes(envelope.content)))
        return "250 OK"

    def to(self, address: str) -> list[Message]:
        return [message for rcpts, message in self.messages if address in rcpts]


def use_email_url(settings, url: str) -> None:
    settings.EMAIL_URL = url
    for name, value in email_settings(url).items():
        setattr(settings, name, value)


@pytest.fixture
def smtp(settings) -> Iterator[Inbox]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    use_email_url(settings, f"smtp://127.0.0.1:{controller.port}")
    settings.HERMES_PUBLIC_URL = ""
    try:
        yield inbox
    finally:
        controller.stop()


@pytest.fixture
def smtp_down(settings) -> None:
    # Nothing listens on this port: the connection is refused at once.
    use_email_url(settings, f"smtp://127.0.0.1:{free_port()}")


@pytest.fixture
def team_admin(db):
    user = UserFactory(username="ada")
    Membership.objects.create(user=user, role="admin")
    return user


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def link_in(message: Message) -> str:
    body = message.get_payload(decode=True).decode()
    match = re.search(r"http://testserver(/\S+)", body)
    assert match, body
    return match.group(1)


def set_password_with(path: str) -> Client:
    client = Client()
    form = client.get(path, follow=True)
    assert "Choose your password" in form.content.decode()
    response = client.post(
        form.redirect_chain[-1][0] if form.redirect_chain else path,
        {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )
    assert response.status_code == 302 and response["Location"] == reverse("dashboard")
    return client


def test_an_invitation_is_mailed_and_its_link_sets_the_password(smtp, team_admin):
    page = logged_in(team_admin).post(
        reverse("team"),
        {"username": "bea", "email": "bea@example.org", "role": "member"},
        follow=True,
    )
    text = page.content.decode()
    assert "It was mailed to <strong>bea@example.org</strong>" in text
    # The copyable link is still shown, and it is the one in the mail.
    [message] = smtp.to("bea@example.org")
    assert message["Subject"] == "You are invited to Hermes Web"
    assert "Your username is: bea" in message.get_payload(decode=True).decode()
    path = link_in(message)
    assert f'value="http://testserver{path}"' in text
    set_password_with(path)
    bea = get_user_model().objects.get(username="bea")
    assert bea.check_password(NEW_PASSWORD)


def test_a_reset_from_the_team_page_is_mailed_only_to_that_person(
    smtp, team_admin, owner, outsider
):
    owner.email, outsider.email = "olivia@example.org", "oscar@example.org"
    owner.save(), outsider.save()
    page = logged_in(team_admin).post(reverse("team_member_reset", args=[owner.pk]), follow=True)
    assert "It was mailed to <strong>olivia@example.org</strong>" in page.content.decode()
    assert [rcpts for rcpts, _ in smtp.messages] == [["olivia@example.org"]]
    set_password_with(link_in(smtp.to("olivia@example.org")[0]))
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD)


def test_with_the_mail_server_down_the_invitation_is_made_and_the_page_says_so(
    smtp_down, team_admin, caplog
):
    page = logged_in(team_admin).post(
        reverse("team"),
        {"username": "bea", "email": "bea@example.org", "role": "member"},
        follow=True,
    )
    text = page.content.decode()
    assert page.status_code == 200
    assert "The mail to bea@example.org could not be sent" in text
    path = re.search(r'value="http://testserver(/accounts/welcome/[^"]+)"', text).group(1)
    assert get_user_model().objects.filter(username="bea").exists()
    assert "could not send the invitation mail" in caplog.text
    set_password_with(path)


def test_without_a_mail_server_the_team_page_shows_the_link_only(settings, team_admin):
    settings.EMAIL_URL = ""
    page = logged_in(team_admin).post(
        reverse("team"),
        {"username": "bea", "email": "bea@example.org", "role": "member"},
        follow=True,
    )
    text = page.content.decode()
    assert "this site does not send e-mail" in text
    assert 'id="team-link-url" value="http://testserver/accounts/welcome/' in text
    login_page = Client().get(reverse("login")).content.decode()
    assert "Forgot your password?" not in login_page
    forgot = Client().post(reverse("password_reset"), {"email": "bea@example.org"})
    assert "This site does not send e-mail" in forgot.content.decode()


def forgot(client: Client, address: str):
    return client.post(reverse("password_reset"), {"email": address}, follow=True)


def test_forgot_password_mails_a_link_that_sets_a_new_password(smtp, owner):
    owner.email = "olivia@example.org"
    owner.save()
    login_page = Client().get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in login_page
    page = forgot(Client(), "OLIVIA@example.org")
    assert "Check your mail" in page.content.decode()
    [message] = smtp.to("olivia@example.org")
    assert message["Subject"] == "Choose a new password for Hermes Web"
    client = set_password_with(link_in(message))
    owner.refresh_from_db()
    assert owner.check_password(NEW_PASSWORD) and not owner.check_password(PASSWORD)
    assert client.get(reverse("dashboard")).status_code == 200


def test_forgot_password_for_an_unknown_address_looks_the_same_and_sends_nothing(smtp, owner):
    owner.email = "olivia@example.org"
    owner.save()
    known = forgot(Client(), "olivia@example.org")
    unknown = forgot(Client(), "nobody@example.org")
    assert unknown.status_code == known.status_code == 200
    assert unknown.redirect_chain == known.redirect_chain
    strip = lambda r: re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", r.content.decode())  # noqa: E731
    assert strip(unknown) == strip(known)
    assert [rcpts for rcpts, _ in smtp.messages] == [["olivia@example.org"]]


def test_one_persons_reset_link_does_not_work_for_another(smtp, owner, outsider):
    owner.email, outsider.email = "olivia@example.org", "oscar@example.org"
    owner.save(), outsider.save()
    forgot(Client(), "olivia@example.org")
    path = link_in(smtp.to("olivia@example.org")[0])
    assert smtp.to("oscar@example.org") == []
    # The link names Olivia; swapping in Oscar's id makes it invalid.
    uid = re.search(r"/welcome/([^/]+)/", path).group(1)
    other = path.replace(uid, urlsafe_base64_encode(force_bytes(outsider.pk)))
    page = Client().get(other, follow=True).content.decode()
    assert "This link does not work any more" in page
    page = Client().get(path, follow=True).content.decode()
    assert f"Account: <strong>{owner.username}</strong>" in page


def test_forgot_password_is_throttled_per_address(smtp, settings, owner):
    settings.HERMES_LOGIN_MAX_PER_USER = 2
    owner.email = "olivia@example.org"
    owner.save()
    for _ in range(2):
        assert forgot(Client(), "olivia@example.org").status_code == 200
    refused = Client().post(reverse("password_reset"), {"email": "olivia@example.org"})
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many requests" in refused.content.decode()
    # An unknown address is limited the same way (its answer reveals nothing).
    for _ in range(2):
        forgot(Client(), "nobody@example.org")
    assert (
        Client().post(reverse("password_reset"), {"email": "nobody@example.org"}).status_code == 429
    )
    assert len(smtp.to("olivia@example.org")) == 2


def test_an_export_ready_notice_is_mailed_to_its_owner_only(
    smtp, owner, outsider, settings, tmp_path, django_capture_on_commit_callbacks
):
    settings.HERMES_EXPORT_DIR = tmp_path / "exports"
    owner.email, outsider.email = "olivia@example.org", "oscar@example.org"
    owner.save(), outsider.save()
    client = logged_in(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("api-me-exports"))  # built inline in unit tests
    assert response.status_code == 202
    [message] = smtp.to("olivia@example.org")
    assert message["Subject"] == "Your Hermes Web archive is ready"
    assert link_in(message) == reverse("account") + "#data"
    assert smtp.to("oscar@example.org") == []
