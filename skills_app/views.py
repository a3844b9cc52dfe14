"""The Skills pages. Thin: check who asks, call a selector or a service, render. An unknown
skill or file is ServiceErrorMiddleware's 404 page; other refusals are flashed back on the
page the form was on (`errors_back_to`), or shown in the form being edited.

Action routes live under /skills/-/… because '-' cannot start a skill name, so no skill can
shadow a page.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST

from core.exceptions import ServiceError
from core.markdown import render_markdown
from core.middleware import errors_back_to

from . import page_text, selectors, services, skillmd
from .forms import SkillCreateForm, SkillEditForm, SkillFileForm, SkillImportForm
from .models import Skill

UNCATEGORISED = gettext_lazy("Uncategorised")

#: A revision's summary (written in English with it, from the services) as the reader reads it.
SUMMARIES = (
    (re.compile(r"^created (?P<name>.+)$"), gettext_lazy("created %(name)s")),
    (re.compile(r"^rewrote SKILL\.md$"), gettext_lazy("rewrote SKILL.md")),
    (re.compile(r"^imported SKILL\.md$"), gettext_lazy("imported SKILL.md")),
    (re.compile(r"^team skill published$"), gettext_lazy("team skill published")),
    (re.compile(r"^team skill edited$"), gettext_lazy("team skill edited")),
    (
        re.compile(r"^patched (?P<document>[^:]+): (?P<change>.*)$", re.S),
        gettext_lazy("patched %(document)s: %(change)s"),
    ),
    (
        re.compile(r"^wrote (?P<path>.+) \((?P<size>[\d,]+) bytes\)$"),
        gettext_lazy("wrote %(path)s (%(size)s bytes)"),
    ),
    (re.compile(r"^removed (?P<path>.+)$"), gettext_lazy("removed %(path)s")),
    (
        re.compile(r"^rolled back (?P<document>.+) to r(?P<number>\d+)$"),
        gettext_lazy("rolled back %(document)s to r%(number)s"),
    ),
)
STATUSES = {
    "created": gettext_lazy("created"),
    "updated": gettext_lazy("updated"),
    "unchanged": gettext_lazy("unchanged"),
    "error": gettext_lazy("error"),
}
KEPT = '<span translate="no">{}</span>'
_FILES = re.compile(r"^(\d+) files?$")


def summary_shown(summary: str) -> SafeString:
    """A revision's summary in the reader's language, with the names and paths in it kept
    as they are (`translate="no"`)."""
    for pattern, text in SUMMARIES:
        if match := pattern.match(summary):
            values = {
                key: value if key in ("size", "number") else format_html(KEPT, value)
                for key, value in match.groupdict().items()
            }
            # The sentence escaped, the values escaped (format_html): nothing unescaped is left.
            return mark_safe(conditional_escape(str(text)) % values)  # noqa: S308
    return format_html("{}", summary)


def _own(request: HttpRequest, name: str) -> Skill:
    skill = selectors.skill_get(user=request.user, name=name)
    if skill.is_team:
        raise Http404
    return skill


def _groups(skills: list[Skill]) -> list[dict[str, Any]]:
    """Skills by category, categories A–Z, skills without one last."""
    groups: dict[str, list[Skill]] = {}
    for skill in skills:
        groups.setdefault(skill.category, []).append(skill)
    return [
        {"category": category or UNCATEGORISED, "named": bool(category), "skills": groups[category]}
        for category in sorted(groups, key=lambda c: (c == "", c))
    ]


@login_required
def skill_list(request: HttpRequest) -> HttpResponse:
    visible = list(
        selectors.skills_visible(user=request.user).defer("content", "body", "frontmatter")
    )
    own_names = {s.name for s in visible if not s.is_team}
    mine = [s for s in visible if not s.is_team]
    team = [s for s in visible if s.is_team]
    return render(
        request,
        "skills/list.html",
        {
            "mine": _groups(mine),
            "team": _groups(team),
            "mine_count": len(mine),
            "team_count": len(team),
            "shadowed": sorted(s.name for s in team if s.name in own_names),
            "import_form": SkillImportForm(),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def skill_new(request: HttpRequest) -> HttpResponse:
    initial = {"content": skillmd.TEMPLATE.format(name="my-skill", title="My skill")}
    form = SkillCreateForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            skill = services.skill_create(
                user=request.user,
                content=form.cleaned_data["content"],
                category=form.cleaned_data["category"],
            )
        except ServiceError as exc:
            form.add_error(None, page_text.page_message(exc))
        else:
            messages.success(request, _("Skill %(name)s created.") % {"name": skill.name})
            return redirect("skill_detail", name=skill.name)
    return render(request, "skills/form.html", {"form": form, "skill": None})


@login_required
def skill_detail(request: HttpRequest, name: str) -> HttpResponse:
    skill = selectors.skill_get(user=request.user, name=name)
    return render(
        request,
        "skills/detail.html",
        {
            "skill": skill,
            "body_html": render_markdown(skill.body),
            "extra_frontmatter": {
                key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
                for key, value in skill.frontmatter.items()
                if key not in ("name", "description", "tags")
            },
            "last_revision": skill.revisions.order_by("-number").first(),
            "files": list(selectors.skill_files(skill=skill)),
            "file_dirs": skillmd.FILE_DIRS,
            "file_form": SkillFileForm(),
            "revision_count": skill.revisions.count(),
        },
    )


@login_required
@require_http_methods(["GET", "POST"])
def skill_edit(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    form = SkillEditForm(
        request.POST or None, initial={"content": skill.content, "category": skill.category}
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.skill_edit(
                user=request.user,
                name=skill.name,
                content=form.cleaned_data["content"],
                category=form.cleaned_data["category"],
            )
        except ServiceError as exc:
            form.add_error(None, page_text.page_message(exc))
        else:
            messages.success(request, _("Skill %(name)s saved.") % {"name": skill.name})
            return redirect("skill_detail", name=skill.name)
    return render(request, "skills/form.html", {"form": form, "skill": skill})


@login_required
@require_POST
@errors_back_to("skill_detail", args=["name"])
@page_text.reworded
def skill_delete(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    services.skill_delete(user=request.user, name=skill.name)
    messages.success(request, _("Skill %(name)s deleted.") % {"name": skill.name})
    return redirect("skill_list")


@login_required
@require_POST
def skill_flags(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    services.skill_set_flags(
        user=request.user,
        name=skill.name,
        enabled=request.POST.get("enabled") == "on",
        pinned=request.POST.get("pinned") == "on",
    )
    messages.success(request, _("Settings saved."))
    return redirect("skill_detail", name=skill.name)


@login_required
def skill_file(request: HttpRequest, name: str, path: str) -> HttpResponse:
    skill = selectors.skill_get(user=request.user, name=name)
    item = selectors.skill_file_get(skill=skill, path=path)
    if request.GET.get("download"):
        response = HttpResponse(bytes(item.data), content_type="application/octet-stream")
        filename = item.path.rsplit("/", 1)[-1].replace('"', "")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
    text = item.text()
    rendered = render_markdown(text) if text is not None and path.endswith(".md") else ""
    return render(
        request,
        "skills/file.html",
        {"skill": skill, "item": item, "text": text, "rendered": rendered},
    )


@login_required
@require_POST
@errors_back_to("skill_detail", args=["name"])
@page_text.reworded
def skill_file_add(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    form = SkillFileForm(request.POST, request.FILES)
    if not form.is_valid():
        for errors in form.errors.values():
            for error in errors:
                messages.error(request, error)
        return redirect("skill_detail", name=skill.name)
    upload = form.cleaned_data.get("upload")
    if upload is not None:
        data: str | bytes = upload.read(skillmd.FILE_MAX_BYTES + 1)
    else:
        data = form.cleaned_data["content"]
    item = services.skill_file_write(
        user=request.user, name=skill.name, file_path=form.cleaned_data["path"], data=data
    )
    messages.success(request, _("Saved %(path)s.") % {"path": item.path})
    return redirect("skill_detail", name=skill.name)


@login_required
@require_POST
def skill_file_remove(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    # Local, not the middleware: a file already gone (a double click, another tab) is
    # reported on the skill's page rather than as a 404.
    try:
        services.skill_file_remove(
            user=request.user, name=skill.name, file_path=request.POST.get("path", "")
        )
    except ServiceError as exc:
        messages.error(request, page_text.page_message(exc))
    else:
        messages.success(request, _("File removed."))
    return redirect("skill_detail", name=skill.name)


@login_required
def skill_history(request: HttpRequest, name: str) -> HttpResponse:
    skill = selectors.skill_get(user=request.user, name=name)
    revisions = []
    current: set[str] = set()
    for revision in selectors.skill_revisions(skill=skill)[:100]:
        # The newest revision of each document is what is there now; restoring it is moot.
        is_current = revision.file_path not in current
        current.add(revision.file_path)
        revisions.append(
            {
                "revision": revision,
                "summary_shown": summary_shown(revision.summary),
                "diff": selectors.revision_diff(revision=revision),
                "current": is_current and revision.action != "remove_file",
                "restorable": not is_current
                and (revision.content is not None or revision.action == "remove_file"),
            }
        )
    return render(request, "skills/history.html", {"skill": skill, "revisions": revisions})


@login_required
@require_POST
def skill_rollback(request: HttpRequest, name: str, number: int) -> HttpResponse:
    skill = _own(request, name)
    # Local, as for removing a file: a revision already gone is reported on the history page.
    try:
        services.skill_rollback(user=request.user, name=skill.name, number=number)
    except ServiceError as exc:
        messages.error(request, page_text.page_message(exc))
    else:
        messages.success(
            request,
            _("Restored revision %(number)s (saved as a new revision).") % {"number": number},
        )
    return redirect("skill_history", name=skill.name)


@login_required
def skill_export(request: HttpRequest) -> HttpResponse:
    data = services.skills_export_zip(
        user=request.user, include_team=request.GET.get("team") == "1"
    )
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = 'attachment; filename="skills.zip"'
    return response


@login_required
@require_POST
@errors_back_to("skill_list")
@page_text.reworded
def skill_import(request: HttpRequest) -> HttpResponse:
    form = SkillImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, _("Choose a zip file to import."))
        return redirect("skill_list")
    report = services.skills_import_zip(user=request.user, upload=form.cleaned_data["archive"])
    for result in report.results:
        result.status_shown = STATUSES.get(result.status, result.status)
        if result.status == "error":
            result.message = page_text.page_message(ServiceError("", result.message))
        if match := _FILES.match(result.message):
            count = int(match[1])
            result.message = ngettext("%(count)d file", "%(count)d files", count) % {"count": count}
    return render(
        request,
        "skills/import_report.html",
        {
            "report": report,
            "created": report.count("created"),
            "updated": report.count("updated"),
            "unchanged": report.count("unchanged"),
            "failed": report.count("error"),
        },
    )
