"""API-wide plumbing: every error leaves as {"error": {"code", "message", …}}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.utils.translation import gettext
from rest_framework import exceptions as drf_exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from .exceptions import ServiceError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ServiceError):
        response = Response({"error": exc.as_dict()}, status=exc.status_code)
        if "retry_after" in exc.details:
            response["Retry-After"] = str(exc.details["retry_after"])
        return response
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, drf_exceptions.ValidationError):
        body: dict[str, Any] = {
            "code": "invalid",
            "message": gettext("The request was not valid."),
            "fields": response.data,
        }
    else:
        detail = getattr(exc, "detail", str(exc))
        code = detail.code if hasattr(detail, "code") else "error"
        body = {"code": str(code), "message": str(detail)}
    response.data = {"error": body}
    return response
