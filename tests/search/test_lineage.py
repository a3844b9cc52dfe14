"""Lineage helpers: roots, lineage ids, compression tips and the one-row-per-chain list."""

from __future__ import annotations

import pytest

from sessions_app.lineage import (
    MAX_HOPS,
    compression_chain,
    compression_chains,
    compression_root,
    compression_roots,
    compression_tip,
    conversation_rows,
    conversation_tips,
    lineage_ids,
    lineage_root,
)
from sessions_app.models import Session

from .conftest import at, compress, make_chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(owner):
    """root → (compressed) → middle → (compressed) → tip, plus a delegated child of root."""
    root = make_chat(owner, [("user", "one"), ("assistant", "two")], title="Deploy")
    delegated = make_chat(owner, [("user", "side task")], parent=root, start=1)
    middle = compress(root, owner, [("user", "three")])
    tip = compress(middle, owner, [("user", "four"), ("assistant", "five")])
    return root, middle, tip, delegated


def test_compression_tip_walks_forward_through_continuations_only(chain):
    root, middle, tip, delegated = chain
    assert compression_tip(root) == tip
    assert compression_tip(middle) == tip
    assert compression_tip(tip) == tip
    assert compression_tip(delegated) == delegated


def test_a_child_started_before_the_parent_ended_is_not_a_continuation(owner):
    parent = make_chat(owner, [("user", "a")])
    Session.objects.filter(id=parent.id).update(
        end_reason=Session.EndReason.COMPRESSION, ended_at=at(30)
    )
    parent.refresh_from_db()
    early = make_chat(owner, [("user", "b")], parent=parent, start=10)
    assert compression_tip(parent) == parent
    assert compression_root(early) == early


def test_roots_and_chains(chain):
    root, middle, tip, delegated = chain
    assert lineage_root(tip) == root
    assert lineage_root(delegated) == root
    assert compression_root(tip) == root
    assert compression_root(delegated) == delegated
    assert compression_chain(middle) == [root, middle, tip]
    ids = [root.id, middle.id, tip.id, delegated.id]
    assert compression_roots(ids, owner_id=root.owner_id) == {
        root.id: root.id,
        middle.id: root.id,
        tip.id: root.id,
        delegated.id: delegated.id,
    }
    assert compression_chains([root.id], owner_id=root.owner_id) == {
        root.id: [root.id, middle.id, tip.id]
    }


def test_lineage_ids_are_ancestors_and_descendants(chain, owner):
    root, middle, tip, delegated = chain
    assert lineage_ids(root) == {root.id, middle.id, tip.id, delegated.id}
    # Siblings are not part of a lineage: only ancestors and descendants.
    assert lineage_ids(middle) == {root.id, middle.id, tip.id}
    assert lineage_ids(delegated) == {root.id, delegated.id}
    unrelated = make_chat(owner, [("user", "x")])
    assert lineage_ids(unrelated) == {unrelated.id}


def test_walks_stop_after_max_hops(owner):
    current = make_chat(owner, [("user", "0")])
    first = current
    for i in range(MAX_HOPS + 5):
        current = compress(current, owner, [("user", str(i))])
    tip = compression_tip(first)
    # Exactly MAX_HOPS steps forward, not the real end of the chain.
    assert len(compression_chain(first)) == MAX_HOPS + 1
    assert tip != current
    assert Session.objects.filter(parent=tip).exists()


def test_a_parent_cycle_does_not_loop(owner):
    a = make_chat(owner, [("user", "a")])
    b = make_chat(owner, [("user", "b")], parent=a)
    Session.objects.filter(id=a.id).update(parent=b)
    a.refresh_from_db()
    assert lineage_ids(a) == {a.id, b.id}
    assert lineage_root(a) in (a, b)


def test_list_shows_each_chain_once_at_its_tip(chain, owner, outsider):
    root, middle, tip, delegated = chain
    alone = make_chat(owner, [("user", "alone")], title="Alone", start=100)
    make_chat(outsider, [("user", "not yours")], title="Theirs")
    tips = list(conversation_tips(owner=owner))
    assert set(tips) == {tip, delegated, alone}
    rows = {r.tip.id: r for r in conversation_rows(owner=owner, tips=tips)}
    assert rows[tip.id].root_id == root.id
    assert rows[tip.id].title == "Deploy"  # the root's title carries over
    assert rows[tip.id].message_count == 5  # the whole chain
    assert rows[tip.id].chain_length == 3
    assert rows[tip.id].started_at == root.started_at
    assert rows[alone.id].message_count == 1


def test_list_hides_deleted_and_archived(owner):
    kept = make_chat(owner, [("user", "a")])
    make_chat(owner, [("user", "b")], end_reason=Session.EndReason.DELETED, ended=5)
    archived = make_chat(owner, [("user", "c")])
    Session.objects.filter(id=archived.id).update(archived=True)
    assert list(conversation_tips(owner=owner)) == [kept]
    assert set(conversation_tips(owner=owner, include_archived=True)) == {kept, archived}


def test_carried_messages_are_counted_once(owner):
    root = make_chat(owner, [("user", "a"), ("assistant", "b")])
    tip = compress(root, owner, [("user", "a", {"kind": "carried"}), ("user", "c")])
    (row,) = conversation_rows(owner=owner, tips=[tip])
    assert row.message_count == 3
