"""The Inferences page (/inferences/): what the agent inferred about the person, why, and
the controls to correct, rate, delete, or switch inference off. Thin: every change goes
through memory.inferences.services; a refused correction re-renders the page with the
text the person typed and the reason (nothing is lost). An unknown inference, or another
person's, is ServiceErrorMiddleware's 404 page."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from core.exceptions import NotFound, ServiceError

from ..models import Inference
from ..providers.manager import active_provider_name
from . import selectors, services
from .config import local_config
from .guard import reason_shown


def _render(
    request: HttpRequest, *, status: int = 200, edit: tuple[int, str, str] | None = None
) -> HttpResponse:
    grouped = selectors.inferences_for_page(user=request.user)
    for items in grouped.values():
        for item in items:
            item.reason_shown = reason_shown(item.inference.quarantine_reason)
            if edit is not None and item.inference.pk == edit[0]:
                item.edit_text, item.edit_error = edit[1], edit[2]
    context: dict[str, Any] = {
        "active": grouped.get(Inference.Status.ACTIVE, []),
        "quarantined": grouped.get(Inference.Status.QUARANTINED, []),
        "contradicted": grouped.get(Inference.Status.CONTRADICTED, []),
        "total": sum(len(v) for v in grouped.values()),
        "consent": selectors.inference_consent(user=request.user),
        "memory_on": selectors.memory_on(user=request.user),
        "provider_active": active_provider_name() == "local",
        "provider_name": active_provider_name(),
        "min_trust": local_config().min_trust,
    }
    return render(request, "memory/inferences.html", context, status=status)


def _back(inference_id: int | None = None) -> HttpResponse:
    url = reverse("inference_list")
    return redirect(f"{url}#inference-{inference_id}" if inference_id else url)


@login_required
@require_GET
def inference_list(request: HttpRequest) -> HttpResponse:
    return _render(request)


@login_required
@require_POST
def inference_edit(request: HttpRequest, inference_id: int) -> HttpResponse:
    text = request.POST.get("statement", "")
    try:
        services.inference_correct(user=request.user, inference_id=inference_id, statement=text)
    except NotFound:
        raise  # ServiceErrorMiddleware: the 404 page, for another person's inference too
    except ServiceError as exc:
        return _render(request, status=400, edit=(inference_id, text, exc.message))
    messages.success(request, _("Inference corrected."))
    return _back(inference_id)


@login_required
@require_POST
def inference_feedback(request: HttpRequest, inference_id: int) -> HttpResponse:
    value = request.POST.get("helpful")
    if value not in ("yes", "no"):
        messages.error(request, _("Choose helpful or not helpful."))
        return _back(inference_id)
    inference = services.inference_feedback(
        user=request.user, inference_id=inference_id, helpful=value == "yes"
    )
    messages.success(
        request,
        (
            _("Thanks — trust is now %(trust)s.")
            if value == "yes"
            else _("Noted — trust is now %(trust)s.")
        )
        % {"trust": f"{inference.trust:.2f}"},
    )
    return _back(inference_id)


@login_required
@require_POST
def inference_delete(request: HttpRequest, inference_id: int) -> HttpResponse:
    services.inference_delete(user=request.user, inference_id=inference_id)
    messages.success(request, _("Inference deleted. It will not be used or inferred again."))
    return _back()


@login_required
@require_POST
def inference_delete_all(request: HttpRequest) -> HttpResponse:
    count = services.inferences_delete_all(user=request.user)
    messages.success(
        request,
        ngettext("Deleted %(count)d inference.", "Deleted %(count)d inferences.", count)
        % {"count": count}
        if count
        else _("There was nothing to delete."),
    )
    return _back()


@login_required
@require_POST
def inference_consent(request: HttpRequest) -> HttpResponse:
    enabled = request.POST.get("enabled") == "on"
    services.inference_settings_set(user=request.user, enabled=enabled)
    messages.success(
        request,
        _("Inference is on.")
        if enabled
        else _("Inference is off: nothing new is inferred or recalled."),
    )
    return _back()
