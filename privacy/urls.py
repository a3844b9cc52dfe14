"""The Account page's privacy actions, mounted under /accounts/."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("export/", views.export_start, name="account_export"),
    path("exports/<int:job_id>/download/", views.export_download, name="account_export_download"),
    path("import/", views.hermes_import_upload, name="account_import"),
    path("import/chats/", views.chat_import_upload, name="account_import_chats"),
    path(
        "import/chats/<int:job_id>/notes/remove/",
        views.chat_import_notes_remove,
        name="account_import_chats_notes_remove",
    ),
    path("import/held/", views.hermes_import_held, name="account_import_held"),
    path("forget-memory/", views.memory_forget, name="account_forget_memory"),
    path("delete/", views.account_delete, name="account_delete"),
]
