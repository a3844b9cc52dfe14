"""Privacy: "Download my data" exports, Hermes imports and admin access to content."""

from __future__ import annotations

from .core import VAR_DIR
from .declare import declare_bool, declare_int, declare_path

# Off: superusers manage accounts and see counts. On: every look at someone else's content
# in the admin is written to the audit log.
HERMES_ADMIN_CONTENT_ACCESS = declare_bool(
    "HERMES_ADMIN_CONTENT_ACCESS",
    False,
    help="Let superusers read other people's content in the admin (audit-logged).",
)
HERMES_EXPORT_DIR = declare_path(
    "HERMES_EXPORT_DIR",
    VAR_DIR / "exports",
    help="Where export archives are built and kept until they expire.",
    default_doc="`var/exports`",
)
# The periodic `privacy-expire-exports` task deletes them.
HERMES_EXPORT_EXPIRY_HOURS = declare_int(
    "HERMES_EXPORT_EXPIRY_HOURS", 24, min=1, help="Hours an export archive stays downloadable."
)
# Larger accounts get a 202 and an export job to poll.
HERMES_EXPORT_SYNC_MAX_MESSAGES = declare_int(
    "HERMES_EXPORT_SYNC_MAX_MESSAGES",
    5000,
    min=0,
    help="GET /api/me/export/ answers with the zip itself up to this many messages.",
)
HERMES_EXPORT_TASK_LIMIT = declare_int(
    "HERMES_EXPORT_TASK_LIMIT", 1800, min=1, help="Celery time limit of one export (s)."
)
HERMES_IMPORT_MAX_MB = declare_int(
    "HERMES_IMPORT_MAX_MB",
    200,
    min=1,
    help="Largest Hermes home (zip) the Account page accepts for import, in MiB.",
)
# "Let Hermes learn from this history" on a ChatGPT/Claude import (privacy/chat_learn.py):
# the review reads at most this many conversations and makes at most this many model calls.
HERMES_IMPORT_LEARN_CONVERSATIONS = declare_int(
    "HERMES_IMPORT_LEARN_CONVERSATIONS",
    50,
    min=0,
    help="Conversations one import's learning review reads at most (0: the option is off).",
)
HERMES_IMPORT_LEARN_MAX_CALLS = declare_int(
    "HERMES_IMPORT_LEARN_MAX_CALLS",
    60,
    min=4,
    help="Model calls one import's learning review makes at most.",
)
