"""How much a person used: the quota check and the Team page count the messages each person
sent and the tokens their answers used. Those figures are read from the conversations by the
usage app, which sits above accounts and registers its meter from its ready()."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class Usage:
    messages: int = 0
    tokens: int = 0


class UsageMeter(Protocol):
    def usage_since(self, *, user: AbstractBaseUser, since: datetime) -> Usage:
        """Messages the user sent and tokens their answers used since `since`."""
        ...

    def usage_per_person(
        self, *, today: datetime, month: datetime, user_id: int | None = None
    ) -> dict[int, dict[str, Usage]]:
        """Per owner (or only `user_id`): {"today": Usage, "month": Usage}."""
        ...


_meter: list[UsageMeter] = []


def usage_meter_register(meter: UsageMeter) -> None:
    _meter[:] = [meter]


def usage_meter() -> UsageMeter:
    if not _meter:
        raise ImproperlyConfigured("No usage meter registered: is the usage app installed?")
    return _meter[0]
