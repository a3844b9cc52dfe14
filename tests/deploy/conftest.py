"""Fixtures of the deployment tests: the chat fixtures (scripted model, websocket clients)
are shared with tests/chat."""

from __future__ import annotations

from tests.chat.conftest import llm_server, scripted, sockets  # noqa: F401
