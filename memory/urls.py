from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.memory_page, name="memory_page"),
    path("log/", views.memory_log, name="memory_log"),
    path("add/<str:target>/", views.entry_add, name="memory_entry_add"),
    path("<int:entry_id>/edit/", views.entry_edit, name="memory_entry_edit"),
    path("<int:entry_id>/delete/", views.entry_delete, name="memory_entry_delete"),
    path("<int:entry_id>/approve/", views.pending_approve, name="memory_pending_approve"),
    path("<int:entry_id>/reject/", views.pending_reject, name="memory_pending_reject"),
    path(
        "learned/<int:import_id>/remove/",
        views.memory_learned_remove,
        name="memory_learned_remove",
    ),
    path("import/", views.memory_import_view, name="memory_import"),
    path("export/<str:target>/", views.memory_export_view, name="memory_export"),
]
