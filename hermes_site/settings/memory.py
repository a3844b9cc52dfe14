"""Memory: hot-memory sizes, memory providers, the local provider's inferences, the
background review that writes skills and memory, and the memory audit log."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .declare import declare_bool, declare_float, declare_int, declare_json, declare_str

HERMES_MEMORY_CHAR_LIMIT = declare_int(
    "HERMES_MEMORY_CHAR_LIMIT", 2200, min=1, help="Size of the agent's notes, in characters."
)
HERMES_USER_CHAR_LIMIT = declare_int(
    "HERMES_USER_CHAR_LIMIT", 1375, min=1, help="Size of the user profile, in characters."
)
HERMES_AUDIT_RETENTION_DAYS = declare_int(
    "HERMES_AUDIT_RETENTION_DAYS",
    365,
    min=0,
    help="Days memory audit events are kept before `prune` (0: forever).",
)

# --- Providers ------------------------------------------------------------------------
HERMES_MEMORY_PROVIDER = declare_str(
    "HERMES_MEMORY_PROVIDER",
    "",
    help="The one external memory provider beside the built-in memory, by name.",
)
HERMES_PROVIDER_PREFETCH_TIMEOUT = declare_float(
    "HERMES_PROVIDER_PREFETCH_TIMEOUT",
    8.0,
    min=0.1,
    help="Seconds a provider may take to recall before a message goes without it.",
)
HERMES_PROVIDER_MIRROR_TIMEOUT = declare_float(
    "HERMES_PROVIDER_MIRROR_TIMEOUT",
    5.0,
    min=0.1,
    help="Seconds a memory write waits for the provider to mirror it (then in background).",
)
# Beside installed packages' entry points (group "hermes_web.memory_providers") and the
# built-in "local" (memory/providers/local.py).
HERMES_MEMORY_PROVIDERS = declare_json(
    "HERMES_MEMORY_PROVIDERS",
    {},
    help='More providers by name: {"name": "package.module:Class"}.',
)
if not all(isinstance(v, str) and ":" in v for v in HERMES_MEMORY_PROVIDERS.values()):
    raise ImproperlyConfigured(
        'HERMES_MEMORY_PROVIDERS must be a JSON object like {"name": "package.module:Class"}.'
    )

# --- Inferences: the local provider's user model (HERMES_MEMORY_PROVIDER=local) ----------
HERMES_INFERENCE_DEFAULT_ENABLED = declare_bool(
    "HERMES_INFERENCE_DEFAULT_ENABLED",
    True,
    help="Inference for people who have not chosen on the Inferences page (false: opt-in).",
)
HERMES_INFERENCE_TRANSCRIPT_CHARS = declare_int(
    "HERMES_INFERENCE_TRANSCRIPT_CHARS",
    12000,
    min=1,
    help="Conversation text sent to the summary model per extraction, in characters.",
)
HERMES_INFERENCE_TASK_LIMIT = declare_int(
    "HERMES_INFERENCE_TASK_LIMIT",
    180,
    min=1,
    help="Celery time limit of one extraction or recall task (s).",
)

# --- Background review (skills and memory) --------------------------------------------
HERMES_REVIEW_ENABLED = declare_bool(
    "HERMES_REVIEW_ENABLED", True, help="Review busy conversations for skills and memory."
)
HERMES_SKILL_REVIEW_ITERATIONS = declare_int(
    "HERMES_SKILL_REVIEW_ITERATIONS",
    10,
    min=1,
    help="Tool-loop iterations since the last skill review that trigger the next.",
)
HERMES_MEMORY_REVIEW_TURNS = declare_int(
    "HERMES_MEMORY_REVIEW_TURNS", 10, min=1, help="A memory review every this many user turns."
)
HERMES_REVIEW_MAX_ITERATIONS = declare_int(
    "HERMES_REVIEW_MAX_ITERATIONS", 16, min=1, help="Model calls one background review may use."
)
HERMES_REVIEW_TIME_LIMIT = declare_int(
    "HERMES_REVIEW_TIME_LIMIT", 300, min=1, help="Seconds one background review may use."
)
