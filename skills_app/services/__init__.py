"""Skills services, split by sub-domain; import them from here.

- skills: create / edit / patch / delete, files, rollback, flags
- team: team skills (administrators)
- index: the compact index frozen into a session's system prompt
- review: counting busy turns and running the background review
- transfer: import and export of a skills folder as a zip
"""

from __future__ import annotations

from .index import skills_index_freeze
from .review import review_after_turn, review_run_execute
from .skills import (
    PatchOutcome,
    skill_create,
    skill_delete,
    skill_edit,
    skill_file_remove,
    skill_file_write,
    skill_patch,
    skill_rollback,
    skill_set_flags,
)
from .team import team_skill_publish, team_skill_save
from .transfer import ImportReport, skills_export_zip, skills_import_zip

__all__ = [
    "ImportReport",
    "PatchOutcome",
    "review_after_turn",
    "review_run_execute",
    "skill_create",
    "skill_delete",
    "skill_edit",
    "skill_file_remove",
    "skill_file_write",
    "skill_patch",
    "skill_rollback",
    "skill_set_flags",
    "skills_export_zip",
    "skills_import_zip",
    "skills_index_freeze",
    "team_skill_publish",
    "team_skill_save",
]
