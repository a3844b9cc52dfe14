"""The Account page's sections that other apps own. An app above accounts (privacy: download
my data, import, forget memory, delete account) registers, from its ready(), a function giving
its part of the page's template context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

SectionContext = Callable[[AbstractBaseUser], dict[str, Any]]

_sections: dict[str, SectionContext] = {}


def account_section_register(name: str, context: SectionContext) -> None:
    """Add (or replace) the section `name`; its context joins the page's."""
    _sections[name] = context


def account_sections_context(user: AbstractBaseUser) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for context in _sections.values():
        merged.update(context(user))
    return merged
