"""The privacy app's own tables in the registry: export jobs and the admin access log."""

from __future__ import annotations

from core.privacy import registry

from .models import AdminContentAccess, ChatImportJob, ExportJob


def register() -> None:
    """Called from the app's ready()."""
    registry.register(
        ExportJob,
        owner_path="owner",
        section="data_exports",
        category="Your data exports",
        provided=False,
        content=False,
    )
    registry.register(
        ChatImportJob,
        owner_path="owner",
        section="chat_imports",
        category="Your imports of ChatGPT and Claude exports",
        provided=False,
        content=False,
    )
    registry.register(
        AdminContentAccess,
        owner_path="subject",
        section="admin_content_access",
        category="Administrators who opened your content",
        provided=False,
        content=False,
        # Kept for accountability; erasing the account makes the rows anonymous (SET_NULL).
        on_erase="keep",
    )
