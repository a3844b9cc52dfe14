"""REST endpoints of the model catalog (included from hermes_site/api_urls.py under /api/)."""

from __future__ import annotations

from django.urls import path

from . import apis

urlpatterns = [path("models/", apis.ModelListApi.as_view(), name="api-models")]
