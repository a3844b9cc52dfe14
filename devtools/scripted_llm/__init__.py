"""A scripted, OpenAI-compatible Chat Completions server for tests, benchmarks and demos.

It speaks real HTTP on 127.0.0.1 so the official ``openai`` client (and its retry, timeout and
SSE machinery) is exercised end to end instead of being mocked away. Standard library only, so it
can be imported without Django being configured.

Quick start::

    with ScriptedLLM() as llm:
        llm.add_rule("weather", tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
        llm.set_fault(Fault.rate_limited(retry_after=0.05, times=2))
        client = openai.OpenAI(base_url=llm.base_url, api_key="x")
        ...

How an incoming chat request is answered, in priority order:

1. the global fault from :meth:`ScriptedLLM.set_fault` (while it has ``times`` left);
2. the head of the queue filled by :meth:`ScriptedLLM.enqueue` ("the next N requests"),
   regardless of content;
3. the rules from :meth:`ScriptedLLM.add_rule`, checked **in the order they were added**; the first
   matching rule that still has ``times`` left wins;
4. the default reply (``default_reply`` or ``"Echo: <last user text>"``).

A fault with an HTTP ``status`` rejects the request *before* the model "runs", so it does not use
up the queued answer or the rule's ``times``: ``enqueue(reply="ok", fault=Fault(status=429,
times=2))`` answers 429, 429, then "ok".

Token accounting is deterministic: text is split with the regex ``\\w+|[^\\w\\s]``. The prompt is
the JSON of ``tools`` (sorted keys) followed by every message in order (role, content, tool calls
with their ids/names/arguments, tool_call_id). ``cached_tokens`` is the longest common token prefix
with any earlier *answered* request, which mimics provider prompt caching: appending to an unchanged
prompt is cheap, rebuilding it is not.
"""

from __future__ import annotations

from devtools.scripted_llm.demo import build_demo, main
from devtools.scripted_llm.script import (
    MODEL_IDS,
    Fault,
    Rule,
    Script,
    count_prompt_tokens,
    prompt_tokens,
    tokenize,
)
from devtools.scripted_llm.server import ScriptedLLM

__all__ = [
    "MODEL_IDS",
    "Fault",
    "Rule",
    "Script",
    "ScriptedLLM",
    "build_demo",
    "count_prompt_tokens",
    "main",
    "prompt_tokens",
    "tokenize",
]
