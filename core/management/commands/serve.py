"""`python manage.py serve`: the embedded Valkey, the ASGI server and a Celery worker,
supervised together. Ctrl-C (or SIGTERM) stops all of them, the web server and the worker
first and the Valkey they use last; if one dies, all stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core import preflight

STOP_GRACE_SECONDS = 10.0


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, env: dict[str, str], **popen: Any) -> subprocess.Popen[bytes]:
        # Own session: the terminal's Ctrl-C reaches only the supervisor, which stops the
        # children in order instead of letting them race.
        self.process = subprocess.Popen(self.argv, env=env, start_new_session=True, **popen)
        return self.process


class Command(BaseCommand):
    help = "Run the site: embedded Valkey (unless REDIS_URL is set), ASGI server, Celery worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.HERMES_HOST)
        parser.add_argument("--port", type=int, default=settings.HERMES_PORT)
        parser.add_argument("--no-worker", action="store_true", help="Do not start Celery.")
        parser.add_argument("--worker-concurrency", type=int, default=settings.HERMES_WORKERS)
        parser.add_argument(
            "--fake-llm",
            action="store_true",
            help="Also serve the scripted demo model (manage.py fake_llm) and chat with it.",
        )

    def handle(self, *args, **options):
        self._stopping = False
        try:
            preflight.check_database()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc

        # The children read their settings from the same environment (plus the broker), and
        # must not run tasks inline: they share the broker.
        env = dict(os.environ)
        env.pop("HERMES_CELERY_EAGER", None)
        services: list[Child] = []  # used by the children: stopped after them
        children = self._children(options)
        previous = {
            sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        exit_code = 0
        try:
            env["REDIS_URL"] = self._redis_url(services, env)
            if options["fake_llm"]:
                self._start_fake_llm(services, env)
            for child in children:
                if self._stopping:
                    break
                child.start(env)
                self.stdout.write(f"Started {child.name} (pid {child.process.pid})")
            if not self._stopping:
                self.stdout.write(
                    self.style.SUCCESS(
                        f"Hermes Web is running at http://{options['host']}:{options['port']}/ "
                        "— press Ctrl-C to stop."
                    )
                )
            exit_code = self._supervise(services + children)
        finally:
            self._stop_children(children)
            self._stop_children(services)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stdout.write("Stopped.")
        if exit_code:
            raise CommandError(f"a child process failed (status {exit_code})")

    def _children(self, options: dict[str, Any]) -> list[Child]:
        python = sys.executable
        # --verbosity 0: no access log of daphne's own. core.logs writes one line a request
        # and, in the application `make serve` runs too, one a websocket.
        web = [python, "-m", "daphne", "-b", options["host"], "-p", str(options["port"])]
        web += ["--verbosity", "0", "--websocket_timeout", "86400"]
        web += ["--application-close-timeout", "10", "hermes_site.asgi_proxy:application"]
        children = [Child("web", web)]
        if not options["no_worker"]:
            # --quiet: no start-up banner; the worker still logs "ready" and what it runs.
            worker = [python, "-m", "celery", "-A", "hermes_site", "--quiet", "worker"]
            worker += ["--loglevel", "INFO", "--concurrency", str(options["worker_concurrency"])]
            worker += ["--without-gossip", "--without-mingle"]
            children.append(Child("worker", worker))
        return children

    def _redis_url(self, services: list[Child], env: dict[str, str]) -> str:
        """REDIS_URL, or the URL of an embedded Valkey started (into `services`) for it."""
        url = settings.REDIS_URL
        if not url:
            directory = str(settings.VAR_DIR / "valkey")
            valkey = Child("valkey", [sys.executable, "-m", "core.embedded", directory])
            services.append(valkey)
            process = valkey.start(env, stdout=subprocess.PIPE)
            # Its one line, once the server answers; nothing if it failed (it says why).
            url = process.stdout.readline().decode().strip()
            process.stdout.close()
            if not url:
                raise CommandError("The embedded Valkey did not start.")
            self.stdout.write(f"Embedded Valkey listening on {url}")
        try:
            preflight.check_redis(url)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        return url

    def _start_fake_llm(self, services: list[Child], env: dict[str, str]) -> None:
        """Serve the demo script of `manage.py fake_llm` and point the children at it."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [sys.executable, "-m", "devtools.scripted_llm", "--port", str(port)]
        model = Child("fake_llm", argv)
        services.append(model)
        # Its own banner would name a second URL to open; the line below says what matters.
        model.start(env, stdout=subprocess.DEVNULL)
        # A real key from the environment has no business reaching the scripted model.
        env.update(
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            OPENAI_API_KEY="fake-llm",
            HERMES_MODEL="scripted",
            HERMES_SUMMARY_MODEL="",
        )
        self.stdout.write(f"Chatting with the scripted model (fake_llm) at 127.0.0.1:{port}")

    def _supervise(self, everything: list[Child]) -> int:
        """Wait for a stop request (0) or for a process to end (its status, at least 1)."""
        while not self._stopping:
            for child in everything:
                code = child.process.poll() if child.process else None
                if code is not None:
                    self.stderr.write(f"{child.name} exited with status {code}; stopping.")
                    return code or 1
            time.sleep(0.2)
        return 0

    def _request_stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _stop_children(self, children: list[Child]) -> None:
        running = [c for c in children if c.process and c.process.poll() is None]
        for child in running:
            try:
                os.killpg(child.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in running:
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(child.process.pid, signal.SIGKILL)
                child.process.wait()
        # Celery's pool processes share the worker's group; make sure none outlive it.
        for child in children:
            if child.process:
                try:
                    os.killpg(child.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
