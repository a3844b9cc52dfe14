"""Processes the slow tests start and kill: `manage.py serve`'s children found by command
line under /proc, whether one is alive (a zombie is not), /healthz, and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path


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


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return 0


def ctrl_c(proc: subprocess.Popen[bytes]) -> int:
    """What Ctrl-C in a terminal does: SIGINT to the whole foreground process group."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def health(base: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as r:
            return json.load(r)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


#: How each process serve starts is recognised among its children.
COMMANDS = {
    "valkey": b"core.embedded",
    "fake_llm": b"devtools.scripted_llm",
    "web": b"daphne",
    "worker": b"celery",
}


def child_pid(parent: int, name: str) -> int | None:
    """The pid of serve's child `name` (None while it is down)."""
    for pid in descendants(parent):
        if parent_of(pid) == parent and alive(pid) and COMMANDS[name] in cmdline(pid):
            return pid
    return None
