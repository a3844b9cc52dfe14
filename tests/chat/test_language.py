"""The chat speaks the person's language over the socket too: refusals, a failed answer's
error, the tool chips live and on a reload; what the model reads stays English."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from channels.db import database_sync_to_async
from django.test import Client
from django.urls import reverse

from accounts.models import Profile
from devtools.scripted_llm import Fault
from sessions_app.models import Message
from tests.chat.conftest import events_until, settle

pytestmark = pytest.mark.django_db(transaction=True)


def reads(user, language: str) -> None:
    Profile.objects.update_or_create(user=user, defaults={"language": language})


def page_of(user, session_id: str) -> str:
    client = Client()
    client.force_login(user)
    return client.get(reverse("chat_session", args=[session_id])).content.decode()


def test_refusals_on_the_socket_are_in_the_readers_language(
    owner, outsider, scripted, sockets, settings
):
    reads(owner, "zh-hans")
    reads(outsider, "en")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    sockets.login(owner)
    sockets.login(outsider)

    async def refusals(user) -> list[dict]:
        ws = await sockets.open(user)
        replies = []
        for message in (
            {"type": "chat.send", "session": None, "text": "x" * (limit + 1)},
            {"type": "chat.dance"},
        ):
            await ws.send_json_to(message)
            replies.append(await ws.receive_json_from(timeout=5))
        if user == owner:
            # Changed on the Account page while the tab stays open: the next refusal follows.
            await database_sync_to_async(reads)(owner, "en")
            await ws.send_json_to({"type": "chat.dance"})
            replies.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return replies

    chinese = asyncio.run(refusals(owner))
    english = asyncio.run(refusals(outsider))

    assert [r["code"] for r in chinese] == ["message_too_long", "bad_request", "bad_request"]
    assert [r["message"] for r in chinese] == [
        f"这条消息有 {limit + 1:,} 个字符，上限为 {limit:,}。",
        "未知的消息类型 'chat.dance'。",
        "Unknown message type 'chat.dance'.",
    ]
    assert [r["message"] for r in english] == [
        f"The message is {limit + 1:,} characters; the limit is {limit:,}.",
        "Unknown message type 'chat.dance'.",
    ]
    assert not Message.objects.exists()


def test_a_failed_answer_says_why_in_chinese_and_keeps_the_message(owner, scripted, sockets):
    reads(owner, "zh-hans")
    scripted.set_fault(Fault.server_error(retry_after=0.05))
    sockets.login(owner)

    async def scenario() -> list[dict]:
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "Hello model"})
        events = await events_until(ws, "error", timeout=30)
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(scenario())
    error = events[-1]
    assert error["code"] == "llm_server_error"
    assert error["message"].startswith("位于 127.0.0.1:")
    assert "的模型服务器发生服务器错误（HTTP 500）：" in error["message"]
    session_id = events[0]["session"]
    asked, answer = Message.objects.filter(session_id=session_id).order_by("id")
    assert asked.content == "Hello model"
    assert (answer.status, answer.finish_reason) == ("failed", "llm_server_error")
    # On a reload the failed answer keeps its note, in Chinese too.
    assert "没有回答。模型服务器返回了服务器错误（HTTP 5xx）。你的消息已保存。" in page_of(
        owner, session_id
    )


def test_a_tool_chip_is_in_chinese_live_and_on_reload_while_the_model_reads_english(
    owner, scripted, sockets
):
    reads(owner, "zh-hans")
    scripted.enqueue(
        tool_calls=[
            {
                "name": "memory",
                "arguments": {"action": "add", "target": "user", "content": "Likes green tea"},
            }
        ]
    )
    scripted.enqueue(reply="Noted.")
    sockets.login(owner)

    async def scenario() -> list[dict]:
        ws = await sockets.open(owner)
        await ws.send_json_to({"type": "chat.send", "session": None, "text": "I like tea."})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    events = asyncio.run(scenario())
    chip = next(e for e in events if e["type"] == "tool.result")["summary"]
    assert chip.startswith("关于你：条目已添加。（") and chip.endswith("）")
    assert chip in page_of(owner, events[0]["session"])
    # What the model reads: the stored result, English, sent back to it as it is.
    stored = Message.objects.get(session_id=events[0]["session"], role="tool").content
    assert json.loads(stored)["message"] == "Entry added."
    assert not re.search(r"[\u4e00-\u9fff]", stored)
    sent_back = scripted.requests[1]["messages"][-1]
    assert (sent_back["role"], sent_back["content"]) == ("tool", stored)
