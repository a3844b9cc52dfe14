from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .models import Session


@login_required
def dashboard(request: HttpRequest) -> HttpResponse:
    recent = (
        Session.objects.filter(owner=request.user, archived=False)
        .only("id", "title", "last_activity_at", "message_count")
        .order_by("-pinned", "-last_activity_at")[:10]
    )
    return render(request, "dashboard.html", {"recent_sessions": recent})
