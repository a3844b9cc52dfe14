"""Chat turns: the agent's identity, message and stream limits, temporary chats and
context compression."""

from __future__ import annotations

from .declare import declare_float, declare_int, declare_str

# A user can replace it on the Account page.
HERMES_IDENTITY = declare_str(
    "HERMES_IDENTITY",
    "You are Hermes, a helpful assistant for a team, working in Hermes Web. You are direct "
    "and accurate, you say when you are unsure, and you keep a memory of each person you "
    "work with.",
    help="The agent's default identity, first in every system prompt.",
    default_doc='"You are Hermes, a helpful assistant for a team…"',
)
HERMES_MAX_MESSAGE_CHARS = declare_int(
    "HERMES_MAX_MESSAGE_CHARS", 32000, min=1, help="Longest chat message, in characters."
)
HERMES_WS_MAX_MESSAGE_BYTES = declare_int(
    "HERMES_WS_MAX_MESSAGE_BYTES", 262144, min=1, help="Largest websocket message, in bytes."
)
HERMES_TEMPORARY_CHAT_DAYS = declare_int(
    "HERMES_TEMPORARY_CHAT_DAYS", 7, min=1, help="Days after which temporary chats are deleted."
)
HERMES_MAX_TOOL_ITERATIONS = declare_int(
    "HERMES_MAX_TOOL_ITERATIONS", 12, min=1, help="Rounds of tool calls per answer."
)
HERMES_STREAM_SAVE_INTERVAL = declare_float(
    "HERMES_STREAM_SAVE_INTERVAL", 1.0, min=0, help="Seconds between saves of a streaming answer."
)
HERMES_STREAM_COALESCE_MS = declare_int(
    "HERMES_STREAM_COALESCE_MS",
    50,
    min=0,
    help="Deltas arriving within this many ms go to the browser as one event.",
)

# --- Compression ----------------------------------------------------------------------
HERMES_COMPRESSION_THRESHOLD = declare_float(
    "HERMES_COMPRESSION_THRESHOLD",
    0.75,
    min=0,
    max=1,
    help="Compress when the next prompt passes this share of (context - reply budget).",
)
HERMES_COMPRESSION_TAIL_RATIO = declare_float(
    "HERMES_COMPRESSION_TAIL_RATIO",
    0.2,
    min=0,
    max=1,
    help="Share of the compression threshold (tokens) kept verbatim as the recent tail.",
)
HERMES_COMPRESSION_COOLDOWN = declare_int(
    "HERMES_COMPRESSION_COOLDOWN",
    120,
    min=0,
    help="Seconds before a failed compression is retried.",
)
HERMES_COMPRESSION_TASK_LIMIT = declare_int(
    "HERMES_COMPRESSION_TASK_LIMIT", 600, min=1, help="Celery time limit of a compression (s)."
)
HERMES_COMPRESSION_WAIT = declare_int(
    "HERMES_COMPRESSION_WAIT",
    180,
    min=0,
    help="Seconds a message sent during compression waits for it.",
)
