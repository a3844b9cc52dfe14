"""`python manage.py serve`: the embedded Valkey, the ASGI server and a Celery worker,
supervised together. Ctrl-C (or SIGTERM) stops all of them; if one dies, all stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

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


class Command(BaseCommand):
    help = "Run the site: embedded Valkey (unless REDIS_URL is set), ASGI server, Celery worker."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=settings.HERMES_HOST)
        parser.add_argument("--port", type=int, default=settings.HERMES_PORT)
        parser.add_argument("--no-worker", action="store_true", help="Do not start Celery.")
        parser.add_argument("--worker-concurrency", type=int, default=settings.HERMES_WORKERS)

    def handle(self, *args, **options):
        self._stopping = False
        try:
            preflight.check_database()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc

        valkey = None
        # The children read their settings from the same environment (plus the broker).
        env = dict(os.environ)
        if settings.REDIS_URL:
            redis_url = settings.REDIS_URL
        else:
            from core.embedded import start_valkey

            valkey, redis_url = start_valkey(settings.VAR_DIR / "valkey")
            self.stdout.write(f"Embedded Valkey listening on {redis_url}")
            env["REDIS_URL"] = redis_url
        try:
            preflight.check_redis(redis_url)
        except ImproperlyConfigured as exc:
            if valkey is not None:
                valkey.stop()
            raise CommandError(str(exc)) from exc
        # Children must not run tasks inline: they share the broker.
        env.pop("HERMES_CELERY_EAGER", None)

        python = sys.executable
        children = [
            Child(
                "web",
                [
                    python,
                    "-m",
                    "daphne",
                    "-b",
                    options["host"],
                    "-p",
                    str(options["port"]),
                    "--websocket_timeout",
                    "86400",
                    "--application-close-timeout",
                    "10",
                    "hermes_site.asgi:application",
                ],
            )
        ]
        if not options["no_worker"]:
            children.append(
                Child(
                    "worker",
                    [
                        python,
                        "-m",
                        "celery",
                        "-A",
                        "hermes_site",
                        "worker",
                        "--loglevel",
                        "INFO",
                        "--concurrency",
                        str(options["worker_concurrency"]),
                        "--without-gossip",
                        "--without-mingle",
                    ],
                )
            )

        previous = {
            sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        exit_code = 0
        try:
            for child in children:
                # Own process group: the terminal's Ctrl-C reaches only us, and we stop
                # the children in order instead of racing them.
                child.process = subprocess.Popen(child.argv, env=env, start_new_session=True)
                self.stdout.write(f"Started {child.name} (pid {child.process.pid})")
            self.stdout.write(
                self.style.SUCCESS(
                    f"Hermes Web is running at http://{options['host']}:{options['port']}/ "
                    "— press Ctrl-C to stop."
                )
            )
            while not self._stopping:
                for child in children:
                    code = child.process.poll() if child.process else None
                    if code is not None:
                        self.stderr.write(f"{child.name} exited with status {code}; stopping.")
                        exit_code = code or 1
                        self._stopping = True
                        break
                time.sleep(0.2)
        finally:
            self._stop_children(children)
            if valkey is not None:
                valkey.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stdout.write("Stopped.")
        if exit_code:
            raise CommandError(f"a child process failed (status {exit_code})")

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
