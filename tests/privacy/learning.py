"""The scripted reviewer for the learning tests: it answers the learning review's requests
(over real HTTP, through the scripted OpenAI-compatible server) by saving the notes a test
asks for with the memory tool, then finishing; and helpers to build exports whose
conversations are told apart by markers."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from devtools.scripted_llm import ScriptedLLM
from memory.inferences.extraction import SYSTEM_PROMPT as EXTRACTOR_PROMPT
from privacy.chat_learning.run import HISTORY_INTRO

INTRO_START = HISTORY_INTRO.split("(", 1)[0]
_LINE = re.compile(r"^\[(\d+)\] (USER|ASSISTANT): ", re.MULTILINE)


def is_review(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return len(messages) > 1 and str(messages[1].get("content") or "").startswith(INTRO_START)


def is_extraction(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("content") == EXTRACTOR_PROMPT


def excerpt(body: dict[str, Any]) -> str:
    return str(body["messages"][1]["content"])


def user_ids(body: dict[str, Any]) -> list[int]:
    """Ids of the person's messages in the excerpt shown (review or extraction)."""
    text = excerpt(body)
    return [int(m.group(1)) for m in _LINE.finditer(text) if m.group(2) == "USER"]


class Reviewer:
    """Saves `notes(excerpt)` (texts for the "user" list) in one memory call on a batch's
    first request, then answers; with nothing to save, answers at once."""

    def __init__(
        self, server: ScriptedLLM, notes: Callable[[str], list[str]] | None = None
    ) -> None:
        self.notes = notes or (lambda text: [])
        server.add_rule(self._first, tool_calls=self._calls)
        server.add_rule(is_review, reply="Saved what this history shows.")

    def _first(self, body: dict[str, Any]) -> bool:
        first = not any(m.get("role") == "tool" for m in body["messages"])
        return is_review(body) and first and bool(self.notes(excerpt(body)))

    def _calls(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        operations = [{"action": "add", "content": n} for n in self.notes(excerpt(body))]
        return [{"name": "memory", "arguments": {"target": "user", "operations": operations}}]


def reviews(server: ScriptedLLM) -> list[dict[str, Any]]:
    return [r for r in server.requests if is_review(r)]


def claude_chat(uuid: str, title: str, said: list[str], *, day: int = 1) -> dict[str, Any]:
    """A Claude conversation in which the person said `said`, each answered."""
    messages = []
    for i, text in enumerate(said):
        messages += [
            {
                "uuid": f"{uuid}-h{i}",
                "text": text,
                "sender": "human",
                "created_at": f"2024-05-{day:02d}T10:{i:02d}:00Z",
            },
            {
                "uuid": f"{uuid}-a{i}",
                "text": f"Noted ({i}).",
                "sender": "assistant",
                "created_at": f"2024-05-{day:02d}T10:{i:02d}:05Z",
            },
        ]
    return {
        "uuid": uuid,
        "name": title,
        "created_at": f"2024-05-{day:02d}T09:59:00Z",
        "chat_messages": messages,
    }
