"""Login throttling: a time-bound lockout per client address and per username.

Django does not throttle authentication, and DRF's throttles key on the raw
X-Forwarded-For, which a client rotates at will. Here the address is the one
`core.proxy.client_ip` derived through trusted proxies only, and the username
limit holds whatever address the guesses come from.

Every attempt is counted before its password is checked (and refunded when it succeeds),
so guesses sent in parallel to several ASGI processes still hit the limit. The other places
that ask a logged-in person for their password (deleting the account, changing the
password) check it through `password_confirm`, against the same limits: a borrowed session
cannot be used to guess the password either.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import F
from django.http import HttpRequest
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext_lazy, ngettext_lazy

from core.exceptions import ServiceError, Text, lazy_format
from core.proxy import client_ip

from .models import LoginThrottle

_SALT = "hermes.accounts.login-throttle"


@dataclass(frozen=True)
class Limit:
    key: str
    max_attempts: int


def _digest(kind: str, value: str) -> str:
    return f"{kind}:" + salted_hmac(_SALT, f"{kind}\0{value}").hexdigest()[:64]


def limits_for(request: HttpRequest | None, username: str | None) -> list[Limit]:
    limits = []
    if request is not None:
        limits.append(Limit(_digest("ip", client_ip(request)), settings.HERMES_LOGIN_MAX_PER_IP))
    if username:
        # Case-insensitive: "Alice" and "alice" are the same guesses.
        limits.append(
            Limit(_digest("user", username.strip().casefold()), settings.HERMES_LOGIN_MAX_PER_USER)
        )
    return [limit for limit in limits if limit.max_attempts > 0]


def reset_limits_for(request: HttpRequest, email: str) -> list[Limit]:
    """Limits on "Forgot password" requests, with the login's numbers: per client address
    and per e-mail address (whether or not it belongs to anyone). None is refunded."""
    limits = [Limit(_digest("reset-ip", client_ip(request)), settings.HERMES_LOGIN_MAX_PER_IP)]
    if email:
        limits.append(
            Limit(
                _digest("reset-email", email.strip().casefold()), settings.HERMES_LOGIN_MAX_PER_USER
            )
        )
    return [limit for limit in limits if limit.max_attempts > 0]


def _window() -> timedelta:
    return timedelta(seconds=settings.HERMES_LOGIN_WINDOW_SECONDS)


def _lockout() -> timedelta:
    return timedelta(seconds=settings.HERMES_LOGIN_LOCKOUT_SECONDS)


def _row(key: str, now: datetime) -> LoginThrottle:
    """The row for `key`, locked for update (PostgreSQL; SQLite's IMMEDIATE transactions
    already serialise writers)."""
    row = LoginThrottle.objects.select_for_update().filter(key=key).first()
    if row is None:
        try:
            with transaction.atomic():
                LoginThrottle.objects.create(key=key, window_started_at=now)
        except IntegrityError:
            pass  # created by a concurrent attempt; lock that one
        row = LoginThrottle.objects.select_for_update().get(key=key)
    return row


def attempt_begin(limits: list[Limit]) -> int:
    """Count one attempt against each limit. Returns 0 if it may proceed, else the seconds
    until the longest lockout ends (a refused attempt is not counted)."""
    if not limits:
        return 0
    now = timezone.now()
    with transaction.atomic():
        rows = [(_row(limit.key, now), limit) for limit in sorted(limits, key=lambda x: x.key)]
        locked = [
            row.locked_until for row, _ in rows if row.locked_until and row.locked_until > now
        ]
        if locked:
            return max(1, math.ceil((max(locked) - now).total_seconds()))
        retry_after = 0
        for row, limit in rows:
            if row.window_started_at <= now - _window() or row.locked_until:
                row.attempts, row.window_started_at, row.locked_until = 0, now, None
            row.attempts += 1
            if row.attempts > limit.max_attempts:
                # This attempt is over the limit: refuse it and lock the key.
                row.locked_until = now + _lockout()
                retry_after = max(retry_after, int(_lockout().total_seconds()))
            row.save(update_fields=["attempts", "window_started_at", "locked_until"])
    return retry_after


def attempt_succeeded(limits: list[Limit]) -> None:
    """A correct password: forget the username's failures, refund the address's attempt."""
    with transaction.atomic():
        for limit in limits:
            if limit.key.startswith("user:"):
                LoginThrottle.objects.filter(key=limit.key).delete()
            else:
                LoginThrottle.objects.filter(key=limit.key, attempts__gt=0).update(
                    attempts=F("attempts") - 1
                )


def wait_in_words(seconds: int) -> Text:
    """How long to wait, in words of the language it is shown in."""
    minutes = max(1, round(seconds / 60))
    if minutes == 1:
        return gettext_lazy("a minute")
    return lazy_format(ngettext_lazy("%(n)s minute", "%(n)s minutes", minutes), n=minutes)


def password_confirm(*, request: HttpRequest | None, user: AbstractBaseUser, password: str) -> bool:
    """Whether `password` is `user`'s, counted against the login limits of their username
    and of the client address. Raises ServiceError `too_many_attempts` (429, with
    `retry_after` seconds) during a lockout, whatever the password."""
    limits = limits_for(request, user.get_username())
    retry_after = attempt_begin(limits)
    if retry_after:
        raise ServiceError(
            "too_many_attempts",
            lazy_format(
                gettext_lazy("Too many password attempts — try again in %(wait)s."),
                wait=wait_in_words(retry_after),
            ),
            status=429,
            retry_after=retry_after,
        )
    if not user.check_password(password):
        return False
    attempt_succeeded(limits)
    return True


def throttle_prune(*, now: datetime | None = None) -> int:
    """Delete rows whose window and lockout are both over (periodic housekeeping)."""
    now = now or timezone.now()
    deleted, _rows = (
        LoginThrottle.objects.filter(window_started_at__lt=now - _window())
        .exclude(locked_until__gt=now)
        .delete()
    )
    return deleted
