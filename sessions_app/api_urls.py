"""REST endpoints of the sessions app (included from hermes_site/api_urls.py under /api/)."""

from __future__ import annotations

from django.urls import path

from . import apis

urlpatterns = [
    path("sessions/", apis.SessionListApi.as_view(), name="api-sessions"),
    path("sessions/<str:session_id>/", apis.SessionDetailApi.as_view(), name="api-session"),
    path(
        "sessions/<str:session_id>/messages/",
        apis.SessionMessagesApi.as_view(),
        name="api-session-messages",
    ),
    path(
        "sessions/<str:session_id>/messages/<int:message_id>/select/",
        apis.MessageSelectApi.as_view(),
        name="api-message-select",
    ),
    path("search/", apis.SearchApi.as_view(), name="api-search"),
    path("search/summaries/", apis.SearchSummaryListApi.as_view(), name="api-search-summaries"),
    path(
        "search/summaries/<int:summary_id>/",
        apis.SearchSummaryDetailApi.as_view(),
        name="api-search-summary",
    ),
]
