"""The Sessions page (/sessions/): the conversation list and search over it."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("", views.session_list, name="session_list"),
    path("summarise/", views.session_summarise, name="session_summarise"),
]
