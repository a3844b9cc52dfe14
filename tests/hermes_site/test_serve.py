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
from websockets.sync.client import connect

from tests.conftest import ROOT, free_port, wait_for
from tests.factories import PASSWORD

pytestmark = pytest.mark.slow


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def lines_about(log: str, needle: str) -> list[str]:
    return [line for line in log.splitlines() if needle in line]


def test_serve_runs_everything_and_ctrl_c_stops_it_all(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        HERMES_VAR_DIR=str(tmp_path / "var"),
        HERMES_ADMIN_PASSWORD=PASSWORD,
        PYTHONUNBUFFERED="1",
    )
    env.pop("HERMES_CELERY_EAGER", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    for step in (["migrate", "--noinput"], ["ensure_admin"]):
        subprocess.run(
            manage + step, env=env, cwd=ROOT, check=True, capture_output=True, timeout=120
        )

    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(
        manage + ["serve", "--port", str(port), "--worker-concurrency", "1", "--fake-llm"],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    started_size = 0

    def log_text() -> str:
        return log_path.read_text(errors="replace")

    try:

        def healthy():
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                    return json.load(r)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                assert proc.poll() is None, log_text()
                return None

        health = wait_for(healthy, timeout=90, interval=0.5, what="/healthz")
        assert health["status"] == "ok"
        assert health["components"]["channel_layer"]["detail"] == "RedisChannelLayer"
        assert "eager" not in health["components"]["broker"]["detail"]
        wait_for(
            lambda: "ready." in log_text(),
            timeout=60,
            what="the Celery worker",
        )

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
        admin_page = opener.open(f"{base}/admin/", timeout=10).read().decode()
        assert "Site administration" in admin_page
        # `--fake-llm` (make demo): the chat has a model, the scripted one.
        chat_page = opener.open(f"{base}/chat/", timeout=10).read().decode()
        assert 'id="no-model"' not in chat_page
        model_port = re.search(r"scripted model \(fake_llm\) at 127\.0\.0\.1:(\d+)", log_text())[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{model_port}/v1/models", timeout=5) as r:
            assert "scripted" in r.read().decode()
        with pytest.raises(urllib.error.HTTPError):
            opener.open(f"{base}/no-such-page/", timeout=10)
        cookies = "; ".join(f"{c.name}={c.value}" for c in jar)
        with connect(
            f"ws://127.0.0.1:{port}/ws/chat/",
            additional_headers={"Cookie": cookies, "Origin": base},
            open_timeout=10,
        ):
            pass

        family = descendants(proc.pid)
        assert len(family) >= 4  # valkey, the scripted model, daphne, celery (+ its pool)
        wait_for(lambda: "websocket closed" in log_text(), timeout=10, what="the access log")
        started_size = len(log_text())
    finally:
        # What Ctrl-C in a terminal does: SIGINT to the whole foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()
    output = log_text()
    assert code == 0, output
    leftovers = [pid for pid in family if alive(pid)]
    assert leftovers == [], f"processes left behind: {leftovers}"

    # One line per request: ours (core.logs), not also daphne's or django.request's.
    assert len(lines_about(output, "/accounts/login/")) == 2, output  # GET and POST
    assert len(lines_about(output, "/no-such-page/")) == 1, output
    assert len(lines_about(output, "GET /chat/ ")) == 1, output
    assert len(lines_about(output, "/ws/chat/")) == 2, output  # open, closed
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
