"""Import and export of a skills folder as a zip, in the Hermes layout:

    skills/[<category>/]<name>/SKILL.md
    skills/[<category>/]<name>/{references,templates,scripts,assets}/<file>

Import is per skill: a skill with a problem (bad SKILL.md, a file outside the four folders,
an oversized file, a blocked payload) is reported and skipped, the others go in. Unsafe
entries (absolute paths, `..`, symlinks) are never read. An existing skill of the same name
is updated (a new revision); its files not in the zip are kept.
"""

from __future__ import annotations

import io
import stat
import zipfile
from dataclasses import dataclass, field
from typing import IO, Literal

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.exceptions import ServiceError
from core.zipfiles import zip_errors

from .. import skillmd
from ..models import Skill, SkillRevision
from .skills import skill_create, skill_edit, skill_file_write

MAX_ZIP_BYTES = 20 * 1024 * 1024
MAX_ENTRIES = 2000
MAX_TOTAL_BYTES = 64 * 1024 * 1024
_JUNK = ("__MACOSX/",)

Status = Literal["created", "updated", "unchanged", "error"]


@dataclass
class SkillImportResult:
    name: str
    folder: str
    status: Status
    message: str = ""


@dataclass
class ImportReport:
    results: list[SkillImportResult] = field(default_factory=list)
    #: Problems not tied to one skill (unsafe or stray entries).
    warnings: list[str] = field(default_factory=list)

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return not any(r.status == "error" for r in self.results)


def _unsafe(name: str) -> str | None:
    if "\\" in name or "\x00" in name:
        return "uses a backslash or NUL"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in name.split("/"):
        return "contains '..'"
    return None


def _is_symlink(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _hidden(name: str) -> bool:
    return any(part.startswith(".") for part in name.split("/") if part) or name.startswith(_JUNK)


def _read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes | None:
    """At most `limit` bytes; None when the entry is bigger (whatever its header claims)."""
    with zip_errors(info.filename), zf.open(info) as handle:
        data = handle.read(limit + 1)
    return None if len(data) > limit else data


def skills_import_zip(*, user: AbstractBaseUser, upload: IO[bytes] | bytes) -> ImportReport:
    """Import a zip of skills for `user`; returns what happened to each skill folder."""
    raw = upload if isinstance(upload, bytes) else upload.read(MAX_ZIP_BYTES + 1)
    if len(raw) > MAX_ZIP_BYTES:
        raise ServiceError(
            "too_large", f"The zip is larger than {MAX_ZIP_BYTES // (1024 * 1024)} MiB."
        )
    with zip_errors():
        zf = zipfile.ZipFile(io.BytesIO(raw))
    report = ImportReport()
    with zf:
        entries = [i for i in zf.infolist() if not i.is_dir()]
        if len(entries) > MAX_ENTRIES:
            raise ServiceError(
                "too_large", f"The zip has {len(entries):,} files; the limit is {MAX_ENTRIES:,}."
            )
        if sum(i.file_size for i in entries) > MAX_TOTAL_BYTES:
            raise ServiceError(
                "too_large",
                f"The zip unpacks to more than {MAX_TOTAL_BYTES // (1024 * 1024)} MiB.",
            )
        safe: list[zipfile.ZipInfo] = []
        for info in entries:
            problem = _unsafe(info.filename)
            if problem is None and _is_symlink(info):
                problem = "is a symbolic link"
            if problem is not None:
                report.warnings.append(f"Skipped {info.filename!r}: it {problem}.")
            elif not _hidden(info.filename):
                safe.append(info)
        if safe and all(i.filename.startswith("skills/") for i in safe):
            prefix = "skills/"
        else:
            prefix = ""
        by_path = {i.filename[len(prefix) :]: i for i in safe}
        folders = sorted(
            path[: -len("SKILL.md")].rstrip("/")
            for path in by_path
            if path == "SKILL.md" or path.endswith("/SKILL.md")
        )
        if not folders:
            raise ServiceError(
                "invalid_zip",
                "No skills found: expected skills/[category/]name/SKILL.md entries.",
            )
        claimed: set[str] = set()
        for folder in folders:
            files = {
                path[len(folder) + 1 :]: info
                for path, info in by_path.items()
                if path.startswith(folder + "/") and path != folder + "/SKILL.md"
            }
            # A nested folder's files belong to the nested skill, not to this one.
            files = {
                rel: info
                for rel, info in files.items()
                if not any(
                    f != folder and (folder + "/" + rel).startswith(f + "/") for f in folders
                )
            }
            claimed.update(info.filename for info in files.values())
            claimed.add(prefix + folder + "/SKILL.md")
            report.results.append(
                _import_one(user, zf, folder, by_path.get(folder + "/SKILL.md"), files)
            )
        for info in safe:
            if info.filename not in claimed:
                report.warnings.append(f"Ignored {info.filename!r}: it is not inside a skill.")
    return report


def _import_one(
    user: AbstractBaseUser,
    zf: zipfile.ZipFile,
    folder: str,
    skill_md: zipfile.ZipInfo | None,
    files: dict[str, zipfile.ZipInfo],
) -> SkillImportResult:
    parts = folder.split("/") if folder else []
    name = parts[-1] if parts else ""
    result = SkillImportResult(name=name or "(root)", folder=folder or ".", status="error")
    if len(parts) not in (1, 2) or skill_md is None:
        result.message = (
            "Expected skills/[category/]name/SKILL.md; this folder is at the wrong depth."
        )
        return result
    category = parts[0] if len(parts) == 2 else ""
    try:
        skillmd.check_name(name)
        skillmd.check_category(category)
        data = _read(zf, skill_md, skillmd.CONTENT_MAX * 4)
        if data is None:
            raise ServiceError("too_large", "SKILL.md is too large.")
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ServiceError("invalid_skill", "SKILL.md is not UTF-8 text.") from None
        payloads: list[tuple[str, bytes]] = []
        for rel, info in sorted(files.items()):
            path = skillmd.check_file_path(rel)
            skillmd.check_file_size(info.file_size, path=path)
            blob = _read(zf, info, skillmd.FILE_MAX_BYTES)
            if blob is None:
                skillmd.check_file_size(skillmd.FILE_MAX_BYTES + 1, path=path)
            payloads.append((path, blob or b""))
        with transaction.atomic():
            existing = Skill.objects.filter(owner=user, name=name).first()
            if existing is None:
                skill_create(
                    user=user,
                    name=name,
                    content=content,
                    category=category,
                    action=SkillRevision.Action.IMPORT,
                )
                result.status = "created"
            else:
                revisions = existing.revisions.count()
                skill_edit(
                    user=user,
                    name=name,
                    content=content,
                    category=category,
                    action=SkillRevision.Action.IMPORT,
                    summary="imported SKILL.md",
                )
            for path, blob in payloads:
                skill_file_write(
                    user=user,
                    name=name,
                    file_path=path,
                    data=blob,
                    action=SkillRevision.Action.IMPORT,
                )
            if existing is not None:
                same = existing.revisions.count() == revisions and existing.category == category
                result.status = "unchanged" if same else "updated"
    except ServiceError as exc:
        result.status = "error"
        result.message = exc.message
        return result
    count = len(files)
    result.message = f"{count} file{'s' if count != 1 else ''}" if count else ""
    return result


def skills_export_zip(*, user: AbstractBaseUser, include_team: bool = False) -> bytes:
    """The user's skills (and optionally the team's) as a zip in the Hermes layout."""
    qs = Skill.objects.filter(owner=user)
    if include_team:
        qs = Skill.objects.filter(owner=user) | Skill.objects.filter(is_team=True)
    buffer = io.BytesIO()
    written: set[str] = set()
    now = timezone.now().timetuple()[:6]
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for skill in qs.prefetch_related("files").order_by("is_team", "category", "name"):
            folder = "skills/" + (f"{skill.category}/" if skill.category else "") + skill.name
            if folder in written:
                continue  # a personal skill shadows the team skill of the same name
            written.add(folder)
            zf.writestr(zipfile.ZipInfo(f"{folder}/SKILL.md", now), skill.content)
            for item in skill.files.all():
                zf.writestr(zipfile.ZipInfo(f"{folder}/{item.path}", now), bytes(item.data))
    return buffer.getvalue()
