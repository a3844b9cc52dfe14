"""The caps of imported fields (Hermes state.db and ChatGPT/Claude exports alike) and how
an import's report words a cut: every long text is cut to the longest message the chat
accepts, ids and labels to their column sizes."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext_lazy

from core.exceptions import Text, lazy_format
from sessions_app.titles import TITLE_MAX

#: Caps in characters for what is not a message text (those use the chat limit).
SHORT_MAX = 200
CONFIG_MAX = 10_000
PROMPT_MAX = 100_000


def text_max() -> int:
    """The cap of every long imported text: the longest message the chat accepts."""
    return settings.HERMES_MAX_MESSAGE_CHARS


def read_budget() -> int:
    """Characters one import may read from a state.db: four times the largest upload, as
    for the zip's unpacked size."""
    return 4 * settings.HERMES_IMPORT_MAX_MB * 1024 * 1024


def reported_cuts() -> dict[str, Text]:
    """The fields whose cuts the report mentions, and how it words them; the others are ids
    and labels, cut to their column sizes as before."""
    chat = f"{text_max():,}"
    reasoning = lazy_format(
        gettext_lazy("reasoning texts cut to %(max)s characters (the chat's message limit)"),
        max=chat,
    )
    prompts = lazy_format(
        gettext_lazy("system prompts cut to %(max)s characters"), max=f"{PROMPT_MAX:,}"
    )
    return {
        "content": lazy_format(
            gettext_lazy("message texts cut to %(max)s characters (the chat's message limit)"),
            max=chat,
        ),
        "tool_calls": lazy_format(
            gettext_lazy("tool calls longer than %(max)s characters, dropped"), max=chat
        ),
        "reasoning": reasoning,
        "reasoning_content": reasoning,
        "x_context": lazy_format(
            gettext_lazy(
                "memory context blocks cut to %(max)s characters (the chat's message limit)"
            ),
            max=chat,
        ),
        "title": lazy_format(gettext_lazy("titles cut to %(max)s characters"), max=TITLE_MAX),
        "prompt": prompts,
        "system_prompt": prompts,
        "value": lazy_format(
            gettext_lazy(
                "custom instructions cut to %(max)s characters (the chat's message limit)"
            ),
            max=chat,
        ),
    }
