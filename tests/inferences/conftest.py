"""Fixtures for the inference tests: conversations, inferences, the scripted model's
extractor rule; the scripted model, websockets and workers are the shared fixtures."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from devtools.scripted_llm import ScriptedLLM
from memory.inferences.extraction import SYSTEM_PROMPT
from memory.models import Inference
from tests.chat.conftest import CHAT_TURN_SETTINGS, sockets  # noqa: F401
from tests.factories import InferenceFactory, conversation_with

_LINE = re.compile(r"^\[(\d+)\] (USER|ASSISTANT): ", re.MULTILINE)


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# A session with alternating user/assistant messages (the texts are the user's).
conversation = conversation_with


def make_inference(owner: Any, statement: str, **fields: Any) -> Inference:
    return InferenceFactory(owner=owner, statement=statement, **fields)


def is_extraction(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == SYSTEM_PROMPT


def window_ids(body: dict[str, Any]) -> list[tuple[int, str]]:
    """(message id, speaker) of the conversation lines the extractor was shown."""
    return [(int(m.group(1)), m.group(2)) for m in _LINE.finditer(body["messages"][1]["content"])]


class Extractor:
    """Answers extraction requests with the `items` set by the test; an item's evidence
    defaults to the first USER message of the window shown."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.raw: str | None = None

    def reply(self, body: dict[str, Any]) -> str:
        if self.raw is not None:
            return self.raw
        users = [pk for pk, who in window_ids(body) if who == "USER"]
        items = []
        for item in self.items:
            item = dict(item)
            if "evidence" not in item:
                item["evidence"] = users[:1]
            elif callable(item["evidence"]):
                item["evidence"] = item["evidence"](body)
            item.setdefault("category", "preference")
            item.setdefault("confidence", 0.8)
            items.append(item)
        return json.dumps({"inferences": items})


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    return dict(CHAT_TURN_SETTINGS)


@pytest.fixture(scope="module")
def scripted_worker_env() -> dict[str, str]:
    return {"HERMES_MEMORY_PROVIDER": "local"}


@pytest.fixture
def extractor(scripted: ScriptedLLM) -> Extractor:
    """The scripted model answers extraction requests from this object's `items`."""
    ex = Extractor()
    scripted.add_rule(is_extraction, reply=ex.reply)
    return ex


@pytest.fixture
def local_provider(settings: Any) -> None:
    settings.HERMES_MEMORY_PROVIDER = "local"
    settings.HERMES_MEMORY_PROVIDERS = {}


def extraction_requests(server: ScriptedLLM) -> list[dict[str, Any]]:
    return [r for r in server.requests if is_extraction(r)]
