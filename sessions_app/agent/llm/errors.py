"""The one error callers see (:class:`LLMError`), its codes, and the mapping from the
openai SDK's and the HTTP transport's exceptions to it.

Messages are safe to show to the user: the API key (and anything shaped like a key) is
redacted, and the server is named by host and port only. They are marked for translation:
``message`` is the English wording logs and API clients keep, ``text`` the person's (the
server's own words inside stay as it said them).
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Mapping
from contextvars import ContextVar
from enum import StrEnum
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import openai
from django.conf import settings
from django.utils.translation import gettext_lazy as _
from openai import AsyncOpenAI

from core.exceptions import Text, english, lazy_format

try:  # openai>=3 runs on httpx2; older SDKs on httpx. Catch raw errors from both.
    import httpx2

    RAW_HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
    _RAW_TIMEOUTS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
except ImportError:  # pragma: no cover - depends on the installed SDK
    RAW_HTTP_ERRORS = (httpx.HTTPError,)
    _RAW_TIMEOUTS = (httpx.TimeoutException,)

#: Everything a call may raise before it is mapped to an :class:`LLMError`.
CALL_ERRORS: Final[tuple[type[BaseException], ...]] = (openai.OpenAIError, *RAW_HTTP_ERRORS)

logger = logging.getLogger(__name__)

_MAX_DETAIL = 300
_CONTEXT_RE = re.compile(
    r"context[_ ]length|context window|context size|maximum context|too many tokens"
    r"|prompt is too long|exceed_context_size|reduce the length",
    re.IGNORECASE,
)
# The key of the client whose error is being mapped (each model entry has its own).
_CALL_KEY: ContextVar[str] = ContextVar("llm_call_key", default="")
_SECRET_RE = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-*.]{4,}")


class ErrorCode(StrEnum):
    """Why a model call failed; the value is the ``code`` of the websocket ``error`` event."""

    #: Any other failure to get an answer (DNS, TLS, a malformed response, an empty reply).
    LLM_UNAVAILABLE = "llm_unavailable"
    #: Nothing accepts connections at the configured address (the server is not running).
    LLM_REFUSED = "llm_refused"
    #: Connecting, or waiting for the next bytes, took longer than the configured timeout.
    LLM_TIMEOUT = "llm_timeout"
    #: The server answered with HTTP 5xx (the status is on the error).
    LLM_SERVER_ERROR = "llm_server_error"
    RATE_LIMITED = "rate_limited"
    BAD_REQUEST = "bad_request"
    CONTEXT_TOO_LONG = "context_too_long"
    AUTH_FAILED = "auth_failed"
    INTERRUPTED = "interrupted"


class LLMError(Exception):
    """Any failure talking to the model; ``code`` is an :class:`ErrorCode`.

    ``message`` is the English wording (logs, API clients); ``text`` the same in the active
    language, what the chat shows a person (see core.exceptions.ServiceError).
    ``partial_text`` holds the text streamed before a mid-stream failure so it can be saved.
    ``retry_after`` is the server-suggested wait in seconds (rate limits), if any.
    """

    def __init__(
        self,
        code: ErrorCode | str,
        message: Text,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        partial_text: str = "",
    ) -> None:
        self.code = ErrorCode(code)  # a code outside the enum is a bug: fail loudly
        self._message = message
        self.message = english(message)
        super().__init__(self.message)
        self.retry_after = retry_after
        self.status = status
        self.partial_text = partial_text

    @property
    def text(self) -> str:
        """The message in the active language."""
        return str(self._message)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat default exception pickling (Celery results, channels).
        # The message travels still marked (a lazy string pickles as its msgid and values):
        # rendered where it is shown, English wherever `message` is read.
        return (
            _rebuild_error,
            (str(self.code), self._message, self.retry_after, self.status, self.partial_text),
        )

    def __repr__(self) -> str:
        return (
            f"LLMError(code={str(self.code)!r}, message={self.message!r}, status={self.status!r})"
        )


def _rebuild_error(
    code: str, message: Text, retry_after: float | None, status: int | None, partial: str
) -> LLMError:
    return LLMError(code, message, retry_after=retry_after, status=status, partial_text=partial)


def not_configured() -> LLMError:
    return LLMError(
        ErrorCode.LLM_UNAVAILABLE,
        _(
            "The language model is not configured (set HERMES_MODEL and OPENAI_BASE_URL "
            "or OPENAI_API_KEY)."
        ),
    )


# --- mapping ---------------------------------------------------------------------------------


def map_error(
    exc: BaseException, *, api: AsyncOpenAI, mid_stream: bool = False, partial_text: str = ""
) -> LLMError:
    """The :class:`LLMError` for one of :data:`CALL_ERRORS` raised while talking to ``api``."""
    reset = _CALL_KEY.set(str(api.api_key or ""))
    try:
        error = _classify(exc, api=api, mid_stream=mid_stream)
    finally:
        _CALL_KEY.reset(reset)
    error.partial_text = partial_text
    logger.warning(
        "LLM call failed: %s (status=%s, mid_stream=%s, partial_chars=%d)",
        error.code,
        error.status,
        mid_stream,
        len(partial_text),
    )
    return error


def _redact(text: str) -> str:
    key = _CALL_KEY.get()
    if len(key) >= 4:
        text = text.replace(key, "***")
    # Providers echo a masked key ("sk-abc***xyz") on 401s; even that stays out of our messages.
    return _SECRET_RE.sub("***", text)


def _server_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    message: Any = None
    if isinstance(body, Mapping):
        message = body.get("message")
        if message is None and isinstance(body.get("error"), Mapping):
            message = body["error"].get("message")
    if not isinstance(message, str) or not message:
        message = exc.message or ""
    message = _redact(" ".join(message.split()))
    return message[:_MAX_DETAIL] + ("…" if len(message) > _MAX_DETAIL else "")


def _error_code_of(exc: openai.APIError) -> str:
    code = getattr(exc, "code", None)
    if code:
        return str(code)
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error") if isinstance(body.get("error"), Mapping) else body
        for key in ("code", "type"):
            value = inner.get(key)
            if value:
                return str(value)
    return ""


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def _server_label(api: AsyncOpenAI) -> str:
    # Host and port only: a base URL could carry credentials in its userinfo or query.
    try:
        parts = urlsplit(str(api.base_url))
        return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"
    except ValueError:
        return "the model server"


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions behind it (``raise ... from``), outermost first: the SDK's
    wrapper hides what the transport actually met (refused, reset, unknown host)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _refused(exc: BaseException) -> bool:
    return any(isinstance(e, ConnectionRefusedError) for e in _causes(exc))


def _connect_timeout(exc: BaseException) -> bool:
    # httpx and httpx2 both name it ConnectTimeout; the SDK's APITimeoutError hides which.
    return any(type(e).__name__ == "ConnectTimeout" for e in _causes(exc))


def _connection_failed(exc: BaseException, *, mid_stream: bool, server: str) -> LLMError:
    if mid_stream:
        return LLMError(ErrorCode.INTERRUPTED, _("The connection to the model dropped mid-answer."))
    if _refused(exc):
        return LLMError(
            ErrorCode.LLM_REFUSED,
            lazy_format(
                _("The model server at %(server)s refused the connection: is it running?"),
                server=server,
            ),
        )
    root = _causes(exc)[-1]
    reason = _redact(" ".join(str(root).split()))[:_MAX_DETAIL] or type(root).__name__
    return LLMError(
        ErrorCode.LLM_UNAVAILABLE,
        lazy_format(
            _("The connection to the model server at %(server)s failed: %(reason)s"),
            server=server,
            reason=reason,
        ),
    )


def _timed_out(exc: BaseException, *, mid_stream: bool, server: str) -> LLMError:
    if _connect_timeout(exc):
        connect = float(settings.HERMES_LLM_CONNECT_TIMEOUT)
        return LLMError(
            ErrorCode.LLM_TIMEOUT,
            lazy_format(
                _(
                    "The model server at %(server)s did not accept the connection within "
                    "%(seconds)s s."
                ),
                server=server,
                seconds=f"{connect:g}",
            ),
        )
    read = f"{float(settings.HERMES_LLM_READ_TIMEOUT):g}"
    if mid_stream:
        said = _(
            "The model server at %(server)s timed out: no reply mid-answer within %(seconds)s s."
        )
    else:
        said = _(
            "The model server at %(server)s timed out: no reply to the request within "
            "%(seconds)s s."
        )
    return LLMError(ErrorCode.LLM_TIMEOUT, lazy_format(said, server=server, seconds=read))


def _classify(exc: BaseException, *, api: AsyncOpenAI, mid_stream: bool) -> LLMError:
    server = _server_label(api)
    if isinstance(exc, (openai.APITimeoutError, *_RAW_TIMEOUTS)):
        return _timed_out(exc, mid_stream=mid_stream, server=server)
    if isinstance(exc, openai.APIConnectionError):
        return _connection_failed(exc, mid_stream=mid_stream, server=server)
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc, server)
    if isinstance(exc, openai.APIError):
        # An error event inside an otherwise healthy stream, or an unparseable response.
        detail = _redact(" ".join((exc.message or "").split()))[:_MAX_DETAIL]
        if mid_stream:
            return LLMError(
                ErrorCode.INTERRUPTED,
                lazy_format(_("The model stopped mid-answer: %(detail)s"), detail=detail),
            )
        return LLMError(
            ErrorCode.LLM_UNAVAILABLE,
            lazy_format(
                _("The model server at %(server)s failed: %(detail)s"), server=server, detail=detail
            ),
        )
    if isinstance(exc, RAW_HTTP_ERRORS):
        return _connection_failed(exc, mid_stream=mid_stream, server=server)
    # Remaining OpenAIErrors are client-side set-up problems (e.g. a malformed base URL).
    return LLMError(
        ErrorCode.LLM_UNAVAILABLE,
        lazy_format(_("The model client failed: %(error)s."), error=type(exc).__name__),
    )


def _classify_status(exc: openai.APIStatusError, server: str) -> LLMError:
    status = exc.status_code
    detail = _server_detail(exc)
    if status == 429:
        return LLMError(
            ErrorCode.RATE_LIMITED,
            lazy_format(
                _("The model provider is rate limiting requests: %(detail)s"), detail=detail
            ),
            retry_after=_retry_after(exc.response),
            status=status,
        )
    if status in (401, 403):
        return LLMError(
            ErrorCode.AUTH_FAILED,
            lazy_format(
                _("The model server rejected our credentials (HTTP %(status)s): %(detail)s"),
                status=status,
                detail=detail,
            ),
            status=status,
        )
    if status in (400, 404, 413, 422):
        if _CONTEXT_RE.search(_error_code_of(exc)) or _CONTEXT_RE.search(detail):
            return LLMError(
                ErrorCode.CONTEXT_TOO_LONG,
                lazy_format(
                    _("The conversation is too long for the model's context window: %(detail)s"),
                    detail=detail,
                ),
                status=status,
            )
        return LLMError(
            ErrorCode.BAD_REQUEST,
            lazy_format(_("The model server rejected the request: %(detail)s"), detail=detail),
            status=status,
        )
    if status >= 500:
        return LLMError(
            ErrorCode.LLM_SERVER_ERROR,
            lazy_format(
                _(
                    "The model server at %(server)s failed with a server error "
                    "(HTTP %(status)s): %(detail)s"
                ),
                server=server,
                status=status,
                detail=detail,
            ),
            status=status,
        )
    if status in (408, 409):  # retried by the SDK like 5xx, but not the server failing
        return LLMError(
            ErrorCode.LLM_UNAVAILABLE,
            lazy_format(
                _(
                    "The model server at %(server)s gave up on the request "
                    "(HTTP %(status)s): %(detail)s"
                ),
                server=server,
                status=status,
                detail=detail,
            ),
            status=status,
        )
    return LLMError(
        ErrorCode.BAD_REQUEST,
        lazy_format(
            _("The model server rejected the request (HTTP %(status)s): %(detail)s"),
            status=status,
            detail=detail,
        ),
        status=status,
    )
