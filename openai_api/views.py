"""`GET /v1/models` and `POST /v1/chat/completions`: Hermes Web as an OpenAI-compatible
model, authenticated with personal API tokens (`Authorization: Bearer hw_…`).

A completion is an ordinary chat turn (sessions_app.agent.runner: the frozen prompt, the
recall fence, the server-side tools, usage, quotas, the after-turn hooks); this module only
picks the conversation (conversations.py) and translates the turn's events into an OpenAI
answer. The turn runs as its own task: a client that disconnects mid-answer loses nothing,
the answer is finished and saved as in the chat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed

from accounts.authentication import ApiTokenAuthentication, ScopeMissing
from accounts.models import TokenScope
from core.exceptions import ServiceError
from model_catalog.selectors import ModelChoice, choice_for, enabled_choices
from sessions_app.agent import runner

from .conversations import ANSWER_SEPARATOR, TurnPlan, conversation_plan, turn_usage
from .wire import (
    CONVERSATION_HEADER,
    SSE_DONE,
    SSE_KEEPALIVE,
    ApiError,
    ChatRequest,
    Reply,
    check_request,
    sse,
    usage_object,
)

#: Seconds of silence (a slow tool) after which a stream sends an SSE comment.
KEEPALIVE_SECONDS = 15


def _authenticate(request: HttpRequest) -> Any:
    try:
        found = ApiTokenAuthentication(TokenScope.CHAT).authenticate(request)
    except ScopeMissing as exc:
        raise ApiError(403, str(exc.detail), code="insufficient_scope") from None
    except AuthenticationFailed as exc:
        raise ApiError(401, str(exc.detail), code="invalid_api_key") from None
    if found is None:
        raise ApiError(
            401, "Send a personal API token as `Authorization: Bearer <token>`.", code="missing_key"
        )
    return found[0]


def _model_object(choice: ModelChoice) -> dict[str, Any]:
    return {
        "id": choice.ref,
        "object": "model",
        "created": 0,
        "owned_by": "hermes-web",
        "name": choice.name,
    }


def _models(request: HttpRequest, model: str | None) -> dict[str, Any]:
    _authenticate(request)
    if model is None:
        return {"object": "list", "data": [_model_object(c) for c in enabled_choices()]}
    choice = choice_for(model)
    if choice is None:
        raise _unknown_model(model)
    return _model_object(choice)


def _unknown_model(model: str) -> ApiError:
    return ApiError(
        404,
        f"The model {model!r} does not exist or is not enabled; GET /v1/models lists them.",
        code="model_not_found",
        param="model",
    )


async def _models_response(request: HttpRequest, model: str | None = None) -> HttpResponse:
    if request.method != "GET":
        return ApiError(405, "Use GET.", code="method_not_allowed").response()
    try:
        return JsonResponse(await sync_to_async(_models)(request, model))
    except ApiError as exc:
        return exc.response()


async def models_list(request: HttpRequest) -> HttpResponse:
    return await _models_response(request)


async def model_detail(request: HttpRequest, model: str) -> HttpResponse:
    return await _models_response(request, model)


@dataclass(frozen=True)
class _Begun:
    user: Any
    chat: ChatRequest
    choice: ModelChoice
    plan: TurnPlan


def _begin(request: HttpRequest) -> _Begun:
    """Who asks, what they ask, and where it goes (creating the conversation if new)."""
    user = _authenticate(request)
    try:
        body = request.body
    except RequestDataTooBig:
        raise ApiError(400, "The request is too large.", code="request_too_large") from None
    chat = check_request(body)
    choice = choice_for(chat.model)
    if choice is None:
        raise _unknown_model(chat.model)
    conversation = request.headers.get(CONVERSATION_HEADER) or chat.conversation_id
    plan = conversation_plan(
        user=user, messages=chat.messages, conversation_id=conversation, choice=choice
    )
    return _Begun(user, chat, choice, plan)


@csrf_exempt
async def chat_completions(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        return ApiError(405, "Use POST.", code="method_not_allowed").response()
    try:
        begun = await sync_to_async(_begin)(request)
        plan = begun.plan
        start = await runner.begin_turn(
            user=begun.user,
            session_id=plan.session_id,
            text=plan.text,
            regenerate=plan.regenerate,
            message_id=plan.message_id,
            model=begun.choice.ref,
        )
    except ApiError as exc:
        return exc.response()
    except ServiceError as exc:
        return ApiError.of_service(exc).response()
    events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    task = runner.launch_turn(start, user=begun.user, listener=events.put_nowait)
    task.add_done_callback(lambda _task: events.put_nowait(None))
    answer = _Answer(events, start.session.pk, start.assistant_message.id)
    reply = Reply(
        id=f"chatcmpl-{start.assistant_message.id}",
        created=int(time.time()),
        model=begun.chat.model,
        conversation_id=start.session.pk,
    )
    if begun.chat.stream:
        response = StreamingHttpResponse(
            _stream(answer, reply, include_usage=begun.chat.include_usage),
            content_type="text/event-stream",
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        text = "".join([piece async for piece in answer.pieces()])
        if answer.error is not None:
            response = answer.error.response()
        else:
            response = JsonResponse(reply.completion(text, await answer.usage()))
    response[CONVERSATION_HEADER] = start.session.pk
    return response


class _Answer:
    """Reads one turn's events: the answer's text as the client sees it, then how it ended."""

    def __init__(self, events: asyncio.Queue[dict[str, Any] | None], session_id: str, first: int):
        self.events, self.session_id, self.first_id = events, session_id, first
        self.last_id: int | None = None
        self.error: ApiError | None = None

    async def pieces(self, *, keepalive: float | None = None) -> AsyncIterator[str]:
        """The answer's text as it streams ("" after `keepalive` seconds of silence). The
        texts of messages before and after tool calls are joined as conversations.py
        reads them back. Afterwards `error` says if the answer failed."""
        status, separate, seen = "", False, False
        while True:
            try:
                event = await asyncio.wait_for(self.events.get(), keepalive)
            except TimeoutError:
                yield ""
                continue
            if event is None:  # the turn task ended
                break
            kind = event["type"]
            if kind == "assistant.delta" and event["text"]:
                yield (ANSWER_SEPARATOR if separate else "") + event["text"]
                separate, seen = False, True
            elif kind == "tool.call":
                separate = seen
            elif kind == "assistant.done":
                status, self.last_id = event["status"], event["message_id"]
                if status == "complete":
                    return
            elif kind == "error":
                self.error = ApiError.of_turn(event["code"], event["message"])
                return
        if status != "complete":
            self.error = ApiError(
                502,
                "The answer was stopped before it ended; what was written is saved in the "
                "conversation.",
                code="interrupted",
            )

    async def usage(self) -> dict[str, Any]:
        totals = await sync_to_async(turn_usage)(
            session_id=self.session_id, first_id=self.first_id, last_id=self.last_id
        )
        return usage_object(totals["prompt"], totals["completion"], totals["cached"])


async def _stream(answer: _Answer, reply: Reply, *, include_usage: bool) -> AsyncIterator[str]:
    """The answer as `chat.completion.chunk` events. Cancelled when the client goes away;
    the turn is not (it is its own task)."""
    yield reply.chunk({"role": "assistant", "content": ""}, with_usage=include_usage)
    async for piece in answer.pieces(keepalive=KEEPALIVE_SECONDS):
        if piece:
            yield reply.chunk({"content": piece}, with_usage=include_usage)
        else:
            yield SSE_KEEPALIVE
    if answer.error is not None:
        # The openai client raises an APIError for a `data:` object with an "error".
        yield sse(answer.error.body())
        return
    yield reply.chunk({}, "stop", with_usage=include_usage)
    if include_usage:
        yield reply.usage_chunk(await answer.usage())
    yield SSE_DONE
