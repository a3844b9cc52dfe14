"""The one error type services raise; the API, the websocket and the tools all render it."""

from __future__ import annotations

from typing import Any

from django.utils import translation
from django.utils.functional import Promise, lazy
from django.utils.translation import gettext_lazy

#: A message: plain text, or marked for translation and rendered when shown.
Text = str | Promise


class ServiceError(Exception):
    """A refused operation with a stable machine-readable `code` and a human message.

    The message is written once, marked for translation (``gettext_lazy``, or
    :func:`lazy_format` when it carries values): :attr:`message` is its English wording,
    what the agent reads in a tool result and what logs keep; :attr:`text` is the same
    sentence in the active language, what a page, a flash, the chat socket or the API
    shows a person (render it inside ``speaking_to(user)`` outside a request). A plain
    ``str`` message is both.

    `details` carries extra context for the caller (current entries, usage, …) and is
    rendered next to code and message in API errors and tool results.
    """

    status_code = 400

    def __init__(self, code: str, message: Text, *, status: int | None = None, **details: Any):
        self.code = code
        self._message = message
        self.message = english(message)
        super().__init__(self.message)
        self.details = details
        if status is not None:
            self.status_code = status

    @property
    def text(self) -> str:
        """The message in the active language."""
        return str(self._message)

    def as_dict(self) -> dict[str, Any]:
        """The API's error body: the code for programs, the message for the person."""
        return {"code": self.code, "message": self.text, **self.details}


def english(text: Text) -> str:
    """A marked message in the source language, whatever language is active."""
    if not isinstance(text, Promise):
        return text
    with translation.override("en"):
        return str(text)


def _format(template: Text, values: dict[str, Any]) -> str:
    return str(template) % {k: str(v) if isinstance(v, Promise) else v for k, v in values.items()}


#: ``lazy_format(gettext_lazy("No such %(what)s."), what=…)``: a message with values that
#: is translated when it is shown, not when it is raised (``%`` on a lazy string is not).
_lazy_format = lazy(_format, str)


def lazy_format(template: Text, /, **values: Any) -> Text:
    return _lazy_format(template, values)


class NotFound(ServiceError):
    """Raised by `access_*` selectors; the same for missing rows and other users' rows."""

    status_code = 404

    def __init__(self, what: Text) -> None:
        super().__init__("not_found", lazy_format(gettext_lazy("No such %(what)s."), what=what))
