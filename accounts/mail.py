"""The mail the site sends: invitations and reset links from the Team page, "Forgot
password" links, and "your export is ready" notices.

Mail goes out only when EMAIL_URL names a mail server; without one the Team page shows the
links to pass on by hand. Sending never undoes the action it reports: a mail server that is
down or refuses the message is logged, and the caller tells the person it was not sent.
Links are absolute, on HERMES_PUBLIC_URL when set, else on the origin the request came in on.
Every mail is written in its recipient's language (accounts.language), not the sender's.
"""

from __future__ import annotations

import logging
import smtplib
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import translation

from .language import speaking_to

logger = logging.getLogger(__name__)

SITE_NAME = "Hermes Web"


def mail_enabled() -> bool:
    return bool(settings.EMAIL_URL)


def site_origin(request: HttpRequest | None) -> str:
    """`scheme://host[:port]` of the site; empty without a public URL or a request."""
    if settings.HERMES_PUBLIC_URL:
        return settings.HERMES_PUBLIC_URL
    if request is None:
        return ""
    return f"{request.scheme}://{request.get_host()}"


def mail_send(
    *,
    to: str,
    recipient: int | None,
    template: str,
    context: dict[str, Any],
    language: str | None = None,
) -> bool:
    """Send the plain-text mail `templates/mail/<template>.txt` (its first line is the
    subject) to `to`, in the language of the user `recipient` (a user id), or in `language`
    when given. False, logged, when the mail server could not be reached or refused it."""
    context = {"site_name": SITE_NAME, **context}
    with translation.override(language) if language else speaking_to(recipient):
        text = render_to_string(f"mail/{template}.txt", context)
    subject, _, body = text.partition("\n")
    message = EmailMessage(subject.strip(), body.lstrip("\n"), to=[to])
    try:
        message.send()
    except (smtplib.SMTPException, OSError) as exc:
        logger.warning("could not send the %s mail: %s", template, exc)
        return False
    return True
