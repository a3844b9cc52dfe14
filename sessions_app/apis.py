"""REST endpoints of the sessions app: thin views over its services, owner-scoped.

Errors leave as {"error": {"code", "message", …}} (core.api); another user's
conversation or summary is a 404 like a missing one.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ServiceError

from . import services as session_services
from .models import Message, SearchSummary, Session
from .search.service import (
    ConversationHit,
    SearchResult,
    access_search_summary,
    check_roles,
    search_conversations,
    search_summaries_wait,
    search_summary_start,
)
from .session_model import session_entry, session_model_switch

# --- L2 search -------------------------------------------------------------------------

SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 10, 50


# A day filter becomes a midnight in the site's time zone (and `until` the next one), then a
# UTC timestamp: the first and last days of the calendar would overflow datetime on the way.
FIRST_DAY, LAST_DAY = date.min + timedelta(days=1), date.max - timedelta(days=1)


class DayField(serializers.DateField):
    def to_internal_value(self, value: Any) -> date:
        day = super().to_internal_value(value)
        if not FIRST_DAY <= day <= LAST_DAY:
            raise serializers.ValidationError(
                f"Use a date between {FIRST_DAY.isoformat()} and {LAST_DAY.isoformat()}."
            )
        return day


class SearchParamsSerializer(serializers.Serializer):
    # `q` is read raw: any text is a valid query (NUL bytes included) and gets sanitised.
    role = serializers.CharField(required=False, allow_blank=True, default="")
    limit = serializers.IntegerField(required=False, default=SEARCH_DEFAULT_LIMIT)
    since = DayField(required=False, allow_null=True, default=None)
    until = DayField(required=False, allow_null=True, default=None)
    summarise = serializers.BooleanField(required=False, default=False)


def day_start(day: date) -> datetime:
    """Midnight of `day` in the site's time zone (aware)."""
    from django.utils import timezone

    return timezone.make_aware(datetime.combine(day, time.min))


def search_params(data: Any) -> dict[str, Any]:
    """Validated search filters from query parameters or form data, shared with the page."""
    params = SearchParamsSerializer(data=data)
    params.is_valid(raise_exception=True)
    values = params.validated_data
    since, until = values["since"], values["until"]
    if since and until and since > until:
        raise ServiceError("invalid_dates", "'since' must not be after 'until'.")
    return {
        "roles": check_roles(values["role"]),
        "limit": min(SEARCH_MAX_LIMIT, max(1, values["limit"])),
        "since": day_start(since) if since else None,
        # `until` is inclusive for people: everything before the next midnight.
        "until": day_start(until + timedelta(days=1)) if until else None,
        "summarise": values["summarise"],
    }


def conversation_json(conv: ConversationHit) -> dict[str, Any]:
    return {
        "session_id": conv.session_id,
        "title": conv.title,
        "started_at": conv.started_at,
        "last_activity_at": conv.last_activity_at,
        "link": conv.link,
        "hit_count": conv.hit_count,
        "snippets": [
            {
                "message_id": h.message_id,
                "session_id": h.session_id,
                "role": h.role,
                "timestamp": h.timestamp,
                "on_path": h.on_path,
                **(h.snippet.as_dict() if h.snippet else {"text": "", "highlights": []}),
            }
            for h in conv.hits
        ],
        "summary": conv.summary,
        "summary_status": conv.summary_status,
        "summary_id": conv.summary_id,
    }


def search_json(result: SearchResult) -> dict[str, Any]:
    return {
        "query": result.query,
        "route": result.route,
        "results": [conversation_json(c) for c in result.conversations],
    }


class SearchApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("q", str, description='Words, OR, NOT, "phrases", prefix*.'),
            OpenApiParameter("role", str, description="user, assistant, tool (comma-separated)."),
            OpenApiParameter("limit", int, description="Conversations (default 10, max 50)."),
            OpenApiParameter(
                "since",
                str,
                description="YYYY-MM-DD, inclusive (0001-01-02 to 9999-12-30; else 400).",
            ),
            OpenApiParameter(
                "until",
                str,
                description="YYYY-MM-DD, inclusive (0001-01-02 to 9999-12-30; else 400).",
            ),
            OpenApiParameter("summarise", bool, description="Wait for focused summaries."),
        ],
        responses=inline_serializer(
            "SearchResponse",
            {
                "query": serializers.CharField(),
                "route": serializers.CharField(),
                "results": serializers.ListField(child=serializers.DictField()),
            },
        ),
    )
    def get(self, request: Request) -> Response:
        params = search_params(request.query_params)
        query = request.query_params.get("q", "")
        result = search_conversations(
            owner=request.user,
            query=query,
            roles=params["roles"],
            since=params["since"],
            until=params["until"],
            limit=params["limit"],
        )
        if params["summarise"] and result.conversations:
            search_summaries_wait(owner=request.user, query=query, result=result)
        return Response(search_json(result))


def summary_json(summary: SearchSummary) -> dict[str, Any]:
    return {
        "id": summary.id,
        "session_id": summary.session_id,
        "query": summary.query,
        "status": summary.status,
        "summary": summary.summary if summary.status == SearchSummary.Status.DONE else None,
        "error": summary.error or None,
    }


SummaryResponse = inline_serializer(
    "SearchSummaryResponse",
    {
        "id": serializers.IntegerField(),
        "session_id": serializers.CharField(),
        "query": serializers.CharField(),
        "status": serializers.CharField(),
        "summary": serializers.CharField(allow_null=True),
        "error": serializers.CharField(allow_null=True),
    },
)


class SummaryStartSerializer(serializers.Serializer):
    q = serializers.CharField(allow_blank=True, trim_whitespace=False)
    session_id = serializers.CharField(max_length=32)


class SearchSummaryListApi(APIView):
    @extend_schema(request=SummaryStartSerializer, responses={202: SummaryResponse})
    def post(self, request: Request) -> Response:
        data = SummaryStartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        summary = search_summary_start(
            owner=request.user,
            query=data.validated_data["q"],
            session_id=data.validated_data["session_id"],
        )
        summary.refresh_from_db()  # inline tasks may have finished it already
        done = summary.status in (SearchSummary.Status.DONE, SearchSummary.Status.FAILED)
        return Response(
            summary_json(summary), status=status.HTTP_200_OK if done else status.HTTP_202_ACCEPTED
        )


class SearchSummaryDetailApi(APIView):
    @extend_schema(responses=SummaryResponse)
    def get(self, request: Request, summary_id: int) -> Response:
        return Response(
            summary_json(access_search_summary(owner=request.user, summary_id=summary_id))
        )


# --- conversations ------------------------------------------------------------------------


class SessionSerializer(serializers.ModelSerializer):
    # The picker's view of the model (catalog id and name; never its URL or key).
    model_choice = serializers.SerializerMethodField()

    @extend_schema_field(
        inline_serializer(
            "SessionModelChoice", {"id": serializers.CharField(), "name": serializers.CharField()}
        )
    )
    def get_model_choice(self, session: Session) -> dict[str, str]:
        return {"id": session_entry(session), "name": session_entry(session, "entry_name")}

    class Meta:
        model = Session
        fields = [
            "id", "title", "title_source", "source", "model", "started_at", "ended_at",
            "end_reason", "parent", "message_count", "tool_call_count", "api_call_count",
            "input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens",
            "estimated_cost_usd", "last_activity_at", "pinned", "archived", "temporary",
            "model_choice",
        ]  # fmt: skip
        read_only_fields = [f for f in fields if f not in ("title", "pinned", "archived")]


class MessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = [
            "id", "session", "role", "kind", "content", "tool_calls", "tool_call_id",
            "tool_name", "timestamp", "status", "finish_reason", "model", "prompt_tokens",
            "completion_tokens", "cached_tokens", "reasoning_tokens", "cost_usd", "parent",
            "active",
        ]  # fmt: skip
        read_only_fields = fields


class SessionUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(required=False, max_length=200)
    pinned = serializers.BooleanField(required=False)
    archived = serializers.BooleanField(required=False)
    # A model from GET /api/models/ ("id"): switches the conversation to it.
    model = serializers.CharField(required=False, max_length=40)


class SessionListApi(ListAPIView):
    """Your conversations, each compression chain once (at its newest part)."""

    serializer_class = SessionSerializer

    def get_queryset(self):
        return (
            Session.objects.filter(owner=self.request.user)
            .exclude(end_reason=Session.EndReason.COMPRESSION)
            .order_by("-pinned", "-last_activity_at")
        )


class SessionDetailApi(APIView):
    @extend_schema(responses=SessionSerializer)
    def get(self, request: Request, session_id: str) -> Response:
        session = session_services.access_session(user=request.user, session_id=session_id)
        return Response(SessionSerializer(session).data)

    @extend_schema(request=SessionUpdateSerializer, responses=SessionSerializer)
    def patch(self, request: Request, session_id: str) -> Response:
        body = SessionUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        values = body.validated_data
        if "model" in values:
            session_model_switch(user=request.user, session_id=session_id, ref=values["model"])
        if "title" in values:
            session_services.session_rename(
                user=request.user, session_id=session_id, title=values["title"]
            )
        session = session_services.session_set_flags(
            user=request.user,
            session_id=session_id,
            pinned=values.get("pinned"),
            archived=values.get("archived"),
        )
        return Response(SessionSerializer(session).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, session_id: str) -> Response:
        session_services.session_delete(user=request.user, session_id=session_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionMessagesApi(ListAPIView):
    """Messages of one of your conversations, oldest first (?after=<id> for newer ones):
    the selected path, or every branch with ?branches=all (`parent` and `active` tell the
    tree and the selected path)."""

    serializer_class = MessageSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only messages with a larger id."),
            OpenApiParameter("branches", str, description="all: every branch, not just the path."),
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        session = session_services.access_session(
            user=self.request.user, session_id=self.kwargs["session_id"]
        )
        rows = session.messages.order_by("id")
        if self.request.query_params.get("branches") != "all":
            rows = rows.filter(active=True)
        after = self.request.query_params.get("after", "")
        return rows.filter(id__gt=int(after)) if after.isdigit() else rows


class MessageSelectApi(APIView):
    """Select an alternative (an edited message or a regenerated answer) as the
    conversation's path, like the chat's ‹ › arrows; open tabs follow."""

    @extend_schema(
        request=None,
        responses=inline_serializer("BranchPath", {"path": serializers.ListField()}),
    )
    def post(self, request: Request, session_id: str, message_id: int) -> Response:
        path = session_services.branch_select(
            user=request.user, session_id=session_id, message_id=message_id
        )
        return Response({"path": path})
