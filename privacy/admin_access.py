"""The audit log of the admin's content guard: every time an administrator lists, opens,
deletes or exports someone else's content (core/privacy/admin_base.py announces it with
`content_accessed`), one AdminContentAccess row records who, whose, what and where."""

from __future__ import annotations

from typing import Any

from .models import AdminContentAccess


def content_access_record(
    *,
    viewer: Any,
    subject_id: int | None,
    action: str,
    model: str,
    object_id: str,
    rows: int,
    path: str,
    **_signal: Any,
) -> None:
    """Receiver of core.privacy.admin_base.content_accessed (connected in ready())."""
    AdminContentAccess.objects.create(
        viewer=viewer,
        subject_id=subject_id,
        action=action,
        model=model,
        object_id=object_id,
        rows=rows,
        path=path,
    )
