"""`GET /api/models/`: what the model picker offers (names only: no URL, key or price)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .selectors import ModelChoice, default_choice, enabled_choices


def picker_entries() -> list[dict[str, object]]:
    """The enabled models as the picker shows them, the default one marked."""
    default = default_choice().ref
    return [picker_entry(choice, default=choice.ref == default) for choice in enabled_choices()]


def picker_entry(choice: ModelChoice, *, default: bool = False) -> dict[str, object]:
    return {"id": choice.ref, "name": choice.name, "default": default}


class ModelListApi(APIView):
    @extend_schema(
        responses=inline_serializer(
            "ModelList",
            {
                "results": serializers.ListField(
                    child=inline_serializer(
                        "ModelOption",
                        {
                            "id": serializers.CharField(),
                            "name": serializers.CharField(),
                            "default": serializers.BooleanField(),
                        },
                    )
                )
            },
        )
    )
    def get(self, request: Request) -> Response:
        return Response({"results": picker_entries()})
