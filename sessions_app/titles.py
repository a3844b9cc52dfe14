"""Conversation titles: cleaned of invisible characters, derived from the first message,
unique per owner ("Plans (2)")."""

from __future__ import annotations

import re
import unicodedata

from django.contrib.auth.models import AbstractBaseUser

from .models import Session

TITLE_MAX = 100
_INVISIBLE = re.compile(
    r"[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


def clean_title(text: str) -> str:
    """Control, zero-width and bidi characters stripped, whitespace collapsed, ≤100 chars."""
    text = _INVISIBLE.sub(" ", unicodedata.normalize("NFC", text or ""))
    text = " ".join(text.split())
    return text[:TITLE_MAX].strip()


def derived_title(text: str) -> str:
    first_line = clean_title(text.strip().splitlines()[0] if text.strip() else "")
    if len(first_line) > 60:
        first_line = first_line[:57].rstrip() + "…"
    return first_line or "New conversation"


def unique_title(*, user: AbstractBaseUser, base: str, exclude: str | None = None) -> str:
    taken = set(
        Session.objects.filter(owner=user, title__startswith=base[:90])
        .exclude(pk=exclude)
        .values_list("title", flat=True)
    )
    if base not in taken:
        return base
    n = 2
    while f"{base[: TITLE_MAX - 6]} ({n})" in taken:
        n += 1
    return f"{base[: TITLE_MAX - 6]} ({n})"
