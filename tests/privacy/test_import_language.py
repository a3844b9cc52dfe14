"""What an import or an export tells its person, in their language: a refused ChatGPT or
Claude export, an import's summary, a Hermes home's report lines, an export that failed,
and the archive's information sheet. A background job keeps what it has to say marked for
translation, so the Account page (and the job JSON it polls) reads right in whichever
language the person has when they look — also after they change it."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from accounts.models import Profile
from privacy import jobs
from privacy.export import build_export
from privacy.models import ChatImportJob, ExportJob
from tests.privacy.chat_exports import chatgpt_conversation, zipped
from tests.support.zips import truncated_zip

pytestmark = pytest.mark.django_db


def speaks(user, language: str) -> Client:
    """`user` signed in, having chosen `language` on the Account page (again)."""
    Profile.objects.update_or_create(user=user, defaults={"language": language})
    client = Client()
    client.force_login(user)
    return client


def upload_chats(client: Client, data: bytes, name: str, capture) -> None:
    with capture(execute=True):
        client.post(reverse("account_import_chats"), {"export": SimpleUploadedFile(name, data)})


def account_page(client: Client) -> str:
    return client.get(reverse("account")).content.decode()


def test_a_refused_export_is_explained_in_chinese_then_in_english_once_they_switch(
    owner, export_dir, django_capture_on_commit_callbacks
):
    broken = json.dumps([{"uuid": "u-1", "chat_messages": "nope"}]).encode()
    upload_chats(
        speaks(owner, "zh-hans"), broken, "conversations.json", django_capture_on_commit_callbacks
    )
    job = ChatImportJob.objects.get(owner=owner)
    assert job.status == "failed"

    chinese = speaks(owner, "zh-hans")
    assert "未导入任何内容：第 1 个会话：chat_messages 不是列表。" in account_page(chinese)
    polled = chinese.get(reverse("api-me-chat-import", args=[job.pk])).json()
    assert polled["error"] == "未导入任何内容：第 1 个会话：chat_messages 不是列表。"

    english = speaks(owner, "en")
    assert "Nothing was imported: conversation 1: chat_messages is not a list." in (
        account_page(english)
    )
    assert "不是列表" not in account_page(english)


def test_a_damaged_zip_is_refused_in_chinese(owner, export_dir, django_capture_on_commit_callbacks):
    body = json.dumps([chatgpt_conversation(f"c-{i}", "Weather", "mkzip") for i in range(50)])
    client = speaks(owner, "zh-hans")
    upload_chats(
        client,
        truncated_zip({"conversations.json": body}),
        "export.zip",
        django_capture_on_commit_callbacks,
    )

    job = ChatImportJob.objects.get(owner=owner)
    assert job.status == "failed" and job.error["values"]["name"] == "'conversations.json'"
    assert "ZIP 文件已损坏：无法读取 &#x27;conversations.json&#x27;（" in account_page(client)


def test_an_import_summary_reads_in_the_language_of_whoever_opens_the_page(
    owner, export_dir, django_capture_on_commit_callbacks
):
    data = zipped([chatgpt_conversation("c-1", "Weather", "mklang")])
    upload_chats(speaks(owner, "zh-hans"), data, "export.zip", django_capture_on_commit_callbacks)

    chinese = account_page(speaks(owner, "zh-hans"))
    assert "会话：导入 1 个，已有 0 个（4 条消息）。" in chinese
    assert "已跳过（1 处）：图片（已用占位符注明）。" in chinese
    assert "已跳过（1 处）：隐藏的系统上下文。" in chinese
    assert "a placeholder names it" not in chinese

    english = account_page(speaks(owner, "en"))
    assert "Conversations: 1 imported, 0 already there (4 messages)." in english
    assert "Skipped: 1 image (a placeholder names it)." in english
    assert "图片" not in english


def test_the_imports_api_says_the_summary_in_the_asked_language(
    owner, export_dir, django_capture_on_commit_callbacks
):
    data = zipped([chatgpt_conversation("c-1", "Weather", "mkapi")])
    upload_chats(speaks(owner, "en"), data, "export.zip", django_capture_on_commit_callbacks)
    Profile.objects.filter(user=owner).update(language="")
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(owner)

    (job,) = client.get(reverse("api-me-chat-imports")).json()["results"]

    assert job["status"] == "done" and job["source"] == "chatgpt"
    assert job["report"][0] == "会话：导入 1 个，已有 0 个（4 条消息）。"


def hermes_zip(files: dict[str, bytes]) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return SimpleUploadedFile("hermes.zip", buffer.getvalue())


def test_a_hermes_home_report_is_flashed_in_chinese(owner):
    upload = hermes_zip({"state.db": b"not a database " * 100, "SOUL.md": b"You are Hermes.\n"})

    page = speaks(owner, "zh-hans").post(reverse("account_import"), {"home": upload}, follow=True)

    body = page.content.decode()
    assert "导入完成，但有问题。" in body
    assert "错误：state.db 不是 Hermes 会话数据库（file is not a database）。" in body
    assert "已根据 SOUL.md 设置智能体身份。" in body
    assert "is not a Hermes session database" not in body


def test_an_export_that_stopped_is_explained_in_the_readers_language(owner):
    ExportJob.objects.create(
        owner=owner,
        status="running",
        started_at=timezone.now(),
        lease_owner="export@elsewhere:1#x",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    assert jobs.exports_fail_stalled(user=owner) == 1

    assert "导出意外中断。请重新开始。" in account_page(speaks(owner, "zh-hans"))
    assert "The export stopped unexpectedly. Start it again." in account_page(speaks(owner, "en"))


def test_an_error_written_before_is_shown_as_it_was(owner):
    job = ExportJob.objects.create(owner=owner, status="failed", error="Старая ошибка.")

    assert job.error_text == "Старая ошибка."
    assert "Старая ошибка." in account_page(speaks(owner, "zh-hans"))


def manifest_of(user, export_dir) -> dict:
    export_dir.mkdir(exist_ok=True)
    archive = export_dir / f"u{user.pk}.zip"
    build_export(user=user, target=archive)
    with zipfile.ZipFile(archive) as zf:
        return json.loads(zf.read("manifest.json"))


def test_the_archive_information_sheet_is_written_in_the_owners_language(
    owner, outsider, export_dir
):
    Profile.objects.create(user=owner, language="zh-hans")
    Profile.objects.create(user=outsider, language="en")

    chinese, english = manifest_of(owner, export_dir), manifest_of(outsider, export_dir)

    assert (chinese["language"], english["language"]) == ("zh-hans", "en")
    assert set(chinese) == set(english) and set(chinese["counts"]) == set(english["counts"])
    assert chinese["files"]["export.json"] == "关于你存储的全部数据，JSON 格式。"
    assert english["files"]["export.json"] == "Everything stored about you, as JSON."
    sheet = chinese["information"]
    assert set(sheet) == set(english["information"])
    assert sheet["purposes"][0] == "运行你与 AI 智能体的会话（合同）。"
    assert sheet["recipients_note"] == "不会出售数据，也不会与其他任何人共享。"
    assert sheet["retention"]["conversations"] == "直到你删除它们或你的账户。"
    skills = next(c for c in sheet["categories"] if c["category"] == "Skills")
    assert skills == {"category": "Skills", "label": "技能", "provided_by_you": True}
    # Every category has its Chinese name; the English one stays the same in both archives.
    assert [c["category"] for c in sheet["categories"]] == [
        c["category"] for c in english["information"]["categories"]
    ]
    assert all(c["label"] != c["category"] for c in sheet["categories"])
    assert all(c["label"] == c["category"] for c in english["information"]["categories"])
