"""REST endpoints for skills, scoped to the caller: their own skills plus the team's (which
are read-only). Another user's skill is a 404 like a missing one."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.exceptions import ServiceError

from . import selectors, services
from .models import Skill, SkillFile, SkillRevision


class SkillOut(serializers.Serializer):
    name = serializers.CharField()
    category = serializers.CharField()
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    team = serializers.BooleanField()
    read_only = serializers.BooleanField()
    enabled = serializers.BooleanField()
    pinned = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    url = serializers.CharField(help_text="The skill's page.")


class FileOut(serializers.Serializer):
    path = serializers.CharField()
    size = serializers.IntegerField()
    updated_at = serializers.DateTimeField()
    content = serializers.CharField(required=False, help_text="Text files.")
    content_base64 = serializers.CharField(required=False, help_text="Binary files.")


class SkillDetailOut(SkillOut):
    content = serializers.CharField(help_text="The whole SKILL.md.")
    frontmatter = serializers.DictField()
    files = FileOut(many=True)


class RevisionOut(serializers.Serializer):
    number = serializers.IntegerField()
    action = serializers.CharField()
    author = serializers.ChoiceField(choices=SkillRevision.Author.choices)
    document = serializers.CharField(help_text="SKILL.md or the file's path.")
    summary = serializers.CharField()
    source_session = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()


class RevisionDetailOut(RevisionOut):
    content = serializers.CharField(allow_null=True)
    diff = serializers.CharField(help_text="Unified diff against the previous version.")


def _results(name: str, item: type[serializers.Serializer]) -> Any:
    return inline_serializer(name=name, fields={"results": item(many=True)})


def skill_data(skill: Skill, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": skill.name,
        "category": skill.category,
        "description": skill.description,
        "tags": skill.tags,
        "team": skill.is_team,
        "read_only": skill.is_team,
        "enabled": skill.enabled,
        "pinned": skill.pinned,
        "created_at": skill.created_at,
        "updated_at": skill.updated_at,
        "url": reverse("skill_detail", args=[skill.name]),
    }
    if full:
        data["content"] = skill.content
        data["frontmatter"] = skill.frontmatter
        data["files"] = [file_data(f) for f in selectors.skill_files(skill=skill)]
    return data


def file_data(item: SkillFile, *, content: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"path": item.path, "size": item.size, "updated_at": item.updated_at}
    if content:
        text = item.text()
        if text is None:
            data["content_base64"] = base64.b64encode(bytes(item.data)).decode("ascii")
        else:
            data["content"] = text
    return data


def revision_data(revision: SkillRevision, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "number": revision.number,
        "action": revision.action,
        "author": revision.author,
        "document": revision.document,
        "summary": revision.summary,
        "source_session": revision.source_session_id,
        "created_at": revision.created_at,
    }
    if full:
        data["content"] = revision.content
        data["diff"] = "\n".join(line.text for line in selectors.revision_diff(revision=revision))
    return data


def _valid(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class CreateIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    content = serializers.CharField(trim_whitespace=False, max_length=200_000)
    category = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")


class EditIn(serializers.Serializer):
    content = serializers.CharField(trim_whitespace=False, max_length=200_000)
    category = serializers.CharField(required=False, allow_blank=True, max_length=200)


class PatchIn(serializers.Serializer):
    old_string = serializers.CharField(required=False, trim_whitespace=False)
    new_string = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    replace_all = serializers.BooleanField(required=False, default=False)
    file_path = serializers.CharField(required=False, allow_blank=True)
    content = serializers.CharField(required=False, trim_whitespace=False, max_length=200_000)
    category = serializers.CharField(required=False, allow_blank=True, max_length=200)
    enabled = serializers.BooleanField(required=False)
    pinned = serializers.BooleanField(required=False)


class DeleteIn(serializers.Serializer):
    absorbed_into = serializers.CharField(required=False, allow_blank=True)


class FileIn(serializers.Serializer):
    path = serializers.CharField(max_length=300)
    content = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    content_base64 = serializers.CharField(required=False)


class FileContentIn(serializers.Serializer):
    content = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)
    content_base64 = serializers.CharField(required=False)


def _file_bytes(data: dict[str, Any]) -> str | bytes:
    if "content_base64" in data:
        try:
            return base64.b64decode(data["content_base64"], validate=True)
        except (binascii.Error, ValueError):
            raise ServiceError("invalid", "content_base64 is not valid base64.") from None
    if "content" in data:
        return data["content"]
    raise ServiceError("invalid", "Give the file as 'content' (text) or 'content_base64'.")


class SkillListApi(APIView):
    @extend_schema(
        operation_id="skills_list",
        parameters=[OpenApiParameter("category", str, description="Only this category.")],
        responses=inline_serializer(
            name="SkillList",
            fields={"count": serializers.IntegerField(), "results": SkillOut(many=True)},
        ),
    )
    def get(self, request: Request) -> Response:
        skills = selectors.skills_visible(user=request.user)
        category = request.query_params.get("category")
        if category:
            skills = skills.filter(category=category)
        results = [skill_data(s) for s in skills.defer("content", "body", "frontmatter")]
        return Response({"count": len(results), "results": results})

    @extend_schema(operation_id="skills_create", request=CreateIn, responses={201: SkillDetailOut})
    def post(self, request: Request) -> Response:
        data = _valid(CreateIn, request.data)
        skill = services.skill_create(
            user=request.user,
            name=data["name"],
            content=data["content"],
            category=data.get("category", ""),
        )
        return Response(skill_data(skill, full=True), status=status.HTTP_201_CREATED)


class SkillDetailApi(APIView):
    @extend_schema(operation_id="skills_retrieve", responses=SkillDetailOut)
    def get(self, request: Request, name: str) -> Response:
        skill = selectors.skill_get(user=request.user, name=name)
        return Response(skill_data(skill, full=True))

    @extend_schema(operation_id="skills_update", request=EditIn, responses=SkillDetailOut)
    def put(self, request: Request, name: str) -> Response:
        data = _valid(EditIn, request.data)
        skill = services.skill_edit(
            user=request.user, name=name, content=data["content"], category=data.get("category")
        )
        return Response(skill_data(skill, full=True))

    @extend_schema(
        operation_id="skills_partial_update",
        request=PatchIn,
        responses=SkillDetailOut,
        description="Patch (old_string → new_string, unique unless replace_all), rewrite "
        "(content), move (category) or switch (enabled, pinned).",
    )
    def patch(self, request: Request, name: str) -> Response:
        data = _valid(PatchIn, request.data)
        if not ({"old_string", "content", "category", "enabled", "pinned"} & data.keys()):
            raise ServiceError(
                "invalid",
                "Send old_string/new_string (patch), content (rewrite), category, enabled or "
                "pinned.",
            )
        if "old_string" in data:
            services.skill_patch(
                user=request.user,
                name=name,
                old_string=data["old_string"],
                new_string=data.get("new_string", ""),
                replace_all=data["replace_all"],
                file_path=data.get("file_path") or None,
            )
        elif "content" in data or "category" in data:
            current = selectors.skill_get_own(user=request.user, name=name)
            services.skill_edit(
                user=request.user,
                name=name,
                content=data.get("content", current.content),
                category=data.get("category"),
            )
        if "enabled" in data or "pinned" in data:
            services.skill_set_flags(
                user=request.user, name=name, enabled=data.get("enabled"), pinned=data.get("pinned")
            )
        skill = selectors.skill_get_own(user=request.user, name=name)
        return Response(skill_data(skill, full=True))

    @extend_schema(operation_id="skills_destroy", request=DeleteIn, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        data = _valid(DeleteIn, request.data or {})
        services.skill_delete(
            user=request.user, name=name, absorbed_into=data.get("absorbed_into") or None
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class SkillFilesApi(APIView):
    @extend_schema(operation_id="skills_files_list", responses=_results("SkillFileList", FileOut))
    def get(self, request: Request, name: str) -> Response:
        skill = selectors.skill_get(user=request.user, name=name)
        return Response({"results": [file_data(f) for f in selectors.skill_files(skill=skill)]})

    @extend_schema(operation_id="skills_files_create", request=FileIn, responses={201: FileOut})
    def post(self, request: Request, name: str) -> Response:
        data = _valid(FileIn, request.data)
        item = services.skill_file_write(
            user=request.user, name=name, file_path=data["path"], data=_file_bytes(data)
        )
        return Response(file_data(item, content=True), status=status.HTTP_201_CREATED)


class SkillFileApi(APIView):
    @extend_schema(operation_id="skills_files_retrieve", responses=FileOut)
    def get(self, request: Request, name: str, path: str) -> Response:
        skill = selectors.skill_get(user=request.user, name=name)
        return Response(file_data(selectors.skill_file_get(skill=skill, path=path), content=True))

    @extend_schema(operation_id="skills_files_update", request=FileContentIn, responses=FileOut)
    def put(self, request: Request, name: str, path: str) -> Response:
        data = _valid(FileContentIn, request.data)
        item = services.skill_file_write(
            user=request.user, name=name, file_path=path, data=_file_bytes(data)
        )
        return Response(file_data(item, content=True))

    @extend_schema(operation_id="skills_files_destroy", responses={204: None})
    def delete(self, request: Request, name: str, path: str) -> Response:
        services.skill_file_remove(user=request.user, name=name, file_path=path)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SkillRevisionsApi(APIView):
    @extend_schema(
        operation_id="skills_revisions_list", responses=_results("SkillRevisionList", RevisionOut)
    )
    def get(self, request: Request, name: str) -> Response:
        skill = selectors.skill_get(user=request.user, name=name)
        revisions = selectors.skill_revisions(skill=skill)
        return Response({"results": [revision_data(r) for r in revisions]})


class SkillRevisionApi(APIView):
    @extend_schema(operation_id="skills_revisions_retrieve", responses=RevisionDetailOut)
    def get(self, request: Request, name: str, number: int) -> Response:
        skill = selectors.skill_get(user=request.user, name=name)
        revision = selectors.skill_revision_get(skill=skill, number=number)
        return Response(revision_data(revision, full=True))


class SkillRollbackApi(APIView):
    @extend_schema(operation_id="skills_rollback", request=None, responses=SkillDetailOut)
    def post(self, request: Request, name: str, number: int) -> Response:
        skill = services.skill_rollback(user=request.user, name=name, number=number)
        return Response(skill_data(skill, full=True))
