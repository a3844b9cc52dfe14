"""The OpenAI-compatible endpoint (included from hermes_site/urls.py under /v1/)."""

from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("models", views.models_list, name="openai-models"),
    path("models/<str:model>", views.model_detail, name="openai-model"),
    path("chat/completions", views.chat_completions, name="openai-chat-completions"),
]
