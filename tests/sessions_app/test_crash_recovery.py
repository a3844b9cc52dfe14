"""Crashes, with real processes: a worker's pool child killed mid-compression, a holder of
an export / summary / review lease killed while a delivery waits for it, an ASGI server
killed mid-answer. Each time the work is taken over (or released) within seconds and done
once, and no user message is lost.

Kill points exercised: (1) pool child inside the compression's summary call (the scripted
model holds the response open); (2) a process holding an export (75 %), a search summary
or a review lease, killed after a delivery of the task found it alive; (3) daphne while the
model's stream is stalled mid-answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from devtools.scripted_llm import Fault
from privacy.models import ExportJob
from sessions_app import services
from sessions_app.models import Message, SearchSummary, Session
from sessions_app.search.summarise import query_hash
from skills_app.models import ReviewRun
from tests.conftest import (
    ROOT,
    RUN_ID,
    free_port,
    running_worker,
    start_daphne,
    subprocess_env,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE_ENV = {"HERMES_LEASE_SECONDS": "3", "HERMES_LEASE_HEARTBEAT": "0.5"}


def model_env(llm: Any) -> dict[str, str]:
    return {
        "OPENAI_BASE_URL": llm.base_url,
        "OPENAI_API_KEY": "x",
        "HERMES_MODEL": "scripted",
        "HERMES_SUMMARY_MODEL": "",
        "HERMES_LLM_MAX_RETRIES": "0",
    }


def socket_headers(user: Any, port: int) -> dict[str, str]:
    """What a logged-in tab of `user` sends when it opens the chat socket of the site on
    `port` (its Origin and session cookie)."""
    client = Client()
    client.force_login(user)
    return {
        "Origin": f"http://127.0.0.1:{port}",
        "Cookie": f"sessionid={client.cookies['sessionid'].value}",
    }


def conversation(owner: Any, turns: int = 8) -> Session:
    session = Session.objects.create(owner=owner, title="Crashy")
    for i in range(turns):
        Message.objects.create(session=session, role="user", content=f"Turn {i}: the deploy")
        Message.objects.create(
            session=session, role="assistant", status="complete", content=f"Answer {i}"
        )
    Session.objects.filter(pk=session.pk).update(message_count=2 * turns)
    return session


def summary_requests(llm: Any) -> list[dict[str, Any]]:
    return [
        body
        for body in llm.requests
        if "You are a summarisation agent" in str(body["messages"][-1].get("content"))
    ]


def test_a_killed_compression_is_taken_over_and_a_message_sent_meanwhile_is_kept(
    owner, llm_server, redis_url, tmp_path
):
    llm_server.reset()
    llm_server.add_rule(
        "You are a summarisation agent", reply="## Goal\nShip it", fault=Fault(latency=120, times=1)
    )
    session = conversation(owner)
    with running_worker(
        redis_url, tmp_path / "worker.log", queue=f"{RUN_ID}-crash", pool="prefork",
        **model_env(llm_server),
    ) as worker:  # fmt: skip
        worker.send("sessions_app.compress_session", session.pk)
        wait_for(lambda: summary_requests(llm_server), timeout=60, what="the summary call")
        (child,) = worker.children()
        holder = Session.objects.get(pk=session.pk).lease_owner
        assert holder.startswith("compress@") and f":{child}#" in holder

        # Item 1: a message sent during the compression is saved before anything waits.
        start = services.turn_begin(user=owner, session_id=session.pk, text="Sent meanwhile")
        assert start.lease is None and start.user_message is not None
        assert Message.objects.filter(content="Sent meanwhile").exists()

        os.kill(child, signal.SIGKILL)
        killed = time.monotonic()
        wait_for(
            lambda: Session.objects.filter(parent=session).exists(),
            timeout=30,
            what="the redelivered compression to finish",
        )
        took = time.monotonic() - killed
        log = worker.log.read_text()
    parent = Session.objects.get(pk=session.pk)
    (continuation,) = Session.objects.filter(parent=session)
    assert (parent.end_reason, parent.lease_owner) == ("compression", "")
    assert len(summary_requests(llm_server)) == 2  # the killed call and the one that finished
    assert "lease taken over: compress" in log or "released the lease of a dead process" in log
    assert took < 20, took
    # The message continues the conversation in the continuation, last (the run that took
    # over saw it, so it was carried over like the rest of the recent tail).
    last = continuation.messages.order_by("-id").first()
    assert (last.role, last.content) == ("user", "Sent meanwhile")
    answered = services.turn_begin(user=owner, session_id=session.pk, text=None, pending=True)
    assert answered.lease is not None and answered.session.pk == continuation.pk
    assert answered.user_message.content == "Sent meanwhile"
    answered.lease.release()


HOLDER = """
import json, os, sys, time
import django
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
django.setup()
from django.apps import apps
from core.leases import lease_acquire, lease_heartbeat
model = apps.get_model(sys.argv[1])
lease = lease_acquire(model, int(sys.argv[2]), kind=sys.argv[3], values=json.loads(sys.argv[4]))
assert lease is not None
print("held", flush=True)
with lease_heartbeat(lease):
    time.sleep(600)
"""


def hold_lease(model: str, pk: int, kind: str, values: dict[str, Any], log: Path):
    """A separate process that leases the row and keeps its lease alive until killed."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, model, str(pk), kind, json.dumps(values)],
            cwd=ROOT,
            env=subprocess_env(**LEASE_ENV),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    wait_for(lambda: b"held" in log.read_bytes() or proc.poll() is not None, timeout=60,
             what="the holder to lease the row")  # fmt: skip
    assert proc.poll() is None, log.read_text()
    return proc


def export_job(owner: Any, tmp_path: Path) -> tuple[Any, str, str, dict[str, Any]]:
    conversation(owner, turns=3)
    job = ExportJob.objects.create(owner=owner)
    return job, "privacy.ExportJob", "accounts.export_build", {"status": "running", "progress": 75}


def search_summary(owner: Any, tmp_path: Path) -> tuple[Any, str, str, dict[str, Any]]:
    session = conversation(owner, turns=3)
    last = session.messages.order_by("-id").first()
    row = SearchSummary.objects.create(
        owner=owner, session=session, query="deploy", query_hash=query_hash("deploy"),
        last_message_id=last.pk,
    )  # fmt: skip
    return (
        row,
        "sessions_app.SearchSummary",
        "sessions_app.summarise_search_hit",
        {"status": "running"},
    )


def review_run(owner: Any, tmp_path: Path) -> tuple[Any, str, str, dict[str, Any]]:
    session = conversation(owner, turns=3)
    last = session.messages.order_by("-id").first()
    run = ReviewRun.objects.create(session=session, last_message_id=last.pk, kind="memory")
    return run, "skills_app.ReviewRun", "skills_app.review_session", {"status": "running"}


@pytest.mark.parametrize("make", [export_job, search_summary, review_run], ids=lambda f: f.__name__)
def test_a_delivery_waits_for_a_live_holder_and_takes_over_when_it_dies(
    make, owner, llm_server, redis_url, tmp_path
):
    llm_server.reset()
    row, label, task, values = make(owner, tmp_path)
    kind = {"privacy.ExportJob": "export", "sessions_app.SearchSummary": "summary"}.get(
        label, "review"
    )
    holder = hold_lease(label, row.pk, kind, values, tmp_path / "holder.log")
    env = {**model_env(llm_server), **LEASE_ENV, "HERMES_EXPORT_DIR": str(tmp_path / "exports")}
    try:
        with running_worker(redis_url, tmp_path / "worker.log", queue=f"{RUN_ID}-lease",
                            **env) as worker:  # fmt: skip
            worker.send(task, row.pk)
            # A live holder: the delivery comes back later instead of doing the work twice.
            wait_for(lambda: b"Retry in" in worker.log.read_bytes(), timeout=30,
                     what="the delivery to see the live lease")  # fmt: skip
            assert type(row).objects.get(pk=row.pk).status == "running"
            holder.send_signal(signal.SIGKILL)
            holder.wait()
            killed = time.monotonic()
            wait_for(
                lambda: type(row).objects.get(pk=row.pk).status in ("done", "failed"),
                timeout=30,
                what="the work to be taken over",
            )
            took = time.monotonic() - killed
    finally:
        if holder.poll() is None:
            holder.kill()
    done = type(row).objects.get(pk=row.pk)
    assert (done.status, done.lease_owner) == ("done", ""), getattr(done, "error", "")
    assert took < 15, took
    if kind == "export":
        assert done.progress == 100 and len(list((tmp_path / "exports").glob("*.zip"))) == 1
    else:
        assert len(llm_server.requests) == 1  # the work ran once


def test_an_answer_left_streaming_by_a_killed_asgi_server_is_interrupted_on_restart(
    owner, llm_server, tmp_path
):
    from websockets.sync.client import connect

    llm_server.reset()
    llm_server.chunk_delay = 0.05
    llm_server.enqueue(
        reply="Here is a long answer " * 40, fault=Fault(stall_after=12, stall_seconds=120)
    )
    port = free_port()
    env = {
        **model_env(llm_server),
        "HERMES_STREAM_SAVE_INTERVAL": "0.1",
        "HERMES_REVIEW_ENABLED": "false",
        # Long: what unlocks the conversation is the restart, not an expiry.
        "HERMES_LEASE_SECONDS": "120",
    }
    headers = socket_headers(owner, port)
    first = start_daphne(port, tmp_path / "daphne.log", env)
    try:
        with connect(f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers) as ws:
            ws.send(json.dumps({"type": "chat.send", "session": None, "text": "Tell me"}))
            wait_for(
                lambda: Message.objects.filter(role="assistant").exclude(content="").exists(),
                timeout=30,
                what="part of the answer to be saved",
            )
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    answer = Message.objects.get(role="assistant")
    session, saved = answer.session, answer.content
    assert answer.status == "streaming" and session.lease_owner.startswith("turn@")
    assert saved.startswith("Here")
    started = time.monotonic()
    second = start_daphne(port, tmp_path / "daphne.log", env)
    try:
        answer.refresh_from_db()
        assert (answer.status, answer.content) == ("interrupted", saved)
        assert Session.objects.get(pk=session.pk).lease_owner == ""
        assert time.monotonic() - started < 30
        llm_server.chunk_delay = 0.0
        with connect(f"ws://127.0.0.1:{port}/ws/chat/", additional_headers=headers) as ws:
            ws.send(json.dumps({"type": "chat.send", "session": session.pk, "text": "Again"}))
            types = []
            while "assistant.done" not in types:
                event = json.loads(ws.recv(timeout=30))
                assert event["type"] != "error", event
                types.append(event["type"])
    finally:
        second.terminate()
        second.wait(timeout=15)
    assert session.messages.filter(role="user").count() == 2
