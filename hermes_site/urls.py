from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from django.views.i18n import JavaScriptCatalog
from drf_spectacular.views import SpectacularAPIView

from .health import healthz

admin.site.site_header = _("Hermes Web administration")
admin.site.site_title = "Hermes Web"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    # set_language (the login page's switch) and the JavaScript strings' catalog, a script
    # of our own host as the CSP wants.
    path("i18n/", include("django.conf.urls.i18n")),
    path("jsi18n/", JavaScriptCatalog.as_view(), name="javascript_catalog"),
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
