"""Writes to the catalog (the admin calls these) and the `/v1/models` listing of an endpoint."""

from __future__ import annotations

from typing import Any

import httpx
from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext_lazy

from core.exceptions import ServiceError, lazy_format

from .crypto import encrypt
from .models import ModelEntry


def model_entry_save(
    *, entry: ModelEntry, new_api_key: str = "", clear_api_key: bool = False
) -> ModelEntry:
    """Save ``entry`` (new or changed). The stored key is replaced by ``new_api_key`` when
    given, removed with ``clear_api_key``, else kept. Marking it default or summary takes the
    mark from any other row in the same transaction (the partial unique constraints refuse a
    second one if two admins race)."""
    if not entry.enabled and (entry.is_default or entry.is_summary):
        raise ServiceError(
            "model_disabled",
            gettext_lazy("A disabled model cannot be the default or the summary model."),
        )
    if new_api_key.strip():
        entry.api_key_encrypted = encrypt(new_api_key.strip())
    elif clear_api_key:
        entry.api_key_encrypted = ""
    with transaction.atomic():
        others = ModelEntry.objects.exclude(pk=entry.pk) if entry.pk else ModelEntry.objects.all()
        if entry.is_default:
            others.filter(is_default=True).update(is_default=False)
        if entry.is_summary:
            others.filter(is_summary=True).update(is_summary=False)
        entry.save()
    return entry


def model_endpoint_list(*, base_url: str, api_key: str) -> list[str]:
    """GET ``<base_url>/models`` (OpenAI's listing) and return the model ids, sorted.

    Raises ServiceError with a message an administrator can act on (refused, timed out,
    rejected key, other HTTP status, not an OpenAI-compatible answer). The key is sent as a
    bearer token and never appears in a message."""
    root = (base_url or "https://api.openai.com/v1").rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    timeout = httpx.Timeout(
        float(settings.HERMES_LLM_READ_TIMEOUT), connect=float(settings.HERMES_LLM_CONNECT_TIMEOUT)
    )
    where = httpx.URL(root).host or root
    try:
        response = httpx.get(f"{root}/models", headers=headers, timeout=timeout)
    except httpx.ConnectError as exc:
        refused = "refused" in str(exc).lower() or isinstance(exc.__cause__, ConnectionRefusedError)
        reason = (
            gettext_lazy("%(host)s refused the connection.")
            if refused
            else gettext_lazy("%(host)s could not be reached.")
        )
        raise ServiceError("endpoint_unreachable", lazy_format(reason, host=where)) from exc
    except httpx.TimeoutException as exc:
        raise ServiceError(
            "endpoint_timeout",
            lazy_format(gettext_lazy("%(host)s did not answer in time."), host=where),
        ) from exc
    except httpx.HTTPError as exc:
        raise ServiceError(
            "endpoint_unreachable",
            lazy_format(gettext_lazy("%(host)s could not be reached."), host=where),
        ) from exc
    if response.status_code in (401, 403):
        raise ServiceError(
            "endpoint_auth",
            lazy_format(
                gettext_lazy("%(host)s rejected the API key (HTTP %(status)s)."),
                host=where,
                status=response.status_code,
            ),
        )
    if response.status_code >= 400:
        raise ServiceError(
            "endpoint_error",
            lazy_format(
                gettext_lazy("%(host)s answered HTTP %(status)s to GET /models."),
                host=where,
                status=response.status_code,
            ),
        )
    try:
        data: Any = response.json()
        ids = sorted({str(item["id"]) for item in data["data"]})
    except (ValueError, KeyError, TypeError) as exc:
        raise ServiceError(
            "endpoint_error",
            lazy_format(
                gettext_lazy("%(host)s did not answer with an OpenAI-style model list."),
                host=where,
            ),
        ) from exc
    return ids
