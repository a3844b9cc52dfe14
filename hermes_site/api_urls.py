"""All REST endpoints under /api/, one include per app."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("privacy.api_urls")),
    path("", include("memory.api_urls")),
    path("", include("skills_app.api_urls")),
    path("", include("sessions_app.api_urls")),
    path("", include("model_catalog.api_urls")),
]
