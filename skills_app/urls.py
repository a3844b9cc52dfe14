from __future__ import annotations

from django.urls import path

from . import views

# Fixed pages sit under "-/": a skill name cannot start with '-', so none can hide them.
urlpatterns = [
    path("", views.skill_list, name="skill_list"),
    path("-/new/", views.skill_new, name="skill_new"),
    path("-/import/", views.skill_import, name="skill_import"),
    path("-/export/", views.skill_export, name="skill_export"),
    path("<str:name>/", views.skill_detail, name="skill_detail"),
    path("<str:name>/edit/", views.skill_edit, name="skill_edit"),
    path("<str:name>/delete/", views.skill_delete, name="skill_delete"),
    path("<str:name>/flags/", views.skill_flags, name="skill_flags"),
    path("<str:name>/files/", views.skill_file_add, name="skill_file_add"),
    path("<str:name>/files/remove/", views.skill_file_remove, name="skill_file_remove"),
    path("<str:name>/files/<path:path>", views.skill_file, name="skill_file"),
    path("<str:name>/history/", views.skill_history, name="skill_history"),
    path(
        "<str:name>/history/<int:number>/rollback/",
        views.skill_rollback,
        name="skill_rollback",
    ),
]
