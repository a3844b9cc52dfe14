"""The admin as a privacy boundary: superusers manage accounts and see counts, read other
people's content only when the deployment allows it — and then leave an audit trail —, and
everyone can export or delete their own selected rows."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from memory.models import MemoryEntry
from privacy.models import AdminContentAccess
from sessions_app.models import Message, Session
from tests.privacy.conftest import login, seed

pytestmark = pytest.mark.django_db


def changelist(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def test_superuser_sees_counts_not_content_by_default(superuser, owner, settings):
    settings.HERMES_ADMIN_CONTENT_ACCESS = False
    mine = seed(owner, "olv")
    client = login(superuser)
    body = client.get(changelist(Message)).content.decode()
    assert mine.markers["assistant"] not in body
    assert "other people&#x27;s content is hidden" in body
    users = client.get(reverse("admin:auth_user_changelist")).content.decode()
    assert "olivia" in users and "Conversations" in users  # the account, with its counts
    opened = client.get(
        reverse("admin:sessions_app_message_change", args=[mine.user_message.pk]), follow=True
    )
    assert mine.markers["user"] not in opened.content.decode()
    assert AdminContentAccess.objects.count() == 0


def test_content_access_when_enabled_is_audit_logged(superuser, owner, settings):
    settings.HERMES_ADMIN_CONTENT_ACCESS = True
    mine = seed(owner, "olv")
    client = login(superuser)
    assert mine.markers["assistant"] in client.get(changelist(Message)).content.decode()
    listed = AdminContentAccess.objects.get(action="list")
    assert (listed.viewer, listed.model, listed.subject) == (
        superuser,
        "sessions_app.Message",
        None,
    )
    page = client.get(reverse("admin:memory_memoryentry_change", args=[mine.entry_id]))
    assert mine.markers["memory"] in page.content.decode()
    viewed = AdminContentAccess.objects.get(action="view")
    assert (viewed.subject, viewed.object_id) == (owner, str(mine.entry_id))
    # Their own content is not an access to someone else's.
    mine_too = seed(superuser, "root")
    client.get(reverse("admin:memory_memoryentry_change", args=[mine_too.entry_id]))
    assert AdminContentAccess.objects.filter(action="view").count() == 1
    # The person can see who opened their content.
    assert AdminContentAccess.objects.filter(subject=owner).count() == 1


def test_staff_export_selected_returns_only_their_own_rows(staff_member, outsider):
    mine = seed(staff_member, "stf")
    theirs = seed(outsider, "osc")
    client = login(staff_member)
    own_ids = list(Session.objects.filter(owner=staff_member).values_list("pk", flat=True))
    response = client.post(
        changelist(Session),
        {
            "action": "export_selected",
            "_selected_action": own_ids + [theirs.session.pk],
        },
    )
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    data = json.loads(response.content)
    assert data["model"] == "sessions_app.Session"
    assert sorted(r["id"] for r in data["rows"]) == sorted(own_ids)
    assert theirs.markers["title"] not in response.content.decode()
    assert mine.markers["title"] in response.content.decode()


def test_staff_delete_selected_deletes_only_their_own_rows(staff_member, outsider):
    mine = seed(staff_member, "stf")
    theirs = seed(outsider, "osc")
    client = login(staff_member)
    client.post(
        changelist(MemoryEntry),
        {
            "action": "delete_selected",
            "_selected_action": [mine.entry_id, theirs.entry_id],
            "post": "yes",
        },
    )
    assert not MemoryEntry.objects.filter(pk=mine.entry_id).exists()
    assert MemoryEntry.objects.filter(pk=theirs.entry_id).exists()


def test_superuser_exports_selected_content_only_with_access_and_logged(superuser, owner, settings):
    seed(owner, "olv")
    ids = list(Session.objects.filter(owner=owner).values_list("pk", flat=True))
    client = login(superuser)
    settings.HERMES_ADMIN_CONTENT_ACCESS = False
    hidden = client.post(
        changelist(Session), {"action": "export_selected", "_selected_action": ids}
    )
    assert json.loads(hidden.content)["rows"] == []  # not in the list, so not exported
    assert not AdminContentAccess.objects.exists()
    settings.HERMES_ADMIN_CONTENT_ACCESS = True
    shown = client.post(changelist(Session), {"action": "export_selected", "_selected_action": ids})
    assert len(json.loads(shown.content)["rows"]) == 3
    assert AdminContentAccess.objects.filter(action="export", subject=owner, rows=3).exists()
