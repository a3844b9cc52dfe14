"""The OpenAI wire format: reading a Chat Completions request, and the error objects,
completions and chunks sent back. No database here; views.py calls it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import JsonResponse

from core.exceptions import ServiceError

#: The header (request and response) that names the conversation; see README.
CONVERSATION_HEADER = "X-Hermes-Conversation"

_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    409: "conflict_error",
    429: "insufficient_quota",
}
#: Our service codes that are not a 400 in OpenAI's terms.
_STATUS = {"turn_in_progress": 409, "compressing": 409, "not_found": 404}
#: Why a turn's answer failed (sessions_app.agent.llm.ErrorCode) → the HTTP status.
_LLM_STATUS = {
    "rate_limited": 429,
    "context_too_long": 400,
    "llm_timeout": 504,
    "internal_error": 500,
}


class ApiError(Exception):
    """A request refused with an OpenAI-style error object."""

    def __init__(self, status: int, message: str, *, code: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.param = status, message, code, param

    @classmethod
    def of_service(cls, exc: ServiceError) -> ApiError:
        status = _STATUS.get(exc.code, exc.status_code)
        return cls(status, exc.message, code=exc.code)

    @classmethod
    def of_turn(cls, code: str, message: str) -> ApiError:
        return cls(_LLM_STATUS.get(code, 502), message, code=code)

    def body(self) -> dict[str, Any]:
        kind = _TYPES.get(self.status, "api_error" if self.status >= 500 else "")
        return {
            "error": {
                "message": self.message,
                "type": kind or "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body(), status=self.status)
        if self.status == 401:
            response["WWW-Authenticate"] = "Bearer"
        return response


@dataclass(frozen=True)
class ChatRequest:
    model: str
    #: The client's conversation without system messages: (role, text), ending with "user".
    messages: list[tuple[str, str]]
    stream: bool
    include_usage: bool
    conversation_id: str | None


def _bad(message: str, param: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def _text(content: Any, param: str) -> str:
    """A message's text: a string, or a list of text parts (joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise _bad("Only text content is supported.", param, "unsupported_content")
            if not isinstance(part.get("text"), str):
                raise _bad("A text part needs a string `text`.", param)
            parts.append(part["text"])
        return "".join(parts)
    raise _bad("`content` must be a string or a list of text parts.", param)


def _messages(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise _bad("`messages` must be a non-empty list.", "messages", "empty_messages")
    out: list[tuple[str, str]] = []
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    for i, message in enumerate(raw):
        param = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _bad("Each message must be an object.", param)
        role = message.get("role")
        if role in ("tool", "function") or message.get("tool_calls"):
            raise _bad(
                "Client-side tools are not supported: the agent's own tools run on the server.",
                f"{param}.role",
                "invalid_role",
            )
        if role not in ("system", "developer", "user", "assistant"):
            raise _bad(f"Unknown role {role!r}.", f"{param}.role", "invalid_role")
        text = _text(message.get("content"), f"{param}.content")
        if role == "user" and len(text) > limit:
            raise _bad(
                f"The message is {len(text):,} characters; the limit is {limit:,}.",
                f"{param}.content",
                "message_too_long",
            )
        # The agent's own system prompt (frozen per conversation) is what the model gets;
        # a client's system or developer message is not sent (see README).
        if role in ("user", "assistant"):
            out.append((role, text))
    if not out or out[-1][0] != "user" or not out[-1][1].strip():
        raise _bad(
            "The last message must be a non-empty user message.", "messages", "empty_message"
        )
    return out


def check_request(body: bytes) -> ChatRequest:
    try:
        data = json.loads(body or b"null")
    except ValueError:
        raise _bad("The body must be JSON.", "body") from None
    if not isinstance(data, dict):
        raise _bad("The body must be a JSON object.", "body")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("`model` names a model from GET /v1/models.", "model")
    if data.get("tools") or data.get("functions"):
        raise _bad(
            "Client-side tools are not supported: the agent's own tools run on the server.",
            "tools",
            "unsupported_parameter",
        )
    if data.get("n") not in (None, 1):
        raise _bad("Only one choice (`n` = 1) is answered.", "n", "unsupported_parameter")
    options = data.get("stream_options") or {}
    metadata = data.get("metadata") or {}
    conversation = metadata.get("conversation_id") if isinstance(metadata, dict) else None
    if conversation is not None and not isinstance(conversation, str):
        raise _bad("`metadata.conversation_id` must be a string.", "metadata.conversation_id")
    return ChatRequest(
        model=model,
        messages=_messages(data.get("messages")),
        stream=data.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        conversation_id=conversation or None,
    )


def usage_object(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


@dataclass(frozen=True)
class Reply:
    """What every completion and chunk of one answer share."""

    id: str
    created: int
    model: str
    conversation_id: str

    def completion(self, text: str, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            **self._head("chat.completion"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }

    def chunk(
        self, delta: dict[str, Any], finish: str | None = None, *, with_usage: bool = False
    ) -> str:
        chunk: dict[str, Any] = {
            **self._head("chat.completion.chunk"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if with_usage:
            chunk["usage"] = None
        return sse(chunk)

    def usage_chunk(self, usage: dict[str, Any]) -> str:
        return sse({**self._head("chat.completion.chunk"), "choices": [], "usage": usage})

    def _head(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "conversation_id": self.conversation_id,
        }


def sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


SSE_DONE = "data: [DONE]\n\n"
#: An SSE comment: keeps proxies from closing a stream while a tool runs.
SSE_KEEPALIVE = ": keep-alive\n\n"
