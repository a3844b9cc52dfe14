"""Every page speaks 简体中文 to a person who chose it: each HTML page the site serves (found
from the URL configuration, so a new page is scanned without being listed here), our models'
admin pages, the pages before signing in, the error pages and the mail, rendered in zh-hans
with a person's data in every table, hold no English outside what people wrote and the names
that stay as they are (tests/support/untranslated.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth.tokens import default_token_generator
from django.template.loader import render_to_string
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone, translation
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import Profile
from core.exceptions import english, lazy_format
from memory.models import MemoryEntry
from privacy.models import ChatImportJob, ExportJob
from sessions_app.agent.runner import STOPPED_AFTER_TOOLS
from sessions_app.agent.tools import ToolContext, registry
from sessions_app.models import Message
from sessions_app.session_model import SWITCHED, SWITCHED_FROM_GONE
from tests.privacy.conftest import marker, seed
from tests.support.untranslated import english_in, untranslated

PROJECT_APPS = {"accounts", "memory", "privacy", "sessions_app", "skills_app", "usage"}
PROJECT_APPS |= {"model_catalog", "mcp_server", "openai_api", "core"}
# Routes that are not pages a person reads: machine endpoints and downloads.
NOT_PAGES = {"healthz", "javascript_catalog", "openai-models", "openai-model"}
NOT_PAGES |= {"openai-chat-completions", "oidc_login", "oidc_callback"}


def _routes(patterns, prefix: str = "") -> Iterator[tuple[str, str]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield prefix + str(pattern.pattern), pattern.name


@pytest.fixture
def chinese_reader(superuser):
    """A team admin who reads Chinese, with data in every table."""
    seeded = seed(superuser, "zh")
    Profile.objects.filter(user=superuser).update(language="zh-hans")
    # What background work wrote for this person is theirs to read as it was written.
    ExportJob.objects.filter(owner=superuser).update(stage="", error=marker("zh", "error"))
    ChatImportJob.objects.filter(owner=superuser).update(report=[marker("zh", "report")])
    return seeded


@pytest.fixture
def chinese_chat(chinese_reader):
    """The reader's conversation (the seed's compressed one) goes on with what the server
    says on a chat page: tool chips of every built-in tool (one refused, one unknown), a
    stopped answer, interrupted and failed ones with their notes, the tool-round limit's
    note and model-switch markers; the compression marker is the seed's."""
    _seed_chat(chinese_reader)
    return chinese_reader


def _seed_chat(seeded) -> None:
    user, chat = seeded.user, seeded.continuation
    calls = [
        ("memory", {"action": "add", "target": "user", "content": marker("zh", "chipmemory")}),
        ("memory", {"action": "add", "target": "user", "content": ""}),  # refused: empty
        ("session_search", {}),
        ("session_search", {"query": seeded.markers["user"], "summaries": False}),
        ("skills_list", {"category": "devops"}),
        ("skill_view", {"name": seeded.skill_name}),
        (
            "skill_manage",
            {
                "action": "write_file",
                "name": seeded.skill_name,
                "file_path": "references/notes.md",
                "file_content": marker("zh", "chipskill"),
            },
        ),
        ("no_such_tool", {}),
    ]
    ctx = ToolContext(user=user, session_id=chat.pk)
    said = _said_in(chat)
    said(role="user", content=f"Use your tools {marker('zh', 'asktools')}")
    said(
        role="assistant",
        status="complete",
        tool_calls=[
            {
                "id": f"call_chip{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for i, (name, args) in enumerate(calls)
        ],
    )
    for i, (name, args) in enumerate(calls):
        result = registry.dispatch(ctx, name, json.dumps(args), allowed=set(registry.names()))
        said(role="tool", tool_call_id=f"call_chip{i}", tool_name=name, content=result.content())
    said(role="assistant", status="complete", content=f"Done {marker('zh', 'answer')}")
    # What stands in for an answer at the tool-round limit, as the runner saves it.
    rounds = lazy_format(STOPPED_AFTER_TOOLS, rounds=8)
    said(role="assistant", status="complete", finish_reason="tool_limit", content=english(rounds))
    said(role="user", content=f"Go on {marker('zh', 'stop')}")
    said(role="assistant", status="interrupted", finish_reason="stopped", content=marker("zh", "s"))
    said(role="user", content=f"Again {marker('zh', 'cut')}")
    said(
        role="assistant",
        status="interrupted",
        finish_reason="llm_timeout",
        content=marker("zh", "c"),
    )
    said(role="user", content=f"Once more {marker('zh', 'fail')}")
    said(role="assistant", status="failed", finish_reason="rate_limited")
    for switched in (
        lazy_format(SWITCHED, model="gpt-test"),
        lazy_format(SWITCHED_FROM_GONE, model="gpt-test", gone="gpt-retired"),
    ):
        said(role="system", kind=Message.Kind.MODEL_SWITCH, content=english(switched))


def _said_in(chat):
    """Adds messages to `chat`, each on the path after the one before (no alternatives)."""
    last = [chat.messages.order_by("id").last()]

    def said(**fields) -> Message:
        last[0] = Message.objects.create(session=chat, parent=last[0], **fields)
        return last[0]

    return said


def _kwargs(route: str, seeded) -> dict[str, object]:
    values = {
        # The conversation at its newest part: the chat page of the whole chain.
        "session_id": seeded.continuation.pk,
        "user_id": seeded.user.pk,
        "entry_id": seeded.entry_id,
        "inference_id": apps.get_model("memory", "Inference").objects.first().pk,
        "name": seeded.skill_name,
        "path": "references/notes.md",
        "job_id": seeded.job.pk,
        "token_id": seeded.token.pk,
        "target": "memory",
        "import_id": ChatImportJob.objects.first().pk,
        "number": 1,
        "uidb64": urlsafe_base64_encode(force_bytes(seeded.user.pk)),
        "token": default_token_generator.make_token(seeded.user),
    }
    return {key: values[key] for key in re.findall(r"<(?:\w+:)?(\w+)>", route)}


def _english(
    client: Client, url: str, also_kept: frozenset[str], status: int = 200
) -> list[str] | None:
    """The English left on the page at `url`; None when it is not an HTML page."""
    response = client.get(url)
    if response.status_code != status or "text/html" not in response.get("Content-Type", ""):
        return None
    page = response.content.decode()
    return [f"{url}: {text!r}" for text in untranslated(page, also_kept=also_kept)]


def test_every_page_of_a_signed_in_person_is_in_chinese(chinese_chat):
    chinese_reader = chinese_chat
    client = Client(HTTP_ACCEPT_LANGUAGE="en")  # the person's choice wins over the browser
    client.force_login(chinese_reader.user)
    kept = frozenset({chinese_reader.user.username, "gpt-test", "gpt-retired", "devops"})
    kept |= {chinese_reader.skill_name, "references/notes.md"}  # names the person gave
    kept |= {"OR", "NOT", "nothing-like-this"}  # the search syntax's operators; a query
    found, scanned = [], 0
    for route, name in _routes(get_resolver().url_patterns):
        if route.startswith(("api/", "admin/", "i18n/")) or name in NOT_PAGES:
            continue
        if name == "logout":
            continue  # scanned last: it ends the session
        url = reverse(name, kwargs=_kwargs(route, chinese_reader))
        english = _english(client, url, kept)
        if english is not None:
            scanned += 1
            found += english
    found += _english(client, "/no-such-page/", kept, status=404)
    # Search results: the seed's words are found, and a search that finds nothing.
    for words in (chinese_reader.markers["user"], "nothing-like-this"):
        found += _english(client, reverse("session_list") + f"?q={words}", kept)
    assert scanned >= 20, f"only {scanned} pages answered in HTML: the scan lost its pages"
    # The chat page scanned shows all the seed put there (the seed's own chip and eight).
    chat = client.get(reverse("chat_session", args=[chinese_reader.continuation.pk]))
    page = chat.content.decode()
    assert chat.status_code == 200 and page.count('<details class="chip') == 9
    assert page.count("chip-failed") == 2 and page.count('class="msg-note') == 3
    assert page.count('class="model-marker"') == 2 and 'class="compress-marker"' in page
    assert found == [], "English left on the pages:\n" + "\n".join(found)


def test_the_admin_pages_of_our_models_are_in_chinese(chinese_reader):
    # A model of the catalog too, so its change page is scanned (the seed has none).
    apps.get_model("model_catalog", "ModelEntry").objects.create(
        name="gpt-test", model_id="gpt-test"
    )
    client = Client()
    client.force_login(chinese_reader.user)
    kept = frozenset({chinese_reader.user.username, "gpt-test", "devops"} | _admin_data_words())
    found, scanned = [], 0
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in PROJECT_APPS:
            continue
        info = (model._meta.app_label, model._meta.model_name)
        urls = [reverse("admin:{}_{}_changelist".format(*info))]
        request = _request(chinese_reader.user)
        if model_admin.has_add_permission(request):
            urls.append(reverse("admin:{}_{}_add".format(*info)))
        instance = model_admin.get_queryset(request).first()
        if instance is not None:
            # The admin's own quoting of a key in a URL (a session id's `_40` would read as `@`).
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[quote(instance.pk)]))
        for url in [*urls, reverse("admin:index")]:
            english = _english(client, url, kept)
            assert english is not None, url
            scanned += 1
            found += english
    assert scanned >= 10
    assert found == [], "English left on the admin pages:\n" + "\n".join(found)


def _admin_data_words() -> set[str]:
    """The words of the seed's names the admin shows as they are: model ids, skill names and
    file paths, single sign-on subjects (data, not prose; the seed gives them no marker)."""
    names = [*apps.get_model("skills_app", "Skill").objects.values_list("name", flat=True)]
    names += apps.get_model("skills_app", "SkillFile").objects.values_list("path", flat=True)
    names += apps.get_model("accounts", "SignInIdentity").objects.values_list("subject", flat=True)
    names += apps.get_model("sessions_app", "Session").objects.values_list("model", flat=True)
    return {word for name in names for word in re.findall(r"[A-Za-z]+", name)}


def _request(user):
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = user
    return request


@pytest.mark.parametrize(
    "name", ["login", "signup", "password_reset", "password_reset_done", "logout"]
)
def test_the_pages_before_signing_in_follow_the_browser(db, name, settings, owner):
    settings.HERMES_ALLOW_SIGNUP = True
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    if name == "logout":
        # Django's LogoutView takes only POST: sign in, log out, read the page it lands on.
        client.force_login(owner)
        response = client.post(reverse(name), follow=True)
    else:
        response = client.get(reverse(name), follow=True)
    assert response.status_code == 200
    assert untranslated(response.content.decode()) == []


@pytest.mark.parametrize(
    "template", ["export_ready", "invitation", "password_reset", "password_reset_subject", "reset"]
)
def test_mail_reads_in_chinese(template):
    context = {
        "site_name": "Hermes Web",
        "username": "olivia",
        "user": SimpleNamespace(get_username=lambda: "olivia"),
        "inviter": "root",
        "url": "https://hermes.example.org/accounts/welcome/MQ/set-abc/",
        "origin": "https://hermes.example.org",
        "uid": "MQ",
        "token": "set-abc",
        "link_days": 3,
        "expires_at": timezone.now(),
    }
    with translation.override("zh-hans"):
        text = render_to_string(f"mail/{template}.txt", context)
    kept = frozenset({"olivia", "root"})
    assert [line for line in text.splitlines() if english_in(line, also_kept=kept)] == []


def test_the_scan_finds_english(chinese_reader):
    """The scanner itself: an English page is caught, the person's own words are not."""
    page = (
        "<html><head><title>Memory</title></head><body><button>Save</button>"
        '<input placeholder="Search your conversations">'
        f"<p>Project codename {chinese_reader.markers['memory']}</p><code>make test</code>"
        '<span translate="no">English</span><p>保存 Hermes Web</p></body></html>'
    )
    assert untranslated(page) == ["Memory", "Save", "Search your conversations"]
    assert MemoryEntry.objects.filter(owner=chinese_reader.user).exists()
