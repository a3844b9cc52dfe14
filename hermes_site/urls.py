from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from sessions_app import views as session_views

from .health import healthz
from .usage import usage

admin.site.site_header = "Hermes Web administration"
admin.site.site_title = "Hermes Web"

urlpatterns = [
    path("", session_views.dashboard, name="dashboard"),
    path("healthz", healthz, name="healthz"),
    path("", include("sessions_app.urls")),
    path("sessions/", include("sessions_app.search_urls")),
    path("accounts/", include("accounts.urls")),
    path("accounts/", include("hermes_site.privacy.urls")),
    path("usage/", usage, name="usage"),
    path("memory/", include("memory.urls")),
    path("inferences/", include("memory.inferences.urls")),
    path("skills/", include("skills_app.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/", include("hermes_site.api_urls")),
]
