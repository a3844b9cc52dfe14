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

    def stored(self) -> Stored:
        """The message to keep and show later in its reader's language (:func:`stored`)."""
        return stored(self._message)

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


#: Django's lazy string of `_format`: str's methods (``in``, ``startswith``, ``%`` …), each
#: evaluated in the language active when it is used.
_LazyFormat = type(lazy(_format, str)("", {}))


class _Formatted(_LazyFormat):
    """What :func:`lazy_format` returns: a marked template and its values, formatted in the
    language active when it is shown. It compares and hashes as its English wording,
    whatever the language, so it can count things (an import's skipped kinds)."""

    def __init__(self, template: Text, values: dict[str, Any]) -> None:
        super().__init__((template, values), {})
        self.template, self.values = template, values

    def __eq__(self, other: object) -> bool:
        return english(self) == (english(other) if isinstance(other, Promise) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(english(self))


def lazy_format(template: Text, /, **values: Any) -> Text:
    """``lazy_format(gettext_lazy("No such %(what)s."), what=…)``: a message with values that
    is translated when it is shown, not when it is raised (``%`` on a lazy string is not).
    A value may itself be marked (``gettext_lazy``, ``lazy_format``)."""
    return _Formatted(template, values)


#: A message kept in the database to be shown later, maybe in another language than the one
#: active when it was written (a background job's error, an import's summary): plain text,
#: shown as it is, or ``{"text": English template, "values": {…}}`` (values: numbers, text,
#: or kept messages themselves), translated by the catalog when it is shown.
Stored = str | dict[str, Any]


def stored(text: Text) -> Stored:
    """`text` as JSON to keep (see :data:`Stored`); its wording is looked up in the catalog
    again when :func:`restored`, so mark it with ``gettext_lazy`` (``lazy_format``)."""
    if isinstance(text, _Formatted):
        return {
            "text": english(text.template),
            "values": {k: _stored_value(v) for k, v in text.values.items()},
        }
    if isinstance(text, Promise):
        return {"text": english(text)}
    return text


def _stored_value(value: Any) -> Any:
    if isinstance(value, Promise):
        return stored(value)
    return value if isinstance(value, str | int | float) else str(value)


def restored(value: Stored) -> Text:
    """A kept message (:func:`stored`, or plain text written before) to show: ``str()`` of
    it is in the active language."""
    if not isinstance(value, dict):
        return "" if value is None else str(value)
    if not value.get("text"):
        return ""  # the catalog's header is filed under the empty text
    template = gettext_lazy(value["text"])
    if "values" not in value:
        return template
    return lazy_format(
        template,
        **{k: restored(v) if isinstance(v, dict) else v for k, v in value["values"].items()},
    )


class NotFound(ServiceError):
    """Raised by `access_*` selectors; the same for missing rows and other users' rows."""

    status_code = 404

    def __init__(self, what: Text) -> None:
        super().__init__("not_found", lazy_format(gettext_lazy("No such %(what)s."), what=what))
