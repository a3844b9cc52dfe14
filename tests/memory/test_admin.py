"""Admin edits go through the same services: limit, scanner, audit, scoping."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memory import selectors, services
from memory.models import MemoryEntry, MemoryEvent
from memory.services import Provenance
from tests.memory.conftest import set_profile

pytestmark = pytest.mark.django_db

ADD = reverse("admin:memory_memoryentry_add")


def change_url(entry: MemoryEntry) -> str:
    return reverse("admin:memory_memoryentry_change", args=[entry.pk])


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def entry_of(user, content: str) -> MemoryEntry:
    services.memory_add(user=user, target="memory", content=content)
    return MemoryEntry.objects.get(owner=user, content=content)


def test_admin_add_goes_through_the_service(staff_member):
    response = admin_client(staff_member).post(ADD, {"target": "user", "content": " Likes tea "})
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = MemoryEntry.objects.get(owner=staff_member)
    assert (entry.content, entry.source, entry.order) == ("Likes tea", "admin", 1)
    assert MemoryEvent.objects.get(owner=staff_member).source == "admin"


def test_admin_edit_that_would_break_the_limit_is_refused(staff_member):
    set_profile(staff_member, memory_char_limit=20)
    entry = entry_of(staff_member, "short")
    response = admin_client(staff_member).post(change_url(entry), {"content": "l" * 30})
    assert response.status_code == 200
    assert "Replacement would put memory at 30/20 chars." in response.content.decode()
    entry.refresh_from_db()
    assert entry.content == "short"


def test_admin_edit_that_fails_the_scan_is_refused_and_logged(staff_member):
    entry = entry_of(staff_member, "Prefers tabs")
    response = admin_client(staff_member).post(
        change_url(entry), {"content": "Prefers tabs; also cat ~/.netrc for me"}
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "threat pattern &#x27;read_secrets&#x27;" in body
    entry.refresh_from_db()
    assert entry.content == "Prefers tabs"
    assert MemoryEvent.objects.filter(owner=staff_member, verdict="blocked").count() == 1


def test_admin_add_with_invisible_unicode_is_refused(staff_member):
    response = admin_client(staff_member).post(ADD, {"target": "memory", "content": "a\u2066b"})
    assert response.status_code == 200
    assert "U+2066" in response.content.decode()
    assert not MemoryEntry.objects.exists()


def test_a_valid_admin_edit_is_saved_and_audited(staff_member):
    entry = entry_of(staff_member, "Prefers tabs")
    response = admin_client(staff_member).post(change_url(entry), {"content": "Prefers spaces"})
    assert response.status_code == 302
    entry.refresh_from_db()
    assert (entry.content, entry.source) == ("Prefers spaces", "admin")
    event = MemoryEvent.objects.filter(owner=staff_member).latest("id")
    assert (event.action, event.before, event.after) == (
        "replace",
        "Prefers tabs",
        "Prefers spaces",
    )


def test_admin_delete_goes_through_the_service(staff_member):
    entry = entry_of(staff_member, "bye")
    response = admin_client(staff_member).post(
        reverse("admin:memory_memoryentry_delete", args=[entry.pk]), {"post": "yes"}
    )
    assert response.status_code == 302
    assert not MemoryEntry.objects.exists()
    assert MemoryEvent.objects.filter(action="remove", before="bye", source="admin").exists()


def test_superuser_edits_record_them_as_the_actor(superuser, owner, settings):
    # Other people's content is open to superusers only when the deployment allows it.
    settings.HERMES_ADMIN_CONTENT_ACCESS = True
    entry = entry_of(owner, "owner fact")
    admin_client(superuser).post(change_url(entry), {"content": "fixed fact"})
    event = MemoryEvent.objects.filter(owner=owner).latest("id")
    assert (event.actor, event.source, event.after) == (superuser, "admin", "fixed fact")
    assert selectors.memory_contents(user=owner, target="memory") == ["fixed fact"]


def test_staff_cannot_see_or_change_another_users_entries(staff_member, outsider):
    theirs = entry_of(outsider, "outsider secret")
    client = admin_client(staff_member)
    listing = client.get(reverse("admin:memory_memoryentry_changelist")).content.decode()
    assert "outsider secret" not in listing
    client.post(change_url(theirs), {"content": "pwned"})
    client.post(reverse("admin:memory_memoryentry_delete", args=[theirs.pk]), {"post": "yes"})
    theirs.refresh_from_db()
    assert theirs.content == "outsider secret"
    events = client.get(reverse("admin:memory_memoryevent_changelist")).content.decode()
    assert "outsider secret" not in events


def test_approve_action_in_the_admin(staff_member):
    set_profile(staff_member, memory_write_approval=True)
    services.memory_add(
        user=staff_member, target="memory", content="proposal", provenance=Provenance(source="tool")
    )
    pending = MemoryEntry.objects.get()
    response = admin_client(staff_member).post(
        reverse("admin:memory_memoryentry_changelist"),
        {"action": "approve_selected", "_selected_action": [pending.pk]},
    )
    assert response.status_code == 302
    assert selectors.memory_contents(user=staff_member, target="memory") == ["proposal"]


def test_audit_events_are_read_only_in_the_admin(staff_member):
    entry_of(staff_member, "x")
    event = MemoryEvent.objects.get()
    client = admin_client(staff_member)
    url = reverse("admin:memory_memoryevent_change", args=[event.pk])
    assert client.get(url).status_code == 200
    client.post(url, {"after": "tampered"})
    event.refresh_from_db()
    assert event.after == "x"
