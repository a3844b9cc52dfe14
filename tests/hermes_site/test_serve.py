"""`manage.py serve` (what `make run` and `make demo` end with): embedded Valkey, ASGI
server, worker and (for the demo) the scripted model start together, serve pages and
/healthz, log each request once, and all stop on Ctrl-C, quietly, with nothing left behind."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.conftest import ROOT, free_port, wait_for
from tests.factories import PASSWORD
from tests.support.processes import alive, child_pid, cmdline, ctrl_c, descendants, health

MANAGE = [sys.executable, str(ROOT / "manage.py")]
SECRET = "zebra-secret-term"

pytestmark = pytest.mark.slow


def lines_about(log: str, needle: str) -> list[str]:
    return [line for line in log.splitlines() if needle in line]


def serve_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of `make run` in `tmp_path`, migrated and with its admin."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        HERMES_VAR_DIR=str(tmp_path / "var"),
        HERMES_ADMIN_PASSWORD=PASSWORD,
        PYTHONUNBUFFERED="1",
        **extra,
    )
    env.pop("HERMES_CELERY_EAGER", None)
    for step in (["migrate", "--noinput"], ["ensure_admin"]):
        subprocess.run(
            MANAGE + step, env=env, cwd=ROOT, check=True, capture_output=True, timeout=120
        )
    return env


def start_serve(tmp_path: Path, env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    """`manage.py serve --fake-llm` in its own process group, logging to serve.log."""
    with (tmp_path / "serve.log").open("wb") as log:
        return subprocess.Popen(
            MANAGE + ["serve", "--port", str(port), "--worker-concurrency", "1", "--fake-llm"],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def log_in(base: str) -> tuple[urllib.request.OpenerDirector, str]:
    """An opener logged in as the admin, and its Cookie header."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/accounts/login/", timeout=10).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode(
        {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token}
    ).encode()
    request = urllib.request.Request(
        f"{base}/accounts/login/", data=data, headers={"Referer": f"{base}/accounts/login/"}
    )
    dashboard = opener.open(request, timeout=10)
    assert dashboard.geturl() == f"{base}/"
    assert "Welcome, admin" in dashboard.read().decode()
    return opener, "; ".join(f"{c.name}={c.value}" for c in jar)


def test_serve_runs_everything_and_ctrl_c_stops_it_all(tmp_path):
    env = serve_env(tmp_path)
    port = free_port()
    proc = start_serve(tmp_path, env, port)
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    started_size = 0

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    try:

        def healthy():
            assert proc.poll() is None, log_text()
            return health(base)

        state = wait_for(healthy, timeout=90, interval=0.5, what="/healthz")
        assert state["status"] == "ok"
        assert state["components"]["channel_layer"]["detail"] == "LocalFirstRedisChannelLayer"
        assert "eager" not in state["components"]["broker"]["detail"]
        wait_for(
            lambda: "ready." in log_text(),
            timeout=60,
            what="the Celery worker",
        )

        opener, cookies = log_in(base)
        admin_page = opener.open(f"{base}/admin/", timeout=10).read().decode()
        assert "Site administration" in admin_page
        # `--fake-llm` (make demo): the chat has a model, the scripted one.
        chat_page = opener.open(f"{base}/chat/", timeout=10).read().decode()
        assert 'id="no-model"' not in chat_page
        model_port = re.search(r"scripted model \(fake_llm\) at 127\.0\.0\.1:(\d+)", log_text())[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{model_port}/v1/models", timeout=5) as r:
            assert "scripted" in r.read().decode()
        # Search terms travel in query strings: none may reach the log.
        with pytest.raises(urllib.error.HTTPError):
            opener.open(f"{base}/no-such-page/?q={SECRET}", timeout=10)
        opener.open(f"{base}/api/search/?q={SECRET}", timeout=10).read()
        opener.open(f"{base}/sessions/?q={SECRET}", timeout=10).read()
        with connect(
            f"ws://127.0.0.1:{port}/ws/chat/?q={SECRET}",
            additional_headers={"Cookie": cookies, "Origin": base},
            open_timeout=10,
        ):
            pass
        # The whole origin counts: the same host on another port or scheme is refused.
        for origin in ("http://localhost:9999", "https://127.0.0.1", f"http://localhost:{port}"):
            with pytest.raises(InvalidStatus) as refused:
                connect(
                    f"ws://127.0.0.1:{port}/ws/chat/",
                    additional_headers={"Cookie": cookies, "Origin": origin},
                    open_timeout=10,
                )
            assert refused.value.response.status_code == 403

        family = descendants(proc.pid)
        assert len(family) >= 4  # valkey, the scripted model, daphne, celery (+ its pool)
        wait_for(lambda: "websocket closed" in log_text(), timeout=10, what="the access log")
        started_size = len(log_text())
    finally:
        code = ctrl_c(proc)
    output = log_text()
    assert code == 0, output
    leftovers = [pid for pid in family if alive(pid)]
    assert leftovers == [], f"processes left behind: {leftovers}"

    # One line per request: ours (core.logs), not also daphne's or django.request's.
    assert len(lines_about(output, "/accounts/login/")) == 2, output  # GET and POST
    assert len(lines_about(output, "/no-such-page/")) == 1, output
    assert len(lines_about(output, "GET /chat/ ")) == 1, output
    assert len(lines_about(output, "GET /api/search/ 200")) == 1, output
    assert len(lines_about(output, "websocket open /ws/chat/")) == 1, output
    assert len(lines_about(output, "websocket closed /ws/chat/")) == 1, output
    assert len(lines_about(output, "websocket refused /ws/chat/")) == 3, output
    assert SECRET not in output
    # A clean start and stop: no tracebacks, errors or warnings (but Celery's about running
    # as root, which is true where the suite runs as root and is the person's to act on).
    start, stop = output[:started_size], output[started_size:]
    noise = re.compile(r"error|traceback|warning", re.IGNORECASE)
    if os.geteuid() == 0:
        root_warning = r"SecurityWarning: You're running the worker with superuser.*?uid,\n"
        start = re.sub(root_warning, "", start, flags=re.DOTALL)
    assert not noise.search(start), start
    assert not noise.search(stop), stop
    assert stop.strip().endswith("Stopped."), stop


def chat_answers(port: int, cookies: str) -> str:
    """Send one message over a new websocket; the text of the finished answer."""
    with connect(
        f"ws://127.0.0.1:{port}/ws/chat/",
        additional_headers={"Cookie": cookies, "Origin": f"http://127.0.0.1:{port}"},
        open_timeout=10,
    ) as ws:
        ws.send(json.dumps({"type": "chat.send", "session": None, "text": "Hello there"}))
        deltas = []
        while True:
            event = json.loads(ws.recv(timeout=60))
            assert event["type"] != "error", event
            if event["type"] == "assistant.delta":
                deltas.append(event["text"])
            if event["type"] == "assistant.done":
                return "".join(deltas)


def test_serve_restarts_each_crashed_process_and_sweeps_leftovers(tmp_path):
    env = serve_env(
        tmp_path,
        HERMES_RESTART_DELAY="0.2",
        HERMES_RESTART_DELAY_MAX="0.4",
        HERMES_RESTART_RESET_SECONDS="600",
    )
    # A crashed export build of an earlier run, older than any build can take.
    leftover = tmp_path / "var" / "exports" / ".build-u7-0f0f-crashed"
    leftover.mkdir(parents=True)
    (leftover / "state.db").write_bytes(b"titles of a deleted person")
    for path in (leftover, leftover / "state.db"):
        os.utime(path, (1, 1))
    port = free_port()
    proc = start_serve(tmp_path, env, port)
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    seen: set[int] = set()

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    def restarted(name: str, old: int) -> int:
        """Wait until `name` runs again under a new pid and the site is healthy."""
        new = wait_for(
            lambda: child_pid(proc.pid, name) not in (old, None) and child_pid(proc.pid, name),
            timeout=30,
            what=f"{name} to restart",
        )
        assert proc.poll() is None, log_text()
        wait_for(lambda: (health(base) or {}).get("status") == "ok", timeout=60, what="health")
        seen.update(descendants(proc.pid))
        return new

    try:
        wait_for(lambda: health(base), timeout=90, interval=0.5, what="/healthz")
        wait_for(lambda: "ready." in log_text(), timeout=60, what="the Celery worker")
        _opener, cookies = log_in(base)
        assert chat_answers(port, cookies)
        seen.update(descendants(proc.pid))
        # The scheduler runs inside the worker, and its housekeeping ran at start.
        assert list((tmp_path / "var").glob("celerybeat-schedule*"))
        wait_for(lambda: not leftover.exists(), timeout=30, what="the sweep of old builds")

        # Valkey: its server process (a child of the wrapper serve started) dies.
        wrapper = child_pid(proc.pid, "valkey")
        server = next(p for p in descendants(wrapper) if b"valkey-server" in cmdline(p))
        os.kill(server, signal.SIGKILL)
        restarted("valkey", wrapper)
        assert not alive(server)  # reaped, no zombie
        assert chat_answers(port, cookies)  # the channel layer and the broker are back

        web = child_pid(proc.pid, "web")
        os.kill(web, signal.SIGKILL)
        web = restarted("web", web)
        assert chat_answers(port, cookies)
        # Crashing again soon after: the delay doubles (up to its cap).
        os.kill(web, signal.SIGKILL)
        restarted("web", web)
        assert "restarting it in 0.4 s." in log_text()

        worker = child_pid(proc.pid, "worker")
        os.kill(worker, signal.SIGKILL)
        restarted("worker", worker)
        wait_for(lambda: log_text().count("ready.") == 2, timeout=60, what="the new worker")

        model = child_pid(proc.pid, "fake_llm")
        os.kill(model, signal.SIGKILL)
        restarted("fake_llm", model)
        assert chat_answers(port, cookies)
    finally:
        code = ctrl_c(proc)
    output = log_text()
    assert code == 0, output
    leftovers = [pid for pid in seen if alive(pid)]
    assert leftovers == [], f"processes left behind: {leftovers}"
    # One line per death and one per restart, naming the process and what happened.
    for name in ("valkey", "web", "worker", "fake_llm"):
        assert re.search(
            rf"^{name} \(pid \d+\) (killed by SIGKILL|exited with status 1) ", output, re.M
        ), output
    assert len(re.findall(r"^Restarted ", output, re.M)) == 5, output
    assert output.strip().endswith("Stopped."), output
