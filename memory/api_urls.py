from __future__ import annotations

from django.urls import path

from . import apis
from .inferences import apis as inference_apis

urlpatterns = [
    path("memory/", apis.MemoryListApi.as_view(), name="api-memory-list"),
    path("memory/usage/", apis.MemoryUsageApi.as_view(), name="api-memory-usage"),
    path("memory/export/", apis.MemoryExportApi.as_view(), name="api-memory-export"),
    path("memory/import/", apis.MemoryImportApi.as_view(), name="api-memory-import"),
    path("memory/<int:entry_id>/", apis.MemoryDetailApi.as_view(), name="api-memory-detail"),
    path(
        "memory/<int:entry_id>/approve/",
        apis.MemoryApproveApi.as_view(),
        name="api-memory-approve",
    ),
    path("memory/<int:entry_id>/reject/", apis.MemoryRejectApi.as_view(), name="api-memory-reject"),
    path("inferences/", inference_apis.InferenceListApi.as_view(), name="api-inference-list"),
    path(
        "inferences/settings/",
        inference_apis.InferenceSettingsApi.as_view(),
        name="api-inference-settings",
    ),
    path(
        "inferences/<int:inference_id>/",
        inference_apis.InferenceDetailApi.as_view(),
        name="api-inference-detail",
    ),
]
