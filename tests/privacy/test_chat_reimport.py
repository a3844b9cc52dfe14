"""A newer export of conversations imported before: new branches (an edited prompt, a
regenerated answer off an older message) are added to the conversation's tree, the selected
path follows the export's current message unless the person moved away in Hermes, and an
export that changed nothing adds nothing."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from privacy.chat_import import chat_import
from sessions_app import turn_claim
from sessions_app.branches import alternatives_of
from sessions_app.models import Message, Session
from sessions_app.services import branch_select
from tests.privacy.chat_exports import at, chatgpt_conversation, claude_conversation, gpt_node

pytestmark = pytest.mark.django_db


def write(tmp_path: Path, data, name="conversations.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def path_of(session: Session) -> list[str]:
    return list(
        session.messages.filter(active=True).order_by("id").values_list("content", flat=True)
    )


def snapshot(owner) -> list[tuple]:
    return list(
        Message.objects.filter(session__owner=owner)
        .order_by("id")
        .values_list("id", "parent_id", "active", "content")
    )


def regenerated(conv: dict, *, current: bool = True) -> dict:
    """The conversation after the person regenerated the first answer in ChatGPT and went
    on from the new one (`current`: ChatGPT shows that branch now)."""
    conv = copy.deepcopy(conv)
    mapping = conv["mapping"]
    mapping["u1"]["children"].append("a1r")
    mapping["a1r"] = gpt_node("a1r", "u1", ["u3"], "assistant", ["Soleil sur Tōkyō."], t=80)
    mapping["u3"] = gpt_node("u3", "a1r", [], "user", ["Et demain ?"], t=90)
    if current:
        conv["current_node"] = "u3"
    return conv


def test_a_new_branch_off_an_older_message_is_added_and_the_path_follows_the_export(
    owner, tmp_path
):
    first = chatgpt_conversation("c-1", "Weather", "mkbranch")
    chat_import(user=owner, path=write(tmp_path, [first]))
    session = Session.objects.get(owner=owner)
    old_path = list(session.messages.filter(active=True).order_by("id"))

    report = chat_import(user=owner, path=write(tmp_path, [regenerated(first)]))

    assert path_of(session) == [
        "Bonjour mkbranch — 東京の天気は？",
        "Soleil sur Tōkyō.",
        "Et demain ?",
    ]
    u1, answer, question = session.messages.filter(active=True).order_by("id")
    assert u1.pk == old_path[0].pk  # the shared start is the message imported before
    assert (answer.parent_id, question.parent_id) == (u1.pk, answer.pk)
    assert (answer.timestamp, question.timestamp, answer.status) == (at(80), at(90), "complete")
    # The earlier answer and everything after it stay, as the alternative.
    assert set(session.messages.filter(active=False).values_list("pk", flat=True)) >= {
        m.pk for m in old_path[1:]
    }
    places = alternatives_of([session.pk])
    assert (places[old_path[1].pk].count, places[answer.pk].index) == (2, 2)
    assert (report.messages_appended, report.paths_followed, report.sessions_skipped) == (2, 1, 1)
    assert any("now show the branch last viewed" in line for line in report.lines())
    session.refresh_from_db()
    assert session.message_count == 8 and session.last_activity_at == at(90)

    before = snapshot(owner)
    again = chat_import(user=owner, path=write(tmp_path, [regenerated(first)]))
    assert not again.added_anything and again.sessions_skipped == 1
    assert snapshot(owner) == before


def test_a_new_branch_the_export_does_not_show_is_added_beside_the_path(owner, tmp_path):
    first = chatgpt_conversation("c-1", "Weather", "mkaside")
    chat_import(user=owner, path=write(tmp_path, [first]))
    session = Session.objects.get(owner=owner)
    before = path_of(session)

    report = chat_import(user=owner, path=write(tmp_path, [regenerated(first, current=False)]))

    assert path_of(session) == before
    added = session.messages.filter(content__in=["Soleil sur Tōkyō.", "Et demain ?"])
    assert [m.active for m in added] == [False, False]
    assert (report.branch_messages, report.messages_appended, report.paths_followed) == (2, 0, 0)


def test_messages_after_the_last_one_extend_the_path(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkextend")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    newer = copy.deepcopy(conv)
    newer["mapping"]["a2b"]["children"] = ["u4"]
    newer["mapping"]["u4"] = gpt_node("u4", "a2b", ["a4"], "user", ["Merci !"], t=100)
    newer["mapping"]["a4"] = gpt_node("a4", "u4", [], "assistant", ["De rien."], t=110)
    newer["current_node"] = "a4"

    report = chat_import(user=owner, path=write(tmp_path, [newer]))

    session = Session.objects.get(owner=owner)
    assert path_of(session)[-3:] == ["A cat. Кошка mkextend.", "Merci !", "De rien."]
    assert (report.messages_appended, report.paths_followed, report.branch_messages) == (2, 0, 0)


def test_a_conversation_continued_in_hermes_keeps_its_path_and_gets_the_export_beside_it(
    owner, tmp_path
):
    conv = chatgpt_conversation("c-1", "Weather", "mkcontinued")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    session = Session.objects.get(owner=owner)
    tip = session.messages.filter(active=True).latest("id")
    mine = Message.objects.create(
        session=session, role="user", content="asked in Hermes", parent=tip
    )

    report = chat_import(user=owner, path=write(tmp_path, [regenerated(conv)]))

    assert path_of(session)[-1] == "asked in Hermes"
    assert Message.objects.get(pk=mine.pk).active
    assert not session.messages.get(content="Et demain ?").active
    assert (report.branch_messages, report.paths_followed) == (2, 0)


def test_a_branch_chosen_in_hermes_is_kept(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkchosen")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    session = Session.objects.get(owner=owner)
    branch_select(
        user=owner,
        session_id=session.pk,
        message_id=session.messages.get(content="first wording").pk,
    )
    chosen = path_of(session)

    chat_import(user=owner, path=write(tmp_path, [regenerated(conv)]))

    assert path_of(session) == chosen


def test_a_conversation_in_use_is_left_for_the_next_import(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkinuse")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    session = Session.objects.get(owner=owner)
    lease = turn_claim.acquire_for_turn(session_id=session.pk)
    before = snapshot(owner)

    busy = chat_import(user=owner, path=write(tmp_path, [regenerated(conv)]))

    assert snapshot(owner) == before
    assert any("was in use while importing" in w for w in busy.warnings)
    lease.release()
    later = chat_import(user=owner, path=write(tmp_path, [regenerated(conv)]))
    assert later.paths_followed == 1 and path_of(session)[-1] == "Et demain ?"


def test_an_earlier_import_without_a_digest_is_matched_and_nothing_is_added(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkolder")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    session = Session.objects.get(owner=owner)
    config = dict(session.model_config)
    del config["external_tree"]  # as the first version of the import stored it
    Session.objects.filter(pk=session.pk).update(model_config=config)
    before = snapshot(owner)

    report = chat_import(user=owner, path=write(tmp_path, [conv]))

    assert not report.added_anything and snapshot(owner) == before
    session.refresh_from_db()
    assert session.model_config["external_tree"]


def test_an_export_that_no_longer_matches_is_left_as_it_is(owner, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkchanged")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    session = Session.objects.get(owner=owner)
    session.messages.update(content="rewritten")
    changed = regenerated(conv)

    report = chat_import(user=owner, path=write(tmp_path, [changed]))

    assert set(path_of(session)) == {"rewritten"}
    assert any("no longer matches" in w for w in report.warnings)


def claude_tree(uuid: str, *, retried: bool) -> dict:
    """A Claude conversation whose messages name their parents: the first answer, and (after
    a retry in Claude) a second answer beside it that the conversation now shows."""
    conv = claude_conversation(uuid, "Greek", "mkclaudetree", replies=2)
    h1, a1, h2, a2 = conv["chat_messages"]
    h1["parent_message_uuid"] = "00000000-0000-4000-8000-000000000000"
    a1["parent_message_uuid"], h2["parent_message_uuid"] = h1["uuid"], a1["uuid"]
    a2["parent_message_uuid"] = h2["uuid"]
    conv["current_leaf_message_uuid"] = a2["uuid"]
    if retried:
        retry = {
            "uuid": f"{uuid}-a1-retry",
            "text": "Καλημέρα: good morning, said until noon.",
            "sender": "assistant",
            "created_at": "2024-05-03T09:00:00Z",
            "parent_message_uuid": h1["uuid"],
        }
        conv["chat_messages"].append(retry)
        conv["current_leaf_message_uuid"] = retry["uuid"]
    return conv


def test_claude_messages_with_parents_form_a_tree_and_a_retry_is_followed(owner, tmp_path):
    report = chat_import(user=owner, path=write(tmp_path, [claude_tree("u-1", retried=False)]))
    session = Session.objects.get(owner=owner)
    assert len(path_of(session)) == 4 and report.branch_messages == 0

    newer = chat_import(user=owner, path=write(tmp_path, [claude_tree("u-1", retried=True)]))

    assert path_of(session) == [
        "Explain mkclaudetree in Greek: καλημέρα\n\n[file notes.txt not imported]",
        "Καλημέρα: good morning, said until noon.",
    ]
    assert newer.paths_followed == 1 and newer.messages_appended == 1
    assert session.messages.filter(active=False).count() == 3
    assert not chat_import(
        user=owner, path=write(tmp_path, [claude_tree("u-1", retried=True)])
    ).added_anything


def test_a_claude_tree_imported_fresh_keeps_the_other_branch_as_an_alternative(owner, tmp_path):
    report = chat_import(user=owner, path=write(tmp_path, [claude_tree("u-1", retried=True)]))
    session = Session.objects.get(owner=owner)
    assert len(path_of(session)) == 2
    assert report.branch_messages == 3


def test_a_claude_prompt_edited_in_claude_becomes_a_followed_branch(owner, tmp_path):
    """Exports without parents list the conversation as Claude shows it now: after an edit,
    the list goes another way from the edited message on."""
    conv = claude_conversation("u-1", "Greek", "mkclaudeedit", replies=2)
    chat_import(user=owner, path=write(tmp_path, [conv]))
    edited = copy.deepcopy(conv)
    edited["chat_messages"][2] = {
        "uuid": "u-1-h2-edited",
        "text": "follow-up, reworded",
        "sender": "human",
        "created_at": "2024-05-02T11:00:00Z",
    }
    edited["chat_messages"][3] = {
        "uuid": "u-1-a2-edited",
        "text": "reply to the rewording",
        "sender": "assistant",
        "created_at": "2024-05-02T11:00:01Z",
    }

    report = chat_import(user=owner, path=write(tmp_path, [edited]))

    session = Session.objects.get(owner=owner)
    assert path_of(session)[-2:] == ["follow-up, reworded", "reply to the rewording"]
    original = session.messages.get(content="follow-up 2")
    assert not original.active
    places = alternatives_of([session.pk])
    assert places[original.pk].count == 2
    assert report.paths_followed == 1


def test_claude_refuses_a_tree_with_a_missing_parent(owner, tmp_path):
    from core.exceptions import ServiceError

    conv = claude_tree("u-1", retried=False)
    conv["chat_messages"][1]["parent_message_uuid"] = "gone"
    with pytest.raises(ServiceError, match="the parent of node u-1-a1 is missing"):
        chat_import(user=owner, path=write(tmp_path, [conv]))
    assert not Session.objects.filter(owner=owner).exists()


def test_reimporting_into_one_account_leaves_the_other_alone(owner, outsider, tmp_path):
    conv = chatgpt_conversation("c-1", "Weather", "mkapart")
    chat_import(user=owner, path=write(tmp_path, [conv]))
    chat_import(user=outsider, path=write(tmp_path, [conv]))
    theirs = snapshot(outsider)
    chat_import(user=owner, path=write(tmp_path, [regenerated(conv)]))
    assert snapshot(outsider) == theirs
    assert path_of(Session.objects.get(owner=owner))[-1] == "Et demain ?"
