"""The Skills pages. Thin: check who asks, call a selector or a service, render. An unknown
skill or file is ServiceErrorMiddleware's 404 page; other refusals are flashed back on the
page the form was on (`errors_back_to`), or shown in the form being edited.

Action routes live under /skills/-/… because '-' cannot start a skill name, so no skill can
shadow a page.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.exceptions import ServiceError
from core.markdown import render_markdown
from core.middleware import errors_back_to

from . import selectors, services, skillmd
from .forms import SkillCreateForm, SkillEditForm, SkillFileForm, SkillImportForm
from .models import Skill

UNCATEGORISED = "Uncategorised"


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
        {"category": category or UNCATEGORISED, "skills": groups[category]}
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
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Skill {skill.name} created.")
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
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Skill {skill.name} saved.")
            return redirect("skill_detail", name=skill.name)
    return render(request, "skills/form.html", {"form": form, "skill": skill})


@login_required
@require_POST
@errors_back_to("skill_detail", args=["name"])
def skill_delete(request: HttpRequest, name: str) -> HttpResponse:
    skill = _own(request, name)
    services.skill_delete(user=request.user, name=skill.name)
    messages.success(request, f"Skill {skill.name} deleted.")
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
    messages.success(request, "Settings saved.")
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
    messages.success(request, f"Saved {item.path}.")
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
        messages.error(request, exc.message)
    else:
        messages.success(request, "File removed.")
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
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Restored revision {number} (saved as a new revision).")
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
def skill_import(request: HttpRequest) -> HttpResponse:
    form = SkillImportForm(request.POST, request.FILES)
    if not form.is_valid():
        messages.error(request, "Choose a zip file to import.")
        return redirect("skill_list")
    report = services.skills_import_zip(user=request.user, upload=form.cleaned_data["archive"])
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
