"""The restart delay of `manage.py serve`: doubled after each quick crash up to its cap,
back to the first delay after a long run, and one clear line per death. And the worker it
starts embeds the periodic-task scheduler only when HERMES_EMBEDDED_BEAT says so."""

from __future__ import annotations

import io

from django.core.management.base import OutputWrapper

from core.management.commands.serve import Child, Command


def crash(child: Child, command: Command, *, ran: float) -> None:
    child.start({"PATH": "/usr/bin:/bin"})
    code = child.process.wait()
    command._schedule_restart(child, code, child.started_at + ran)


def test_the_delay_doubles_up_to_its_cap_and_resets_after_a_long_run(settings):
    settings.HERMES_RESTART_DELAY = 1
    settings.HERMES_RESTART_DELAY_MAX = 4
    settings.HERMES_RESTART_RESET_SECONDS = 60
    errors = io.StringIO()
    command = Command()
    command.stderr = OutputWrapper(errors)
    child = Child("web", ["sh", "-c", "exit 3"])
    delays = []
    for _ in range(4):
        crash(child, command, ran=2)
        delays.append(child.delay)
    assert delays == [1, 2, 4, 4]
    crash(child, command, ran=61)
    assert child.delay == 1
    assert child.restart_at == child.started_at + 61 + 1
    last = errors.getvalue().splitlines()[-1]
    assert (
        last
        == f"web (pid {child.process.pid}) exited with status 3 after 61.0 s; restarting it in 1 s."
    )


def worker_argv(options: dict[str, object]) -> list[str]:
    (worker,) = [child for child in Command()._children(options) if child.name == "worker"]
    return worker.argv


def test_the_worker_embeds_beat_only_when_the_setting_says_so(settings):
    options = {"host": "127.0.0.1", "port": 8000, "no_worker": False, "worker_concurrency": 1}
    settings.HERMES_EMBEDDED_BEAT = True
    argv = worker_argv(options)
    assert argv[argv.index("-B") + 1 : argv.index("-B") + 3] == [
        "--schedule",
        settings.CELERY_BEAT_SCHEDULE_FILENAME,
    ]
    settings.HERMES_EMBEDDED_BEAT = False
    argv = worker_argv(options)
    assert "-B" not in argv and "--schedule" not in argv
    assert "worker" in argv
