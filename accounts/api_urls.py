from __future__ import annotations

from django.urls import path

from . import apis

urlpatterns = [
    path("me/", apis.MeApi.as_view(), name="api-me"),
]
