"""The model: endpoint, models, context windows, call timeouts and prices."""

from __future__ import annotations

from .declare import declare_float, declare_int, declare_json, declare_str

OPENAI_BASE_URL = declare_str(
    "OPENAI_BASE_URL",
    "",
    help="Base URL of an OpenAI-compatible Chat Completions endpoint.",
    default_doc="the OpenAI API",
)
OPENAI_API_KEY = declare_str("OPENAI_API_KEY", "", help="The endpoint's API key.")
HERMES_MODEL = declare_str("HERMES_MODEL", "", help="The chat model (empty: chat is off).")
HERMES_SUMMARY_MODEL = declare_str(
    "HERMES_SUMMARY_MODEL",
    "",
    help="Model for summaries and background work (empty: HERMES_MODEL).",
    default_doc="`HERMES_MODEL`",
)
HERMES_ENCRYPTION_KEY = declare_str(
    "HERMES_ENCRYPTION_KEY",
    "",
    help="Secret that encrypts model API keys stored in the admin; several, comma-separated, "
    "rotate (the first encrypts). Changing it without keeping the old one makes stored keys "
    "unreadable until entered again.",
    default_doc="derived from `SECRET_KEY` (a warning)",
)
HERMES_CONTEXT_LENGTH = declare_int(
    "HERMES_CONTEXT_LENGTH", 128000, min=1, help="The chat model's context window in tokens."
)
# The longest key contained in the model name wins.
HERMES_CONTEXT_OVERRIDES = declare_json(
    "HERMES_CONTEXT_OVERRIDES",
    {},
    help='Context windows per model, like {"gpt-4o": 128000, "llama3": 8192}.',
)
HERMES_REPLY_MAX_TOKENS = declare_int(
    "HERMES_REPLY_MAX_TOKENS", 4096, min=1, help="Answer budget of one chat model call."
)
HERMES_LLM_CONNECT_TIMEOUT = declare_float(
    "HERMES_LLM_CONNECT_TIMEOUT", 5.0, min=0.1, help="Seconds to connect to the endpoint."
)
HERMES_LLM_READ_TIMEOUT = declare_float(
    "HERMES_LLM_READ_TIMEOUT", 30.0, min=0.1, help="Seconds to wait for the endpoint's bytes."
)
HERMES_LLM_MAX_RETRIES = declare_int(
    "HERMES_LLM_MAX_RETRIES", 2, min=0, help="Retries of a model call after 429 or 5xx."
)
HERMES_MODEL_PRICES = declare_json(
    "HERMES_MODEL_PRICES",
    {},
    help='USD per million tokens per model: {"gpt-4o": {"input": 2.5, "output": 10, '
    '"cached_input": 1.25}}.',
)
