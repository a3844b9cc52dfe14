from __future__ import annotations

from django.urls import path

from . import apis

urlpatterns = [
    path("me/", apis.MeApi.as_view(), name="api-me"),
    path("me/export/", apis.MeExportApi.as_view(), name="api-me-export"),
    path("me/exports/", apis.MeExportJobsApi.as_view(), name="api-me-exports"),
    path("me/exports/<int:job_id>/", apis.MeExportJobApi.as_view(), name="api-me-export-job"),
    path(
        "me/exports/<int:job_id>/download/",
        apis.MeExportDownloadApi.as_view(),
        name="api-me-export-download",
    ),
    path("me/chat-imports/", apis.MeChatImportsApi.as_view(), name="api-me-chat-imports"),
    path(
        "me/chat-imports/<int:job_id>/", apis.MeChatImportApi.as_view(), name="api-me-chat-import"
    ),
    path(
        "me/chat-imports/<int:job_id>/notes/",
        apis.MeChatImportNotesApi.as_view(),
        name="api-me-chat-import-notes",
    ),
]
