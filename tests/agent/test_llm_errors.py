"""What a failed model call says happened, against real sockets: a closed port (refused), a
server that accepts and never answers (timed out), the scripted model's 5xx fault."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from devtools.scripted_llm import Fault, ScriptedLLM
from sessions_app.agent import llm
from sessions_app.agent.llm import LLMError
from sessions_app.views import END_NOTES

USER = {"role": "user", "content": "Hello?"}


def call_error() -> LLMError:
    async def run() -> None:
        async for _event in llm.stream_chat(messages=[USER]):
            pass

    with pytest.raises(LLMError) as caught:
        asyncio.run(run())
    return caught.value


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A base URL whose server accepts connections and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        listener.close()


def test_a_closed_port_is_refused(scripted: ScriptedLLM, settings: Any) -> None:
    with ScriptedLLM() as gone:
        settings.OPENAI_BASE_URL = gone.base_url
    error = call_error()
    assert error.code == "llm_refused"
    assert "127.0.0.1" in error.message and "refused the connection" in error.message
    assert "in time" not in error.message


def test_a_server_that_never_answers_times_out(
    scripted: ScriptedLLM, settings: Any, silent_server: str
) -> None:
    settings.OPENAI_BASE_URL = silent_server
    settings.HERMES_LLM_READ_TIMEOUT = 0.3
    error = call_error()
    assert error.code == "llm_timeout"
    assert "no reply to the request within 0.3 s" in error.message


@pytest.mark.parametrize("status", [500, 503])
def test_a_5xx_answer_says_so_with_its_status(
    scripted: ScriptedLLM, settings: Any, status: int
) -> None:
    scripted.set_fault(Fault(status=status, error_message="overloaded, try later"))
    error = call_error()
    assert (error.code, error.status) == ("llm_server_error", status)
    assert f"HTTP {status}" in error.message and "overloaded, try later" in error.message


def test_an_unknown_host_is_another_connection_failure(
    scripted: ScriptedLLM, settings: Any
) -> None:
    settings.OPENAI_BASE_URL = "http://no-such-host.invalid/v1"
    error = call_error()
    assert error.code == "llm_unavailable"
    assert "no-such-host.invalid" in error.message and "failed" in error.message


def test_every_error_code_has_a_note_under_the_failed_answer() -> None:
    assert set(llm.ErrorCode) <= set(END_NOTES)
    assert "in time" not in END_NOTES["llm_refused"]
