"""The memory app's services: the one write path for the `memory` tool, the Memory page,
the REST API, the admin and imports, plus the frozen prompt snapshot.

    validation  target / text / operation checks (before any lock)
    engine      Hermes' matching and apply rules on an in-memory copy
    anchor      the (user, target) row lock, version bump and limits, in one statement
                (on SQLite the same statement returns the list)
    store       the locked write (budget, audit, errors)
    persist     writing the difference; on PostgreSQL one entry and its audit row in one
                data-modifying CTE
    entries     add / replace / remove / batch / id-based edits / approvals / removing
                what one writer wrote (the notes learned from a chat import)
    transfer    MEMORY.md / USER.md import; a file over the limit held for the owner's choice
    snapshot    the MEMORY / USER PROFILE blocks frozen into a session's prompt
"""

from __future__ import annotations

from .entries import (
    Removed,
    memory_add,
    memory_apply_batch,
    memory_entries_remove_by_writer,
    memory_entry_delete,
    memory_entry_update,
    memory_pending_approve,
    memory_pending_reject,
    memory_remove,
    memory_replace,
)
from .snapshot import Snapshot, memory_snapshot, memory_snapshot_freeze, render_block
from .store import WriteResult
from .transfer import (
    HELD_CHOICES,
    HeldImport,
    fit_plan,
    memory_import,
    memory_import_held,
    memory_import_hold,
    memory_import_resolve,
    parse_memory_file,
)
from .validation import (
    Op,
    Provenance,
    check_content,
    check_target,
    parse_operations,
    with_content_alias,
)

__all__ = [
    "HELD_CHOICES",
    "HeldImport",
    "Op",
    "Provenance",
    "Removed",
    "Snapshot",
    "WriteResult",
    "check_content",
    "check_target",
    "memory_add",
    "memory_apply_batch",
    "memory_entries_remove_by_writer",
    "memory_entry_delete",
    "memory_entry_update",
    "fit_plan",
    "memory_import",
    "memory_import_held",
    "memory_import_hold",
    "memory_import_resolve",
    "memory_pending_approve",
    "memory_pending_reject",
    "memory_remove",
    "memory_replace",
    "memory_snapshot",
    "memory_snapshot_freeze",
    "parse_memory_file",
    "parse_operations",
    "render_block",
    "with_content_alias",
]
