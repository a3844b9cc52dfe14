"""The demo script of `manage.py fake_llm`: a chat turn that says "remember" calls the memory
tool, while a summary of such a chat (no tools offered) gets text, down to the Sessions page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from django.test import Client

from devtools.scripted_llm import ScriptedLLM, build_demo
from memory.tools import TOOLS as MEMORY_TOOLS
from sessions_app.search.transcript import format_message
from tests.search.conftest import make_chat

MEMORY_SCHEMAS = [tool.schema() for tool in MEMORY_TOOLS]
REMEMBER = "Please remember that I prefer tea."


@pytest.fixture(scope="module")
def demo() -> Iterator[ScriptedLLM]:
    with build_demo(chunk_delay=0) as llm:
        yield llm


@pytest.fixture
def client(demo: ScriptedLLM) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=demo.base_url, api_key="x", max_retries=0, timeout=5) as c:
        yield c


def ask(client: openai.OpenAI, messages: list[Any], **kwargs: Any) -> Any:
    return client.chat.completions.create(model="scripted", messages=messages, **kwargs).choices[0]


def test_hello_without_tools_is_the_markdown_demo(client):
    hello = ask(client, [{"role": "user", "content": "Hi!"}])
    assert "```python" in hello.message.content


def test_chat_turn_offering_memory_calls_it_then_confirms(client):
    messages: list[Any] = [{"role": "user", "content": REMEMBER}]
    first = ask(client, messages, tools=MEMORY_SCHEMAS)
    call = first.message.tool_calls[0]
    assert call.function.name == "memory"
    assert json.loads(call.function.arguments) == {
        "action": "add",
        "target": "user",
        "content": "I prefer tea",
    }
    messages += [
        first.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"ok": true}'},
    ]
    done = ask(client, messages, tools=MEMORY_SCHEMAS)
    assert done.finish_reason == "stop"
    assert "memory" in done.message.content


def test_remember_without_the_memory_tool_gets_text(client):
    answer = ask(client, [{"role": "user", "content": REMEMBER}])
    assert not answer.message.tool_calls
    assert answer.message.content.strip()


def test_summary_request_of_a_chat_that_said_remember_gets_a_recap(client):
    transcript = "\n\n".join(
        [
            format_message("user", REMEMBER),
            format_message("assistant", "", tool_calls=[{"function": {"name": "memory"}}]),
            format_message("tool", '{"ok": true}', tool_name="memory"),
            format_message("assistant", "Done — I've saved that to memory."),
        ]
    )
    messages = [
        {"role": "system", "content": "Write a short factual recap."},
        {"role": "user", "content": f"CONVERSATION TRANSCRIPT:\n{transcript}\n\nRecap it."},
    ]
    recap = ask(client, messages)
    assert not recap.message.tool_calls
    assert f"The user said: “{REMEMBER}”" in recap.message.content


@pytest.mark.django_db
def test_sessions_page_summarise_shows_the_demo_recap(
    owner, demo, settings, django_capture_on_commit_callbacks
):
    settings.OPENAI_BASE_URL = demo.base_url
    settings.OPENAI_API_KEY = "sk-demo"
    settings.HERMES_MODEL = "scripted"
    settings.HERMES_SUMMARY_MODEL = ""
    chat = make_chat(
        owner,
        [
            ("user", REMEMBER),
            ("assistant", "", {"tool_calls": [{"id": "c1", "function": {"name": "memory"}}]}),
            ("tool", '{"ok": true}', {"tool_call_id": "c1", "tool_name": "memory"}),
            ("assistant", "Done — I've saved that to memory."),
        ],
        title="Tea",
    )
    browser = Client()
    browser.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        browser.post("/sessions/summarise/", {"q": "tea", "session_id": chat.id})
    html = browser.get("/sessions/", {"q": "tea"}).content.decode()
    assert f"Recap from the scripted model. The user said: “{REMEMBER}”" in html
    assert "Summarise again" in html


@pytest.mark.django_db
def test_no_model_banner_says_how_to_try_the_scripted_model(owner, settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    settings.HERMES_MODEL = ""
    browser = Client()
    browser.force_login(owner)
    html = browser.get("/chat/").content.decode()
    banner = html[html.index('id="no-model"') : html.index("</div>", html.index('id="no-model"'))]
    assert "stop the site (<kbd>Ctrl-C</kbd>) and run <code>make demo</code>" in banner
    assert "<code>OPENAI_BASE_URL</code>" in banner and "<code>HERMES_MODEL</code>" in banner
