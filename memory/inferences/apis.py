"""REST endpoints for inferences, owner-scoped: another person's inference is a 404 like
a missing one. Errors leave as {"error": {"code", "message", …}} (core.api).

    GET    /api/inferences/            list (?status=active|quarantined|contradicted)
    DELETE /api/inferences/            delete all
    GET    /api/inferences/<id>/       one, with its evidence message ids
    PATCH  /api/inferences/<id>/       {"statement": STR} corrects it;
                                       {"feedback": "helpful"|"unhelpful"} rates it
    DELETE /api/inferences/<id>/       delete (never recalled or derived again)
    GET    /api/inferences/settings/   {"enabled": BOOL}
    PATCH  /api/inferences/settings/   {"enabled": BOOL} switches inference on or off
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ServiceError

from ..apis import StrictCharField
from ..models import Inference
from . import selectors, services


class InferenceSerializer(serializers.ModelSerializer):
    evidence = serializers.SerializerMethodField()
    source_session = serializers.CharField(source="source_session_id", allow_null=True)
    contradicted_by = serializers.IntegerField(source="contradicted_by_id", allow_null=True)
    confidence = serializers.FloatField()
    trust = serializers.FloatField()

    class Meta:
        model = Inference
        fields = [
            "id",
            "statement",
            "category",
            "status",
            "origin",
            "quarantine_reason",
            "confidence",
            "trust",
            "helpful_count",
            "unhelpful_count",
            "use_count",
            "evidence",
            "source_session",
            "contradicted_by",
            "created_at",
            "updated_at",
            "last_used_at",
        ]
        read_only_fields = fields

    def get_evidence(self, obj: Inference) -> list[int]:
        # Prefetched by the views; the owner filter keeps a stray link from showing.
        return sorted(m.pk for m in obj.evidence.all() if m.session.owner_id == obj.owner_id)


def _with_evidence(qs: Any) -> Any:
    return qs.prefetch_related("evidence__session")


class InferencePatchSerializer(serializers.Serializer):
    # Blank reaches the service, which says "The statement cannot be empty."
    statement = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    feedback = serializers.ChoiceField(choices=["helpful", "unhelpful"], required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("statement" in attrs) == ("feedback" in attrs):
            raise serializers.ValidationError("Send either `statement` or `feedback`.")
        return attrs


class SettingsSerializer(serializers.Serializer):
    enabled = serializers.BooleanField()


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ServiceError("invalid", "The request body must be a JSON object.")
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class InferenceListApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("status", str, enum=Inference.Status.values)],
        responses=InferenceSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        state = request.query_params.get("status") or None
        if state is not None and state not in Inference.Status.values:
            raise ServiceError(
                "invalid", f"status must be one of: {', '.join(Inference.Status.values)}."
            )
        qs = _with_evidence(selectors.inferences(user=request.user, status=state))
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(InferenceSerializer(page, many=True).data)

    @extend_schema(
        responses=inline_serializer("InferencesDeleted", {"deleted": serializers.IntegerField()}),
        operation_id="inferences_destroy_all",
    )
    def delete(self, request: Request) -> Response:
        return Response({"deleted": services.inferences_delete_all(user=request.user)})


class InferenceDetailApi(APIView):
    def _get(self, request: Request, inference_id: int) -> Inference:
        found = selectors.access_inference(user=request.user, inference_id=inference_id)
        return _with_evidence(Inference.objects.filter(pk=found.pk)).get()

    @extend_schema(responses=InferenceSerializer)
    def get(self, request: Request, inference_id: int) -> Response:
        return Response(InferenceSerializer(self._get(request, inference_id)).data)

    @extend_schema(request=InferencePatchSerializer, responses=InferenceSerializer)
    def patch(self, request: Request, inference_id: int) -> Response:
        selectors.access_inference(user=request.user, inference_id=inference_id)
        data = _valid(InferencePatchSerializer, request.data)
        if "statement" in data:
            services.inference_correct(
                user=request.user, inference_id=inference_id, statement=data["statement"]
            )
        else:
            services.inference_feedback(
                user=request.user,
                inference_id=inference_id,
                helpful=data["feedback"] == "helpful",
            )
        return Response(InferenceSerializer(self._get(request, inference_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, inference_id: int) -> Response:
        services.inference_delete(user=request.user, inference_id=inference_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class InferenceSettingsApi(APIView):
    @extend_schema(responses=SettingsSerializer)
    def get(self, request: Request) -> Response:
        return Response({"enabled": selectors.inference_consent(user=request.user)})

    @extend_schema(request=SettingsSerializer, responses=SettingsSerializer)
    def patch(self, request: Request) -> Response:
        data = _valid(SettingsSerializer, request.data)
        row = services.inference_settings_set(user=request.user, enabled=data["enabled"])
        return Response({"enabled": row.enabled})
