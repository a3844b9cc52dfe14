"""All REST endpoints under /api/, one include per app."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("accounts.api_urls")),
]
