from __future__ import annotations

from django.urls import path

from . import apis

urlpatterns = [
    path("skills/", apis.SkillListApi.as_view(), name="api-skill-list"),
    path("skills/<str:name>/", apis.SkillDetailApi.as_view(), name="api-skill-detail"),
    path("skills/<str:name>/files/", apis.SkillFilesApi.as_view(), name="api-skill-files"),
    path(
        "skills/<str:name>/files/<path:path>",
        apis.SkillFileApi.as_view(),
        name="api-skill-file",
    ),
    path(
        "skills/<str:name>/revisions/",
        apis.SkillRevisionsApi.as_view(),
        name="api-skill-revisions",
    ),
    path(
        "skills/<str:name>/revisions/<int:number>/",
        apis.SkillRevisionApi.as_view(),
        name="api-skill-revision",
    ),
    path(
        "skills/<str:name>/revisions/<int:number>/rollback/",
        apis.SkillRollbackApi.as_view(),
        name="api-skill-rollback",
    ),
]
