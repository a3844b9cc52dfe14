"""L2 search (session_search, /sessions/, /api/search/): the summaries of matching
conversations, written by the summary model on the worker."""

from __future__ import annotations

from .declare import declare_float, declare_int

# Past the timeout the results fall back to snippets.
HERMES_SEARCH_SUMMARY_CONCURRENCY = declare_int(
    "HERMES_SEARCH_SUMMARY_CONCURRENCY",
    3,
    min=1,
    max=5,
    clamp=True,
    help="Conversation summaries a search runs at once (clamped to 1-5).",
)
HERMES_SEARCH_SUMMARY_TIMEOUT = declare_float(
    "HERMES_SEARCH_SUMMARY_TIMEOUT",
    60.0,
    min=0.1,
    help="Seconds a search waits for its summaries in total.",
)
HERMES_SEARCH_SUMMARY_MAX_TOKENS = declare_int(
    "HERMES_SEARCH_SUMMARY_MAX_TOKENS", 4000, min=1, help="Answer budget of one search summary."
)
HERMES_SEARCH_TRANSCRIPT_CHARS = declare_int(
    "HERMES_SEARCH_TRANSCRIPT_CHARS",
    100_000,
    min=1,
    help="Transcript window sent to the summary model, in characters.",
)
# An older claim counts as abandoned.
HERMES_SEARCH_SUMMARY_TASK_LIMIT = declare_int(
    "HERMES_SEARCH_SUMMARY_TASK_LIMIT", 300, min=1, help="Celery time limit of a summary task (s)."
)
