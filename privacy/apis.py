"""The data subject's own endpoints under /api/me/: who am I, erase my account, and
"Download my data" (synchronous for small accounts, else export jobs to poll)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils.translation import gettext, gettext_lazy
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.mail import site_origin
from core.exceptions import ServiceError
from memory.models import Source
from memory.selectors import WriterCount
from sessions_app.models import Message

from . import chat_jobs, erase, jobs
from .chat_learning.notes import chat_import_notes_remove, learned_counts
from .models import ChatImportJob, ExportJob
from .stages import stage_text

ME = inline_serializer(
    "Me",
    {
        "id": serializers.IntegerField(),
        "username": serializers.CharField(),
        "is_staff": serializers.BooleanField(),
    },
)
EXPORT_JOB = OpenApiResponse(
    description="An export job: id, status, progress, stage, error, "
    "size, created_at, finished_at, expires_at, url, download_url"
)


class MeApi(APIView):
    @extend_schema(responses=ME, operation_id="me_retrieve")
    def get(self, request: Request) -> Response:
        user = request.user
        return Response({"id": user.pk, "username": user.get_username(), "is_staff": user.is_staff})

    @extend_schema(
        request=inline_serializer(
            "EraseAccount",
            {
                "password": serializers.CharField(required=False),
                "confirm": serializers.CharField(required=False),
            },
        ),
        responses={204: None},
        description="Delete your account and everything stored about you, for good. Confirm "
        "with your password; an account without one (single sign-on) with its username as "
        "`confirm`, from a session that signed in within the last 10 minutes.",
    )
    def delete(self, request: Request) -> Response:
        data = request.data if hasattr(request.data, "get") else {}
        erase.account_erase(
            user=request.user,
            password=data.get("password"),
            confirm=data.get("confirm"),
            request=request,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- "Download my data" -----------------------------------------------------------------------


def job_payload(job: ExportJob) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": job.pk,
        "status": job.status,
        "progress": job.progress,
        "stage": stage_text(job.stage),
        "error": job.error_text,
        "size": job.size,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "expires_at": job.expires_at,
        "url": reverse("api-me-export-job", args=[job.pk]),
        "download_url": None,
    }
    if job.status == ExportJob.Status.DONE:
        data["download_url"] = reverse("api-me-export-download", args=[job.pk])
    return data


class MeExportApi(APIView):
    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiResponse(description="The archive"),
            202: OpenApiResponse(description="Large account: an export job to poll"),
        },
        description=(
            "Everything stored about you as a zip (manifest.json, export.json and a Hermes "
            "home with state.db). Accounts with more than HERMES_EXPORT_SYNC_MAX_MESSAGES "
            "messages (or ?async=1) get 202 and an export job: poll its `url`, then GET its "
            "`download_url`."
        ),
    )
    def get(self, request: Request) -> Any:
        size = Message.objects.filter(session__owner=request.user).count()
        if request.query_params.get("async") or size > settings.HERMES_EXPORT_SYNC_MAX_MESSAGES:
            job = jobs.export_job_start(user=request.user, origin=site_origin(request))
            body = {
                "job": job_payload(job),
                "message": gettext("Your archive is being built; poll `url`, then download it."),
            }
            return Response(body, status=202, headers={"Location": body["job"]["url"]})
        return jobs.export_open_now(user=request.user).response()


class MeExportJobsApi(APIView):
    @extend_schema(responses={200: EXPORT_JOB}, operation_id="me_exports_list")
    def get(self, request: Request) -> Response:
        return Response({"results": [job_payload(j) for j in jobs.export_jobs(user=request.user)]})

    @extend_schema(request=None, responses={202: OpenApiResponse(description="The job")})
    def post(self, request: Request) -> Response:
        job = jobs.export_job_start(user=request.user, origin=site_origin(request))
        payload = job_payload(job)
        return Response(payload, status=202, headers={"Location": payload["url"]})


class MeExportJobApi(APIView):
    @extend_schema(responses={200: EXPORT_JOB})
    def get(self, request: Request, job_id: int) -> Response:
        return Response(job_payload(jobs.access_export_job(user=request.user, job_id=job_id)))


class MeExportDownloadApi(APIView):
    @extend_schema(responses={(200, "application/zip"): OpenApiResponse(description="The zip")})
    def get(self, request: Request, job_id: int) -> Any:
        return jobs.export_job_open(user=request.user, job_id=job_id).response()


# --- ChatGPT / Claude imports ----------------------------------------------------------------

CHAT_IMPORT_JOB = OpenApiResponse(
    description="A ChatGPT/Claude import job: id, status, progress, stage, error, report "
    "(the summary lines once done), created_at, finished_at, url, source (the export's "
    "format: chatgpt or claude, once imported), learn (chosen at upload), learning (null "
    "unless chosen: status, progress, stage, conversations, notes, pending, blocked, "
    "inferences, calls, report, error) and learned_notes (the notes its learning wrote that "
    "are still in memory: active, pending; list them with GET /api/memory/?source_import=<id>)"
)


def learning_payload(job: ChatImportJob) -> dict[str, Any] | None:
    if not job.learn:
        return None
    state = job.learning or {}
    return {
        "status": job.learn_status or "waiting_for_import",
        "progress": state.get("progress", 0),
        "stage": stage_text(state.get("stage", "")),
        "conversations": state.get("chosen", 0),
        "notes": state.get("notes", 0),
        "pending": state.get("pending", 0),
        "blocked": state.get("blocked", 0),
        "inferences": state.get("inferences", 0),
        "calls": state.get("calls", 0),
        "report": state.get("lines", []),
        "error": state.get("error", ""),
    }


def chat_import_payload(job: ChatImportJob, learned: WriterCount | None) -> dict[str, Any]:
    return {
        "id": job.pk,
        "status": job.status,
        "progress": job.progress,
        "stage": stage_text(job.stage),
        "error": job.error_text,
        "report": job.report_lines,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "url": reverse("api-me-chat-import", args=[job.pk]),
        "source": job.source,
        "learn": job.learn,
        "learning": learning_payload(job),
        "learned_notes": {
            "active": learned.active if learned else 0,
            "pending": learned.pending if learned else 0,
        },
    }


def _learn_choice(value: Any) -> bool:
    if value is None or value == "":
        return False
    try:
        return serializers.BooleanField().to_internal_value(value)
    except serializers.ValidationError:
        raise ServiceError(
            "invalid",
            gettext_lazy("`learn` must be true or false (as 1/0, on/off or yes/no too)."),
            status=400,
        ) from None


class MeChatImportsApi(APIView):
    @extend_schema(responses={200: CHAT_IMPORT_JOB}, operation_id="me_chat_imports_list")
    def get(self, request: Request) -> Response:
        learned = learned_counts(user=request.user)
        found = chat_jobs.chat_import_jobs(user=request.user)
        return Response({"results": [chat_import_payload(j, learned.get(j.pk)) for j in found]})

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {"export": {}, "learn": {"type": "boolean", "default": False}},
            }
        },
        responses={202: CHAT_IMPORT_JOB},
        description="Upload a ChatGPT or Claude export (`export`: the zip or its "
        "conversations.json) to import in the background; poll the job's `url`. With "
        "`learn` true, a review of the imported conversations then proposes memory "
        "entries (and, with the local memory provider, inferences).",
    )
    def post(self, request: Request) -> Response:
        upload = request.FILES.get("export")
        if upload is None:
            raise ServiceError(
                "invalid",
                gettext_lazy("Send the export as the multipart file field `export`."),
                status=400,
            )
        learn = _learn_choice(request.data.get("learn"))
        job = chat_jobs.chat_import_job_start(user=request.user, upload=upload, learn=learn)
        payload = chat_import_payload(job, None)
        return Response(payload, status=202, headers={"Location": payload["url"]})


class MeChatImportApi(APIView):
    @extend_schema(responses={200: CHAT_IMPORT_JOB})
    def get(self, request: Request, job_id: int) -> Response:
        job = chat_jobs.access_chat_import_job(user=request.user, job_id=job_id)
        return Response(chat_import_payload(job, learned_counts(user=request.user).get(job.pk)))


class MeChatImportNotesApi(APIView):
    @extend_schema(
        request=None,
        responses={
            200: inline_serializer(
                "LearnedNotesRemoved",
                {
                    "removed": serializers.IntegerField(),
                    "rejected": serializers.IntegerField(),
                    "message": serializers.CharField(),
                },
            )
        },
        description="Remove every note the learning of this import wrote: active ones are "
        "removed, those waiting for approval rejected, each change in the memory audit log.",
    )
    def delete(self, request: Request, job_id: int) -> Response:
        removed = chat_import_notes_remove(user=request.user, job_id=job_id, source=Source.API)
        return Response(
            {"removed": removed.removed, "rejected": removed.rejected, "message": removed.message()}
        )
