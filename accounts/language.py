"""The language the site speaks to a person outside a page request: mail, notices sent over
the websocket, background work reporting back. The Account page's choice, else what the
person's browser last asked for, else the deployment's default."""

from __future__ import annotations

from contextlib import AbstractContextManager

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import translation
from django.utils.functional import Promise

from .models import Profile


def person_language(user_id: int | None) -> str:
    if user_id is None:
        return settings.LANGUAGE_CODE
    chosen, seen = Profile.objects.filter(user_id=user_id).values_list(
        "language", "browser_language"
    ).first() or ("", "")
    return chosen or seen or settings.LANGUAGE_CODE


def speaking_to(user_id: int | None) -> AbstractContextManager[None]:
    """`with speaking_to(user.pk): ...` renders gettext strings in that person's language."""
    return translation.override(person_language(user_id))


async def aspeaking_to(user_id: int | None) -> AbstractContextManager[None]:
    """The same for async code: the profile is read off the event loop."""
    return translation.override(await sync_to_async(person_language)(user_id))


async def asaid_to(user_id: int | None, text: str | Promise) -> str:
    """`text` (marked for translation) as the person `user_id` reads it, for async code."""
    with await aspeaking_to(user_id):
        return str(text)


def reads_english() -> bool:
    """Whether the active language is English, the language the services speak: a page in
    English shows their messages word for word, any other its translated wording."""
    return (translation.get_language() or "en").split("-")[0] == "en"
