from __future__ import annotations

from django.urls import path

from . import inspector, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("chat/", views.chat, name="chat"),
    path("chat/list/", views.chat_list, name="chat_list"),
    path("chat/<str:session_id>/", views.chat, name="chat_session"),
    path("chat/<str:session_id>/messages/", views.chat_messages, name="chat_messages"),
    path("chat/<str:session_id>/rename/", views.chat_rename, name="chat_rename"),
    path("chat/<str:session_id>/pin/", views.chat_pin, name="chat_pin"),
    path("chat/<str:session_id>/delete/", views.chat_delete, name="chat_delete"),
    path("chat/<str:session_id>/inspect/", inspector.session_inspect, name="session_inspect"),
]
