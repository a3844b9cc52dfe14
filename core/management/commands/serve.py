"""`python manage.py serve`: the embedded Valkey, the ASGI server and a Celery worker (with
the periodic-task scheduler embedded, unless REDIS_URL names a shared Redis whose deployment
runs its own: see HERMES_EMBEDDED_BEAT), supervised together.

A process that dies is restarted after HERMES_RESTART_DELAY seconds, doubled after each
crash up to HERMES_RESTART_DELAY_MAX, back to the first delay once it had run for
HERMES_RESTART_RESET_SECONDS; the others keep running. Each death and each restart is one
line. Ctrl-C (or SIGTERM) stops all of them: the web server and the worker first, the
Valkey (and scripted model) they use last."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from core import preflight

STOP_GRACE_SECONDS = 10.0
POLL_SECONDS = 0.2


@dataclass
class Child:
    name: str
    argv: list[str]
    #: Prints one line (its URL) once it serves, nothing if it failed: wait for it.
    announces: bool = False
    quiet: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    started_at: float = 0.0
    delay: float = 0.0
    restart_at: float | None = None
    restarts: int = 0

    def start(self, env: dict[str, str]) -> str:
        """Start the process; returns its announced line ('' if it announces nothing)."""
        # Own session: the terminal's Ctrl-C reaches only the supervisor, which stops the
        # children in order instead of letting them race.
        stdout = subprocess.PIPE if self.announces else None
        if self.quiet:
            stdout = subprocess.DEVNULL
        self.process = subprocess.Popen(self.argv, env=env, start_new_session=True, stdout=stdout)
        self.started_at = time.monotonic()
        self.restart_at = None
        if not self.announces:
            return ""
        line = self.process.stdout.readline().decode().strip()
        self.process.stdout.close()
        return line

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass


def describe_status(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exited with status {code}"


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
        self._env = env = dict(os.environ)
        env.pop("HERMES_CELERY_EAGER", None)
        services: list[Child] = []  # used by the children: stopped after them
        children = self._children(options)
        previous = {
            sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            env["REDIS_URL"] = self._redis_url(services)
            if options["fake_llm"]:
                self._start_fake_llm(services)
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
            self._supervise(services + children)
        finally:
            self._stop_children(children)
            self._stop_children(services)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stdout.write("Stopped.")

    def _children(self, options: dict[str, object]) -> list[Child]:
        python = sys.executable
        # --verbosity 0: no access log of daphne's own (it would print query strings, which
        # may hold search terms). core.logs writes one line a request (path only) and, in
        # the application `make serve` runs too, one a websocket.
        web = [python, "-m", "daphne", "-b", options["host"], "-p", str(options["port"])]
        web += ["--verbosity", "0", "--websocket_timeout", "86400"]
        web += ["--application-close-timeout", "10", "hermes_site.asgi_proxy:application"]
        children = [Child("web", web)]
        if not options["no_worker"]:
            # --quiet: no start-up banner; the worker still logs "ready" and what it runs.
            worker = [python, "-m", "celery", "-A", "hermes_site", "--quiet", "worker"]
            worker += ["--loglevel", "INFO", "--concurrency", str(options["worker_concurrency"])]
            worker += ["--without-gossip", "--without-mingle"]
            if settings.HERMES_EMBEDDED_BEAT:
                # -B: the periodic tasks' scheduler runs inside it. Not by default beside a
                # shared Redis: the deployment's own `make beat` would send everything twice.
                worker += ["-B", "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME]
            children.append(Child("worker", worker))
        return children

    def _redis_url(self, services: list[Child]) -> str:
        """REDIS_URL, or the URL of an embedded Valkey started (into `services`) for it."""
        url = settings.REDIS_URL
        if not url:
            directory = str(settings.VAR_DIR / "valkey")
            valkey = Child("valkey", [sys.executable, "-m", "core.embedded", directory], True)
            services.append(valkey)
            # Its one line, once the server answers; nothing if it failed (it says why).
            url = valkey.start(self._env)
            if not url:
                raise CommandError("The embedded Valkey did not start.")
            self.stdout.write(f"Embedded Valkey listening on {url}")
        try:
            preflight.check_redis(url)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        return url

    def _start_fake_llm(self, services: list[Child]) -> None:
        """Serve the demo script of `manage.py fake_llm` and point the children at it."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        argv = [sys.executable, "-m", "devtools.scripted_llm", "--port", str(port)]
        # Its own banner would name a second URL to open; the line below says what matters.
        model = Child("fake_llm", argv, quiet=True)
        services.append(model)
        model.start(self._env)
        # A real key from the environment has no business reaching the scripted model.
        self._env.update(
            OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1",
            OPENAI_API_KEY="fake-llm",
            HERMES_MODEL="scripted",
            HERMES_SUMMARY_MODEL="",
        )
        self.stdout.write(f"Chatting with the scripted model (fake_llm) at 127.0.0.1:{port}")

    def _supervise(self, everything: list[Child]) -> None:
        """Until a stop is requested: reap each process that ends and restart it later."""
        while not self._stopping:
            now = time.monotonic()
            for child in everything:
                if self._stopping:
                    break
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self._restart(child)
                    continue
                code = child.process.poll()  # reaps it: no zombie
                if code is not None:
                    self._schedule_restart(child, code, now)
            time.sleep(POLL_SECONDS)

    def _schedule_restart(self, child: Child, code: int, now: float) -> None:
        # What it left in its process group (Celery's pool, beat) goes with it.
        child.kill_group(signal.SIGKILL)
        ran = now - child.started_at
        first = settings.HERMES_RESTART_DELAY
        if ran >= settings.HERMES_RESTART_RESET_SECONDS or not child.delay:
            child.delay = first
        else:
            child.delay = min(child.delay * 2, settings.HERMES_RESTART_DELAY_MAX)
        child.restart_at = now + child.delay
        self.stderr.write(
            f"{child.name} (pid {child.process.pid}) {describe_status(code)} after {ran:.1f} s; "
            f"restarting it in {child.delay:g} s."
        )

    def _restart(self, child: Child) -> None:
        old = child.process.pid
        child.restarts += 1
        child.start(self._env)  # a start that fails ends the process: the next poll sees it
        self.stdout.write(
            f"Restarted {child.name} (pid {old} -> {child.process.pid}, restart {child.restarts})."
        )

    def _request_stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _stop_children(self, children: list[Child]) -> None:
        running = [c for c in children if c.running()]
        for child in running:
            child.kill_group(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in running:
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill_group(signal.SIGKILL)
                child.process.wait()
        # Celery's pool processes share the worker's group; make sure none outlive it.
        for child in children:
            if child.process:
                child.kill_group(signal.SIGKILL)
