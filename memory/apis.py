"""REST endpoints for L1 memory: thin views over memory.services, owner-scoped.

Errors leave as {"error": {"code", "message", …}} (core.api); another user's entry
is a 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ServiceError

from . import selectors, services
from .models import MemoryEntry, Source, Target, content_digest
from .provenance import default_writer, writers_attach

API = services.Provenance(source=Source.API)
MAX_IMPORT_BYTES = 1_000_000


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers, booleans and objects instead of str()-ing them."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class MemoryEntrySerializer(serializers.ModelSerializer):
    source_session = serializers.CharField(source="source_session_id", allow_null=True)
    source_message = serializers.IntegerField(source="source_message_id", allow_null=True)
    pending_of = serializers.IntegerField(source="pending_of_id", allow_null=True)
    source_label = serializers.SerializerMethodField(
        help_text='Who wrote it, for people ("Learned from your ChatGPT import of 2024-05-01").'
    )
    source_import = serializers.SerializerMethodField(
        help_text='With source "import_review": the id of the chat import whose learning '
        "wrote it (GET /api/me/chat-imports/<id>/)."
    )

    def _writer(self, entry: MemoryEntry):
        writer = getattr(entry, "writer", None)
        return writer or default_writer(entry.source, entry.source_client)

    def get_source_label(self, entry: MemoryEntry) -> str:
        return self._writer(entry).label

    def get_source_import(self, entry: MemoryEntry) -> int | None:
        return self._writer(entry).import_id

    class Meta:
        model = MemoryEntry
        fields = [
            "id",
            "target",
            "content",
            "order",
            "status",
            "pending_action",
            "pending_of",
            "source",
            "source_client",
            "source_label",
            "source_import",
            "source_session",
            "source_message",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class EntryCreateSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=Target.choices)
    # Blank and whitespace reach the service, which says "Content cannot be empty."
    content = StrictCharField(allow_blank=True, trim_whitespace=False)


class EntryUpdateSerializer(serializers.Serializer):
    content = StrictCharField(allow_blank=True, trim_whitespace=False)


class ImportSerializer(serializers.Serializer):
    target = serializers.ChoiceField(choices=Target.choices)
    content = StrictCharField(
        required=False, allow_blank=True, trim_whitespace=False, help_text="The file's text."
    )
    file = serializers.FileField(required=False, help_text="Or upload MEMORY.md / USER.md.")
    mode = serializers.ChoiceField(
        choices=[("merge", "Add new entries"), ("replace", "Make the list match the file")],
        default="merge",
    )


UsageSerializer = inline_serializer(
    "MemoryUsage",
    {
        "current": serializers.IntegerField(),
        "limit": serializers.IntegerField(),
        "entry_count": serializers.IntegerField(),
        "pct": serializers.IntegerField(),
        "text": serializers.CharField(),
    },
)


def usage_dict(usage: selectors.Usage) -> dict[str, Any]:
    return {
        "current": usage.current,
        "limit": usage.limit,
        "entry_count": usage.entry_count,
        "pct": usage.pct,
        "text": usage.text(),
    }


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    if not isinstance(data, dict) and not hasattr(data, "getlist"):
        raise ServiceError("invalid", "The request body must be a JSON object.")
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def writer_filter(params: Any) -> tuple[str | None, str | None]:
    """(source, client) from `?source=` and `?source_import=<import id>` (which implies the
    source "import_review"); (None, None) for no filter. ServiceError for a bad value."""
    source = params.get("source") or None
    raw = params.get("source_import") or None
    if source is not None and source not in Source.values:
        raise ServiceError("invalid", f"source must be one of: {', '.join(Source.values)}.")
    if raw is None:
        return source, None
    if not raw.isascii() or not raw.isdigit():
        raise ServiceError("invalid", "source_import must be the id of one of your imports.")
    if source not in (None, Source.IMPORT_REVIEW):
        raise ServiceError("invalid", 'source_import goes with the source "import_review" only.')
    return Source.IMPORT_REVIEW, str(int(raw))


def _entry_after_write(
    user: Any, target: str, content: str, result: services.WriteResult
) -> MemoryEntry | None:
    if result.entries:
        return result.entries[0]
    # A duplicate (or a replace that merged into an identical entry): return that entry.
    text = services.check_content(content)
    return (
        MemoryEntry.objects.active()
        .filter(owner=user, target=target, content_hash=content_digest(text))
        .first()
    )


class MemoryListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("target", str, enum=Target.values),
            OpenApiParameter("status", str, enum=MemoryEntry.Status.values),
            OpenApiParameter("source", str, enum=Source.values, description="Who wrote it."),
            OpenApiParameter(
                "source_import",
                int,
                description="Only the notes the learning of this chat import wrote.",
            ),
        ],
        responses=MemoryEntrySerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        target = request.query_params.get("target") or None
        state = request.query_params.get("status") or None
        if target is not None:
            services.check_target(target)
        if state is not None and state not in MemoryEntry.Status.values:
            raise ServiceError("invalid", "status must be 'active' or 'pending'.")
        source, client = writer_filter(request.query_params)
        qs = selectors.memory_entries(
            user=request.user, target=target, status=state, source=source, client=client
        )
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        writers_attach(user=request.user, rows=page)
        return paginator.get_paginated_response(MemoryEntrySerializer(page, many=True).data)

    @extend_schema(
        request=EntryCreateSerializer,
        responses={201: MemoryEntrySerializer, 200: MemoryEntrySerializer},
    )
    def post(self, request: Request) -> Response:
        data = _valid(EntryCreateSerializer, request.data)
        result = services.memory_add(
            user=request.user, target=data["target"], content=data["content"], provenance=API
        )
        entry = _entry_after_write(request.user, data["target"], data["content"], result)
        return Response(
            MemoryEntrySerializer(entry).data,
            status=status.HTTP_201_CREATED if result.changed else status.HTTP_200_OK,
        )


class MemoryDetailApi(APIView):
    @extend_schema(responses=MemoryEntrySerializer)
    def get(self, request: Request, entry_id: int) -> Response:
        entry = selectors.access_memory_entry(user=request.user, entry_id=entry_id)
        writers_attach(user=request.user, rows=[entry])
        return Response(MemoryEntrySerializer(entry).data)

    @extend_schema(request=EntryUpdateSerializer, responses=MemoryEntrySerializer)
    def patch(self, request: Request, entry_id: int) -> Response:
        entry = selectors.access_memory_entry(user=request.user, entry_id=entry_id)
        data = _valid(EntryUpdateSerializer, request.data)
        if entry.is_pending:
            raise ServiceError(
                "pending", "This entry waits for approval; approve or reject it instead."
            )
        result = services.memory_entry_update(
            user=request.user, entry_id=entry.pk, content=data["content"], provenance=API
        )
        updated = _entry_after_write(request.user, entry.target, data["content"], result)
        return Response(MemoryEntrySerializer(updated).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, entry_id: int) -> Response:
        entry = selectors.access_memory_entry(user=request.user, entry_id=entry_id)
        if entry.is_pending:
            services.memory_pending_reject(user=request.user, entry_id=entry.pk, provenance=API)
        else:
            services.memory_entry_delete(user=request.user, entry_id=entry.pk, provenance=API)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryApproveApi(APIView):
    @extend_schema(request=None, responses={200: UsageSerializer})
    def post(self, request: Request, entry_id: int) -> Response:
        result = services.memory_pending_approve(
            user=request.user, entry_id=entry_id, provenance=API
        )
        return Response({"message": result.message, **usage_dict(result.usage)})


class MemoryRejectApi(APIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request, entry_id: int) -> Response:
        services.memory_pending_reject(user=request.user, entry_id=entry_id, provenance=API)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryUsageApi(APIView):
    @extend_schema(
        responses=inline_serializer(
            "MemoryUsageBoth", {"memory": UsageSerializer, "user": UsageSerializer}
        )
    )
    def get(self, request: Request) -> Response:
        return Response(
            {
                target: usage_dict(selectors.memory_usage(user=request.user, target=target))
                for target in Target.values
            }
        )


class MemoryExportApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("target", str, enum=Target.values, required=True)],
        responses={(200, "text/markdown"): str},
    )
    def get(self, request: Request) -> HttpResponse:
        target = services.check_target(request.query_params.get("target", ""))
        return export_response(user=request.user, target=target)


def export_response(*, user: Any, target: str) -> HttpResponse:
    text = selectors.memory_export(user=user, target=target)
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    name = "USER.md" if target == Target.USER else "MEMORY.md"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def read_upload(upload: Any) -> str:
    """The text of an uploaded MEMORY.md/USER.md, or a clear error."""
    if upload.size > MAX_IMPORT_BYTES:
        raise ServiceError(
            "too_large", f"The file is too large (at most {MAX_IMPORT_BYTES:,} bytes)."
        )
    try:
        return upload.read().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ServiceError("invalid", "The file is not UTF-8 text.") from None


class MemoryImportApi(APIView):
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(
        request=ImportSerializer,
        responses=inline_serializer(
            "MemoryImportResult", {"message": serializers.CharField(), "usage": UsageSerializer}
        ),
    )
    def post(self, request: Request) -> Response:
        data = _valid(ImportSerializer, request.data)
        if data.get("file") is not None:
            text = read_upload(data["file"])
        elif "content" in data:
            text = data["content"]
        else:
            raise ServiceError("invalid", "Send the file's text as `content` or upload `file`.")
        result = services.memory_import(
            user=request.user,
            target=data["target"],
            text=text,
            replace_all=data["mode"] == "replace",
            provenance=services.Provenance(source=Source.IMPORT),
        )
        return Response({"message": result.message, "usage": usage_dict(result.usage)})
