"""`{% load flash %}`: split a page's messages between its top and its sections."""

from __future__ import annotations

from collections.abc import Iterable

from django import template
from django.contrib.messages.storage.base import Message

from core.flash import section_of

register = template.Library()


@register.filter
def in_section(messages: Iterable[Message], section: str) -> list[Message]:
    return [m for m in messages if section_of(m) == section]


@register.filter
def outside_sections(messages: Iterable[Message]) -> list[Message]:
    return [m for m in messages if not section_of(m)]
