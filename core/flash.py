"""Flash messages that belong next to one section of a page.

A redirect to `/accounts/#import` scrolls the page to that section, so a message shown
at the top of the page is out of view. Such messages carry a section tag; a page that
renders them in place takes them out of its top list (`core/templatetags/flash.py`), and
any other page still shows them at the top, so no message is lost.
"""

from __future__ import annotations

from django.contrib.messages.storage.base import Message

_PREFIX = "section-"


def section_tag(section: str) -> str:
    """The `extra_tags` value that places a message in `section`."""
    return _PREFIX + section


def section_of(message: Message) -> str:
    for tag in (message.extra_tags or "").split():
        if tag.startswith(_PREFIX):
            return tag[len(_PREFIX) :]
    return ""
