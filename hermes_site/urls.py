from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from .health import healthz

admin.site.site_header = "Hermes Web administration"
admin.site.site_title = "Hermes Web"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("", include("sessions_app.urls")),
    path("sessions/", include("sessions_app.search_urls")),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("privacy.urls")),
    path("usage/", include("usage.urls")),
    path("memory/", include("memory.urls")),
    path("inferences/", include("memory.inferences.urls")),
    path("skills/", include("skills_app.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("hermes_site.api_urls")),
    path("v1/", include("openai_api.urls")),
]
