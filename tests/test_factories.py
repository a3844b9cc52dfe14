"""The shared factories build valid rows with the defaults the tests rely on."""

from __future__ import annotations

import pytest

from memory.models import content_digest
from sessions_app.models import Message
from tests.factories import (
    PASSWORD,
    InferenceFactory,
    MemoryEntryFactory,
    MessageFactory,
    SkillFactory,
    UserFactory,
    conversation_with,
)

pytestmark = pytest.mark.django_db


def test_users_log_in_with_the_shared_password_and_traits_make_admins():
    member, staff, root = UserFactory(), UserFactory(staff=True), UserFactory(superuser=True)
    assert member.check_password(PASSWORD) and not member.is_staff
    assert staff.is_staff and not staff.is_superuser
    assert root.is_staff and root.is_superuser
    assert len({member.username, staff.username, root.username}) == 3


def test_assistant_messages_are_complete_and_others_have_no_status(owner):
    chat = conversation_with(owner, "Hello", "And again")
    assert chat.owner == owner and chat.title is None
    rows = list(Message.objects.filter(session=chat).order_by("id").values_list("role", "status"))
    assert rows == [("user", ""), ("assistant", "complete")] * 2
    assert MessageFactory(role="tool", tool_call_id="c1", tool_name="memory").status == ""


def test_memory_entries_and_inferences_carry_their_digests(owner):
    entry = MemoryEntryFactory(owner=owner, content="Likes trains")
    assert entry.content_hash == content_digest("Likes trains") and entry.target == "memory"
    inference = InferenceFactory(owner=owner)
    assert inference.owner == owner and len(inference.statement_hash) == 64


def test_skills_go_through_the_service(owner):
    skill = SkillFactory(owner=owner, name="deploy-app")
    assert (skill.owner, skill.name) == (owner, "deploy-app")
    assert skill.content.startswith("---\nname: deploy-app\n")
