"""Context for the Sessions page (/sessions/): the conversation list, or search results.

Kept out of views.py so the views stay thin; the page reads the same services as the API.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.urls import reverse
from rest_framework.exceptions import ValidationError

from core.exceptions import ServiceError

from ..lineage import conversation_rows, conversation_tips
from .backends import SEARCHABLE_ROLES
from .service import search_conversations
from .summarise import summaries_available

PAGE_SIZE = 50
SEARCH_LIMIT = 20
FILTER_FIELDS = ("q", "role", "since", "until")


# The filters' labels on the page, so an error names the box the person typed in.
_LABELS = {"role": "Role", "since": "From", "until": "To"}


def _first_error(exc: ValidationError) -> str:
    detail = exc.detail
    if isinstance(detail, dict):
        field, errors = next(iter(detail.items()))
        message = errors[0] if isinstance(errors, list) and errors else errors
        return f"{_LABELS.get(field, field)}: {message}"
    return str(detail)


def list_url(values: dict[str, str]) -> str:
    """The Sessions page URL carrying the given non-empty search fields."""
    query = urlencode({k: v for k, v in values.items() if k in FILTER_FIELDS and v})
    return reverse("session_list") + (f"?{query}" if query else "")


def session_list_context(request: HttpRequest) -> dict[str, Any]:
    from ..apis import search_params  # the API's validation, so both accept the same input

    form = {name: request.GET.get(name, "") for name in FILTER_FIELDS}
    context: dict[str, Any] = {
        "form": form,
        "roles": SEARCHABLE_ROLES,
        "searching": bool(form["q"].strip()),
        "summaries_available": summaries_available(),
        "error": "",
    }
    if context["searching"]:
        try:
            params = search_params(
                {
                    "role": form["role"],
                    "since": form["since"] or None,
                    "until": form["until"] or None,
                }
            )
        except ValidationError as exc:
            context["error"] = _first_error(exc)
            params = None
        except ServiceError as exc:
            context["error"] = exc.text
            params = None
        results = []
        if params is not None:
            result = search_conversations(
                owner=request.user,
                query=form["q"],
                roles=params["roles"],
                since=params["since"],
                until=params["until"],
                limit=SEARCH_LIMIT,
            )
            results = result.conversations
        context["results"] = results
        return context
    paginator = Paginator(conversation_tips(owner=request.user), PAGE_SIZE)
    page = paginator.get_page(request.GET.get("page"))
    context["page"] = page
    context["conversations"] = conversation_rows(owner=request.user, tips=page.object_list)
    return context
