"""The friendly demo script served by `manage.py fake_llm` and `python -m devtools.scripted_llm`."""

from __future__ import annotations

import argparse
import re
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from devtools.scripted_llm.script import (
    MODEL_IDS,
    Fault,
    JSONDict,
    _last_message,
    _last_message_text,
    _last_user_text,
)
from devtools.scripted_llm.server import ScriptedLLM

_REMEMBER_RE = re.compile(
    r"\bremember\b[\s:,-]*(?:that\s+)?(?P<rest>.*)", re.IGNORECASE | re.DOTALL
)
# A user's turn in the transcripts the site asks to have summarised (search recaps and
# compression both write `[USER]: …` blocks).
_TRANSCRIPT_USER_RE = re.compile(r"^\[USER\]: *(?P<said>.+)$", re.MULTILINE)


def _offers_tool(body: JSONDict, name: str) -> bool:
    return any((tool.get("function") or {}).get("name") == name for tool in body.get("tools") or [])


def _wants_memory(body: JSONDict) -> bool:
    # Only a chat turn offers the memory tool; a summary request quoting "remember" from its
    # transcript must get text, or the site reports an empty summary.
    last = _last_message(body)
    return (
        _offers_tool(body, "memory")
        and last.get("role") == "user"
        and _REMEMBER_RE.search(_last_message_text(body)) is not None
    )


def _wants_summary(body: JSONDict) -> bool:
    # Search recaps and compression offer no tools and carry the transcript to summarise.
    transcript = _TRANSCRIPT_USER_RE.search(_last_message_text(body))
    return not body.get("tools") and transcript is not None


def _memory_call(body: JSONDict) -> list[JSONDict]:
    found = _REMEMBER_RE.search(_last_message_text(body))
    content = found.group("rest").strip() if found else ""
    arguments = {"action": "add", "target": "user", "content": content.rstrip(".!") or content}
    return [{"name": "memory", "arguments": arguments}]


def _after_tool(body: JSONDict) -> bool:
    return _last_message(body).get("role") == "tool"


def _demo_reply(body: JSONDict) -> str:
    said = " ".join(_last_user_text(body).split())[:120] or "(nothing)"
    return (
        "Hello from the **scripted** model! You said:\n\n"
        f"> {said}\n\n"
        "Here is a tiny example:\n\n"
        "```python\n"
        "def greet(name: str) -> str:\n"
        '    return f"Hello, {name}!"\n'
        "```\n\n"
        "Say *remember …* and I will store it with the `memory` tool."
    )


def _summary_reply(body: JSONDict) -> str:
    text = _last_message_text(body)
    said = [m.group("said") for m in _TRANSCRIPT_USER_RE.finditer(text)][:3]
    # Plain text: the Sessions page shows summaries as text, not Markdown.
    quoted = " ".join(f"“{' '.join(s.split())[:80]}”" for s in said)
    return f"Recap from the scripted model. The user said: {quoted} A real model summarises here."


def build_demo(port: int = 0, *, chunk_delay: float = 0.02, host: str = "127.0.0.1") -> ScriptedLLM:
    """A ScriptedLLM with the friendly demo script (not started)."""
    llm = ScriptedLLM(port, default_reply=_demo_reply, chunk_delay=chunk_delay, host=host)
    llm.add_rule(_after_tool, reply="Done — I've saved that to memory.")
    llm.add_rule(_wants_summary, reply=_summary_reply)
    llm.add_rule(_wants_memory, tool_calls=_memory_call)
    return llm


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the demo script until interrupted (reusable from a management command)."""
    parser = argparse.ArgumentParser(
        prog="python -m devtools.scripted_llm",
        description="Serve a scripted OpenAI-compatible chat API for local demos.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--chunk-delay", type=float, default=0.02, help="seconds between chunks")
    parser.add_argument("--verbose", action="store_true", help="log every HTTP request")
    parser.add_argument("--reply", help="answer every request with this text (no demo script)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before first byte")
    parser.add_argument(
        "--record-to",
        type=Path,
        help="write the body of each chat request to this file (the last one stays)",
    )
    args = parser.parse_args(argv)

    if args.reply is not None:
        llm = ScriptedLLM(
            args.port, default_reply=args.reply, chunk_delay=args.chunk_delay, host=args.host
        )
    else:
        llm = build_demo(args.port, chunk_delay=args.chunk_delay, host=args.host)
    if args.latency:
        llm.set_fault(Fault(latency=args.latency))
    llm.verbose = args.verbose
    llm.record_to = args.record_to
    llm.start()
    print(
        f"Scripted LLM serving {', '.join(MODEL_IDS)} at {llm.base_url} — press Ctrl+C to stop.",
        flush=True,
    )
    finished = threading.Event()
    previous: Any = None
    if threading.current_thread() is threading.main_thread():
        # Process managers and `docker stop` send SIGTERM; stop as cleanly as on Ctrl+C.
        previous = signal.signal(signal.SIGTERM, lambda *_: finished.set())
    try:
        while not finished.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        llm.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
