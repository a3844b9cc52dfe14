"""The import and its learning in a real Celery worker (prefork, Redis/Valkey broker)
against the scripted model over HTTP: the worker imports the upload, plans and runs the
learning; its pool child is killed in the middle of the second batch's model call; the
broker gives the task to the new child, which frees the dead child's lease and goes on from
that batch — no finished batch is read again, no note is saved twice. (The periodic
requeue's part, for work whose message is lost, is in test_chat_learning.)"""

from __future__ import annotations

import json
import os
import signal

import pytest

from devtools.scripted_llm import Fault
from memory.models import Inference, MemoryEntry
from privacy.models import ChatImportJob
from sessions_app.models import Message, Session
from tests.conftest import RUN_ID, running_worker, wait_for
from tests.privacy.learning import Reviewer, excerpt, is_extraction, is_review, user_ids
from tests.privacy.test_chat_learning import long_history

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_worker_killed_mid_learning_is_taken_over_and_finishes_once(
    owner, outsider, llm_server, redis_url, worker_export_dir, tmp_path
):
    llm_server.reset()
    first_of = {"mkchat0x": "Has a vegetable garden", "mkchat3x": "Grows tomatoes"}

    def hangs(body) -> bool:
        no_tool_yet = not any(m.get("role") == "tool" for m in body["messages"])
        return is_review(body) and "mkchat3x" in excerpt(body) and no_tool_yet

    # The second batch's first call hangs once: the pool child is killed during it.
    llm_server.add_rule(hangs, reply="late", fault=Fault(latency=120), times=1)
    Reviewer(llm_server, lambda text: [v for k, v in first_of.items() if k in text])
    llm_server.add_rule(
        is_extraction,
        reply=lambda body: json.dumps(
            {
                "inferences": [
                    {
                        "statement": "Gardens",
                        "category": "about",
                        "confidence": 0.9,
                        "evidence": user_ids(body)[:1],
                    }
                ]
            }
        ),
    )
    worker_export_dir.mkdir()
    name = f"u{owner.pk}-0123abcd.chatimport"
    (worker_export_dir / name).write_text(json.dumps(long_history(4)))
    Message.objects.create(
        session=Session.objects.create(owner=outsider, title="Theirs"),
        role="user",
        content="mkoutsider PIN",
    )
    job = ChatImportJob.objects.create(owner=owner, file_name=name, learn=True)
    queue = f"{RUN_ID}-learn"
    env = {
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": "x",
        "HERMES_MODEL": "scripted",
        "HERMES_SUMMARY_MODEL": "",
        "HERMES_LLM_MAX_RETRIES": "0",
        "HERMES_LLM_READ_TIMEOUT": "300",
        "HERMES_LEASE_SECONDS": "3",
        "HERMES_LEASE_HEARTBEAT": "0.5",
        "HERMES_INFERENCE_TRANSCRIPT_CHARS": "600",
        "HERMES_MEMORY_PROVIDER": "local",
        # What the worker queues itself (the learning, the requeue's sends) comes back to it.
        "HERMES_CELERY_QUEUE": queue,
    }
    with running_worker(
        redis_url, tmp_path / "worker.log", queue=queue, pool="prefork", **env
    ) as worker:
        worker.send("privacy.chat_import_run", job.pk)
        wait_for(
            lambda: any(hangs(r) for r in llm_server.requests),
            timeout=90,
            what="the second batch's review call",
        )
        (child,) = worker.children()
        held = ChatImportJob.objects.get(pk=job.pk)
        assert held.learn_status == "running" and held.lease_owner.startswith("chat_learn@")
        assert f":{child}#" in held.lease_owner
        assert held.learning["batch"] == 1  # the first batch is recorded as done
        os.kill(child, signal.SIGKILL)

        # The broker gives the unacknowledged task to the new child, which releases the
        # dead child's lease and goes on; the periodic requeue (run here by hand) finds the
        # work in hand and sends nothing more.
        worker.send("hermes_site.requeue")
        done = wait_for(
            lambda: ChatImportJob.objects.filter(pk=job.pk, learn_status="done").first(),
            timeout=60,
            what="the learning to finish",
        )
        log = worker.log.read_text()

    assert (
        "released the lease of a dead process: chat_learn" in log
        or "lease taken over: chat_learn" in log
    )
    assert done.status == "done" and "Conversations: 4 imported" in " ".join(done.report_lines)
    assert (done.learning["done"], done.learning["batch"], done.lease_owner) == (4, 2, "")
    # Each note once; the first batch was read once, the second twice (killed, then again).
    assert sorted(MemoryEntry.objects.filter(owner=owner).values_list("content", flat=True)) == [
        "Grows tomatoes",
        "Has a vegetable garden",
    ]
    batch_one = [r for r in llm_server.requests if is_review(r) and "mkchat0x" in excerpt(r)]
    batch_two = [r for r in llm_server.requests if is_review(r) and "mkchat3x" in excerpt(r)]
    assert (len(batch_one), len(batch_two)) == (2, 3)
    assert done.learning["notes"] == 2
    # The extracted inference points at an imported message (the notes are mirrored as
    # inferences too, as every memory write is); the other person's text never went out.
    inferred = Inference.objects.get(owner=owner, origin="extracted")
    assert set(Inference.objects.filter(owner=owner).values_list("origin", flat=True)) == {
        "extracted",
        "memory",
    }
    # One per batch, the same statement: merged, with the evidence of both.
    evidence = list(inferred.evidence.all())
    assert len(evidence) == 2
    assert all(m.session.owner_id == owner.pk and m.role == "user" for m in evidence)
    assert all("mkoutsider" not in json.dumps(r) for r in llm_server.requests)
    assert not MemoryEntry.objects.filter(owner=outsider).exists()
