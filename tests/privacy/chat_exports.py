"""ChatGPT and Claude data exports built from their published structure, for the import
tests: a ChatGPT tree with an edited prompt (two branches), the empty root, a deleted node,
a hidden system message, multimodal parts, a tool result; a Claude list with content blocks,
an attachment and non-Latin text."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime
from typing import Any

#: 2023-03-14 15:09:26 UTC and on.
T0 = 1678806566.0


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, tz=UTC)


def gpt_node(node_id, parent, children, role=None, parts=None, t=0.0, **content):
    message = None
    if role is not None:
        body = {"content_type": "text", "parts": parts} if parts is not None else content
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": T0 + t if t is not None else None,
            "content": body,
            "status": "finished_successfully",
            "metadata": {},
        }
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def chatgpt_conversation(conv_id: str, title: str, marker: str) -> dict[str, Any]:
    """root → system (hidden) → u1 → a1 → u2 (edited: u2b is the current branch) → a2b."""
    hidden = gpt_node("sys", "root", ["u1"], "system", [""], t=None)
    hidden["message"]["metadata"]["is_visually_hidden_from_conversation"] = True
    mapping = {
        "root": gpt_node("root", None, ["sys"]),
        "sys": hidden,
        "u1": gpt_node("u1", "sys", ["a1"], "user", [f"Bonjour {marker} — 東京の天気は？"], t=10),
        "a1": gpt_node("a1", "u1", ["u2", "u2b"], "assistant", ["Il fait beau à Tōkyō."], t=20),
        # The first version of the second prompt, and its answer: another branch.
        "u2": gpt_node("u2", "a1", ["a2"], "user", ["first wording"], t=30),
        "a2": gpt_node("a2", "u2", [], "assistant", ["answer to the first wording"], t=40),
        "u2b": gpt_node(
            "u2b",
            "a1",
            ["del"],
            "user",
            t=50,
            content_type="multimodal_text",
            parts=[
                {"content_type": "image_asset_pointer", "asset_pointer": "file-service://x"},
                "What is in this picture?",
            ],
        ),
        "del": gpt_node("del", "u2b", ["tool"]),  # a deleted node: no message
        "tool": gpt_node(
            "tool", "del", ["a2b"], "tool", t=60, content_type="execution_output", text="42"
        ),
        "a2b": gpt_node("a2b", "tool", [], "assistant", [f"A cat. Кошка {marker}."], t=70),
    }
    return {
        "title": title,
        "create_time": T0,
        "update_time": T0 + 70,
        "mapping": mapping,
        "current_node": "a2b",
        "conversation_id": conv_id,
        "id": conv_id,
    }


def claude_conversation(uuid: str, name: str, marker: str, *, replies: int = 1) -> dict[str, Any]:
    messages = [
        {
            "uuid": f"{uuid}-h1",
            "text": f"Explain {marker} in Greek: καλημέρα",
            "content": [{"type": "text", "text": f"Explain {marker} in Greek: καλημέρα"}],
            "sender": "human",
            "created_at": "2024-05-01T10:00:00.000000Z",
            "attachments": [{"file_name": "notes.txt", "extracted_content": "secret"}],
            "files": [],
        },
        {
            "uuid": f"{uuid}-a1",
            "text": "",
            "content": [
                {"type": "text", "text": "Καλημέρα means good morning."},
                {"type": "tool_use", "name": "web_search", "input": {}},
            ],
            "sender": "assistant",
            "created_at": "2024-05-01T10:00:05.000000Z",
        },
    ]
    for i in range(2, replies + 1):
        messages += [
            {
                "uuid": f"{uuid}-h{i}",
                "text": f"follow-up {i}",
                "sender": "human",
                "created_at": f"2024-05-0{i}T10:00:00",  # no zone: UTC
            },
            {
                "uuid": f"{uuid}-a{i}",
                "text": f"reply {i}",
                "sender": "assistant",
                "created_at": f"2024-05-0{i}T10:00:01Z",
            },
        ]
    return {
        "uuid": uuid,
        "name": name,
        "created_at": "2024-05-01T09:59:59.000000Z",
        "updated_at": "2024-05-01T10:00:05.000000Z",
        "chat_messages": messages,
    }


def zipped(conversations: list[Any], name: str = "conversations.json") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("chat.html", "<html></html>")
        zf.writestr(name, json.dumps(conversations, ensure_ascii=False))
    return buffer.getvalue()
