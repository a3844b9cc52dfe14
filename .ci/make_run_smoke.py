"""Clone the repository, run `make run` as a new user would, wait for /healthz, log in,
press Ctrl-C, and check that no process of the clone is left running."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "smoke-test-password-1234"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_in(directory: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(directory)):
            found.append(int(entry.name))
    return found


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="hermes-smoke-"))
    clone = workdir / "hermes-web"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    port = free_port()
    env = {
        k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "VIRTUAL_ENV")
    }
    env.update(HERMES_ADMIN_PASSWORD=PASSWORD, HERMES_PORT=str(port))
    log_path = workdir / "make-run.log"
    log = log_path.open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(
        ["make", "run"],
        cwd=clone,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    ok = False
    try:
        health = None
        while time.monotonic() - started < 900 and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
                    health = json.load(r)
                    break
            except OSError:
                time.sleep(1)
        if health is None:
            print(log_path.read_text()[-4000:])
            print("FAILED: /healthz never answered")
            return 1
        print(f"/healthz after {time.monotonic() - started:.0f}s: {json.dumps(health)}")
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(f"{base}/accounts/login/", timeout=10).read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        data = urllib.parse.urlencode(
            {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token}
        ).encode()
        req = urllib.request.Request(
            f"{base}/accounts/login/", data=data, headers={"Referer": f"{base}/accounts/login/"}
        )
        body = opener.open(req, timeout=10).read().decode()
        ok = health["status"] == "ok" and "Welcome, admin" in body
        print("login:", "ok" if "Welcome, admin" in body else "FAILED")
    finally:
        # What Ctrl-C in a terminal does: SIGINT to the foreground process group.
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            ok = False
        log.close()
        time.sleep(1)
        leftovers = processes_in(clone)
        if leftovers:
            print(f"FAILED: processes left behind: {leftovers}")
            for pid in leftovers:
                os.kill(pid, signal.SIGKILL)
            ok = False
        else:
            print("no process left behind")
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(log_path.read_text()[-4000:])
    print("make run smoke:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
