"""Reads about accounts: team roles and effective quotas (usage figures come from the usage
app)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from django.utils import timezone

from .meter import Usage, usage_meter
from .models import Membership


def is_team_admin(user: Any) -> bool:
    """Superusers, and active people whose membership role is admin."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser:
        return True
    return Membership.objects.filter(user=user, role=Membership.Role.ADMIN).exists()


def day_bounds(now: datetime | None = None) -> tuple[datetime, datetime]:
    """Start of today and of tomorrow in the deployment's TIME_ZONE (quotas reset then)."""
    today = timezone.localtime(now or timezone.now()).date()
    # Via dates, not +24 h: a day with a DST change is 23 or 25 hours long.
    start = timezone.make_aware(datetime.combine(today, time.min))
    end = timezone.make_aware(datetime.combine(today + timedelta(days=1), time.min))
    return start, end


@dataclass(frozen=True)
class Quota:
    """Effective daily limits; 0 means no limit."""

    messages: int
    tokens: int


def quota_for(*, user: AbstractBaseUser) -> Quota:
    """The person's daily limits: their own where set, else the site's. Read on a cursor, as
    every turn reads them first (the ORM took four times as long as the read)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT daily_message_limit, daily_token_limit FROM accounts_membership"
            " WHERE user_id = %s",
            [user.pk],
        )
        return quota_of(*(cursor.fetchone() or (None, None)))


def quota_of(messages: int | None, tokens: int | None) -> Quota:
    """The effective limits of a membership's own ones (None: the site's)."""
    return Quota(
        messages=settings.HERMES_DAILY_MESSAGE_LIMIT if messages is None else messages,
        tokens=settings.HERMES_DAILY_TOKEN_LIMIT if tokens is None else tokens,
    )


@dataclass(frozen=True)
class MemberRow:
    user: Any
    role: str
    is_admin: bool
    quota: Quota
    custom_messages: int | None
    custom_tokens: int | None
    today: Usage
    last_30_days: Usage


def team_members(*, user_id: int | None = None, now: datetime | None = None) -> list[MemberRow]:
    """Everyone (or one person), with role, effective quota and usage today and over the
    last 30 days, in two queries."""
    today, _ = day_bounds(now)
    month = today - timedelta(days=29)
    users = get_user_model().objects.select_related("membership").order_by("-is_active", "username")
    if user_id is not None:
        users = users.filter(pk=user_id)
    usage = usage_meter().usage_per_person(today=today, month=month, user_id=user_id)
    rows = []
    for user in list(users):
        membership = getattr(user, "membership", None)
        custom_messages = membership.daily_message_limit if membership else None
        custom_tokens = membership.daily_token_limit if membership else None
        role = membership.role if membership else Membership.Role.MEMBER
        u = usage.get(user.pk, {})
        rows.append(
            MemberRow(
                user=user,
                role=role,
                is_admin=user.is_superuser or role == Membership.Role.ADMIN,
                quota=quota_of(custom_messages, custom_tokens),
                custom_messages=custom_messages,
                custom_tokens=custom_tokens,
                today=u.get("today", Usage()),
                last_30_days=u.get("month", Usage()),
            )
        )
    return rows


def team_member(*, user_id: int, now: datetime | None = None) -> MemberRow | None:
    rows = team_members(user_id=user_id, now=now)
    return rows[0] if rows else None
