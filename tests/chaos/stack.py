"""The chaos suite's stack: `manage.py serve` (daphne, a Celery worker with one pool child,
the embedded Valkey) on the test database, or beside a private redis-server of our own when
REDIS_URL is set (the machine's shared Redis is never killed), and how each process is
found and killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.conftest import ROOT, database_url_for_subprocess, free_port, wait_for
from tests.support.processes import alive, child_pid, cmdline, ctrl_c, descendants, health

#: Leases of the processes under test expire this fast, so recovery is seen in seconds.
LEASE_SECONDS = 3


class PrivateRedis:
    """A redis-server of this test on a free port (PostgreSQL runs: the machine's Redis is
    shared with other test runs and must never be killed)."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", ""]
        argv += ["--appendonly", "no", "--dir", str(self.directory)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, start_new_session=True)

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        wait_for(answers, timeout=20, what="the private redis-server")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def talks_over_pipes(pid: int) -> bool:
    try:
        return any(os.readlink(fd).startswith("pipe:") for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


class Stack:
    """`manage.py serve` on the test database, talking to the scripted model of this test."""

    def __init__(self, tmp_path: Path, llm: Any, redis: PrivateRedis | None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "serve.log"
        self.redis = redis
        self.exports = tmp_path / "var" / "exports"
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "HERMES_CELERY_EAGER")}
        env.update(
            DATABASE_URL=database_url_for_subprocess(),
            # The session cookie of this test process must be valid there.
            SECRET_KEY=settings.SECRET_KEY,
            HERMES_VAR_DIR=str(tmp_path / "var"),
            HERMES_EXPORT_DIR=str(self.exports),
            PYTHONUNBUFFERED="1",
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="x",
            HERMES_MODEL="scripted",
            HERMES_SUMMARY_MODEL="",
            HERMES_LLM_MAX_RETRIES="0",
            HERMES_LEASE_SECONDS=str(LEASE_SECONDS),
            HERMES_LEASE_HEARTBEAT="1",
            HERMES_RESTART_DELAY="0.1",
            HERMES_RESTART_DELAY_MAX="0.3",
            HERMES_STREAM_SAVE_INTERVAL="0.2",
            # A few turns fill the window: compressions run in every run.
            HERMES_CONTEXT_LENGTH="1500",
            HERMES_REPLY_MAX_TOKENS="200",
            HERMES_MEMORY_REVIEW_TURNS="2",
            HERMES_SEARCH_SUMMARY_TIMEOUT="4",
            HERMES_COMPRESSION_WAIT="20",
            # Work whose task died with the broker is sent again soon; the stack owns its
            # Redis (a private one), so its worker runs the scheduler that does that.
            HERMES_REQUEUE_SECONDS="2",
            HERMES_EMBEDDED_BEAT="true",
        )
        if redis is not None:
            env["REDIS_URL"] = redis.url
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(self.port),
                 "--worker-concurrency", "1"],
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.wait_healthy()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_healthy(self) -> None:
        def up() -> bool:
            assert self.process.poll() is None, self.text()
            state = health(self.base) or {}
            return state.get("status") == "ok" and self.worker_child() is not None

        wait_for(up, timeout=90, interval=0.2, what="the stack to be healthy")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            ctrl_c(self.process)

    # Processes, found under /proc.
    def web(self) -> int | None:
        return child_pid(self.process.pid, "web")

    def worker(self) -> int | None:
        return child_pid(self.process.pid, "worker")

    def worker_child(self) -> int | None:
        worker = self.worker()
        if worker is None:
            return None
        # The pool child and the embedded beat run the worker's command line; the pool
        # child is the one talking to its parent over pipes.
        for pid in descendants(worker):
            if alive(pid) and talks_over_pipes(pid):
                return pid
        return None

    def redis_server(self) -> int | None:
        if self.redis is not None:
            return self.redis.process.pid if self.redis.process.poll() is None else None
        wrapper = child_pid(self.process.pid, "valkey")
        if wrapper is None:
            return None
        return next((p for p in descendants(wrapper) if b"valkey-server" in cmdline(p)), None)

    def kill(self, target: str) -> None:
        """SIGKILL `target`, then wait until the stack serves again."""
        pid = {
            "web": self.web,
            "worker-child": self.worker_child,
            "worker-parent": self.worker,
            "redis": self.redis_server,
        }[target]()
        assert pid is not None, f"{target} is not running\n{self.text()}"
        os.kill(pid, signal.SIGKILL)
        if target == "redis" and self.redis is not None:
            self.redis.process.wait()
            self.redis.start()  # what a deployment's service manager does
        wait_for(lambda: not alive(pid), timeout=10, what=f"{target} to die")
        self.wait_healthy()


# --- the workload ---------------------------------------------------------------------------
