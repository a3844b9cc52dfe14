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
    """`base`, or "base (2)", "base (3)"… if the owner already has a conversation so titled."""
    taken = set(
        Session.objects.filter(owner=user, title__startswith=base[:90])
        .exclude(pk=exclude)
        .values_list("title", flat=True)
    )
    return title_not_in(base, taken)


def title_not_in(title: str, taken: set[str]) -> str:
    """`title` (cut to TITLE_MAX), numbered "(2)", "(3)"… until it is none of `taken`."""
    title = title[:TITLE_MAX]
    if title not in taken:
        return title
    n = 2
    while f"{title[: TITLE_MAX - 6]} ({n})" in taken:
        n += 1
    return f"{title[: TITLE_MAX - 6]} ({n})"
