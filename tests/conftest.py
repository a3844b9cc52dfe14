"""Shared fixtures: named personas, the scripted model (devtools.scripted_llm over real
HTTP), a real Redis (the machine's or an embedded Valkey), and real Celery worker processes.

Objects are built with the factories in tests/factories.py. Tests that start a process (a
worker, a server, a browser) carry the `slow` marker, which `make test-fast` leaves out; the
collection hook below refuses a test that uses such a fixture without it.

The database is whatever DATABASE_URL says (a SQLite file by default, PostgreSQL in CI's
second run); nothing here mocks it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.utils import translation

from devtools.scripted_llm import ScriptedLLM
from hermes_site.celery import app as celery_app
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parent.parent
# Fixtures that start a process; a test using one must be marked `slow`.
PROCESS_FIXTURES = frozenset(
    {
        "celery_worker",
        "scripted_worker",
        "live_server_url",
        "browser",
        "stack",
        "mcp_daphne",
        "oidc_provider",
    }
)
# Channel-layer prefix and Celery queue of this test run, so parallel runs sharing the
# machine's Redis never see each other's messages.
RUN_ID = f"test{os.getpid()}"


def pytest_collection_modifyitems(config, items):
    """`make test-fast` runs `-m "not slow"`: a test that starts a process without the
    marker would slip into it, so collection stops on one."""
    unmarked = [
        f"{item.nodeid} uses {', '.join(sorted(PROCESS_FIXTURES & set(item.fixturenames)))}"
        for item in items
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ()))
        and item.get_closest_marker("slow") is None
    ]
    if unmarked:
        raise pytest.UsageError("mark these tests slow:\n" + "\n".join(unmarked))


@pytest.fixture(autouse=True, scope="session")
def _tasks_run_inline() -> Iterator[None]:
    # Unit tests run tasks inline; tests that need the real worker use `celery_worker`.
    previous = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    yield
    celery_app.conf.task_always_eager = previous


@pytest.fixture(autouse=True)
def _language_reset() -> Iterator[None]:
    # A page request leaves its reader's language active in the thread (LocaleMiddleware
    # activates, nothing deactivates): the next test would start in Chinese, and what it
    # reads of a message marked for translation with it.
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Iterator[None]:
    # Each async test runs on its own event loop, but channels caches one layer instance per
    # process: its receive lock belongs to the loop that first used it, so one test ending
    # mid-receive (a timeout on a loaded machine) left it locked and every later websocket
    # test failed with "Lock is bound to a different event loop".
    yield
    from channels.layers import channel_layers

    channel_layers.backends.clear()


@pytest.fixture
def owner(db):
    """The person whose data a test is about."""
    return UserFactory(username="olivia")


@pytest.fixture
def outsider(db):
    """Another member of the team who must never see the owner's data."""
    return UserFactory(username="oscar")


@pytest.fixture
def staff_member(db):
    """A staff user (admin access) who is not a superuser."""
    return UserFactory(username="stella", staff=True)


@pytest.fixture
def superuser(db):
    return UserFactory(username="root", superuser=True)


# --- the scripted model -----------------------------------------------------------------------

# What `scripted` sets for every test; a folder adds or overrides with `scripted_settings`.
SCRIPTED_SETTINGS: dict[str, Any] = {
    "OPENAI_API_KEY": "sk-test",
    "HERMES_MODEL": "scripted",
    "HERMES_SUMMARY_MODEL": "",
    "HERMES_LLM_CONNECT_TIMEOUT": 2.0,
    "HERMES_LLM_READ_TIMEOUT": 5.0,
    "HERMES_LLM_MAX_RETRIES": 0,
}


@pytest.fixture(scope="session")
def llm_server() -> Iterator[ScriptedLLM]:
    """The scripted OpenAI-compatible server of this test process (a thread, not a process)."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def scripted_settings() -> dict[str, Any]:
    """Settings a folder's tests want on top of SCRIPTED_SETTINGS (override per folder)."""
    return {}


@pytest.fixture
def scripted(
    llm_server: ScriptedLLM, settings: Any, scripted_settings: dict[str, Any]
) -> Iterator[ScriptedLLM]:
    """The scripted model, reset, with this process's settings pointing at it."""
    llm_server.reset()
    llm_server.chunk_delay = 0.0
    settings.OPENAI_BASE_URL = llm_server.base_url
    for name, value in {**SCRIPTED_SETTINGS, **scripted_settings}.items():
        setattr(settings, name, value)
    yield llm_server
    # Search summaries left running past a test's timeout must not outlive the test.
    from sessions_app.search import summarise

    summarise.join_background(timeout=15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory) -> Iterator[str]:
    """The machine's Redis when REDIS_URL is set (CI's second run), else an embedded Valkey."""
    if settings.REDIS_URL:
        yield settings.REDIS_URL
        return
    from core.embedded import start_valkey

    # Short path: unix socket paths are limited to ~108 bytes.
    directory = Path(tmp_path_factory.mktemp("valkey"))
    server, url = start_valkey(directory)
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def redis_channel_layer(redis_url, settings):
    """Route the channel layer through real Redis/Valkey for this test (the layer a
    deployment with REDIS_URL uses by default)."""
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.channel_layer.LocalFirstRedisChannelLayer",
            # Longer than channels_redis' 5 s blocking read (redis-py's default would cut it).
            "CONFIG": {
                "hosts": [{"address": redis_url, "socket_timeout": 30}],
                "prefix": RUN_ID,
            },
        }
    }
    return redis_url


# --- the OpenID Connect provider of the single sign-on tests ---------------------------------


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory):
    """A real OpenID Connect provider (tests/support/oidc_provider) for the whole run; each
    test says who may sign in there with `set_people`."""
    from tests.support.oidc_provider.handle import start_provider

    provider = start_provider(tmp_path_factory.mktemp("oidc-provider"), free_port())
    try:
        yield provider
    finally:
        provider.stop()


# --- live servers of browser tests ----------------------------------------------------------


class ServerPool:
    """Daphne processes on the test database, one per distinct environment, started on
    first use and kept for the whole run: starting Django costs seconds, and the tests of a
    run differ only in a few variables (the scripted model's address, REDIS_URL or not).
    Each test still gets an emptied database (transactional_db) and a browser context of
    its own."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.servers: dict[tuple[tuple[str, str], ...], tuple[subprocess.Popen, str]] = {}

    def url_for(self, env: dict[str, str]) -> str:
        """The address of a server with `env` on top of subprocess_env (started if none)."""
        # A server outlives its test: it holds no idle database connection between requests
        # (PostgreSQL's 100 are needed by the 50-writer race later in the run).
        env = {"HERMES_DB_CONN_MAX_AGE": "0", **env}
        full = subprocess_env(**env)
        # pytest names the running test in the environment.
        full.pop("PYTEST_CURRENT_TEST", None)
        key = tuple(sorted(full.items()))
        if key in self.servers and self.servers[key][0].poll() is None:
            return self.servers[key][1]
        port = free_port()
        proc = start_daphne(port, self.logs / f"daphne-{port}.log", env)
        self.servers[key] = (proc, f"http://127.0.0.1:{port}")
        return self.servers[key][1]

    def stop(self) -> None:
        for proc, _url in self.servers.values():
            stop_process(proc)


@pytest.fixture(scope="session")
def server_pool(django_db_setup, tmp_path_factory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory.mktemp("daphne"))
    try:
        yield pool
    finally:
        pool.stop()


def database_url_for_subprocess() -> str:
    """A DATABASE_URL that points a child process at the test database."""
    from django.db import connection

    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{s['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"DATABASE_URL": database_url_for_subprocess(), "PYTHONUNBUFFERED": "1"})
    env.pop("HERMES_CELERY_EAGER", None)
    env.update(extra)
    return env


def start_daphne(
    port: int, log: Path, env: dict[str, str], app: str = "hermes_site.asgi:application"
) -> subprocess.Popen:
    """daphne serving the site on 127.0.0.1:`port` in a subprocess on the test database
    (`env` on top of subprocess_env), returned once its /healthz answers. `app` may be
    `hermes_site.asgi_proxy:application`, what `make serve` runs behind a proxy."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
            cwd=ROOT, env=subprocess_env(**env), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return True
        except OSError:
            assert proc.poll() is None, log.read_text()
            return False

    wait_for(up, timeout=60, interval=0.3, what="daphne")
    return proc


def stop_process(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def running_worker(
    redis_url: str, log: Path, *, queue: str = RUN_ID, pool: str = "solo", **env: str
):
    """A real `celery worker` process (solo pool, or `prefork` for one pool child) on the
    test database and `redis_url` as broker, consuming `queue`; extra environment (e.g. the
    scripted model's address) in `env`. Yields a WorkerHandle; the process and its group are
    stopped on exit."""
    argv = [
        sys.executable, "-m", "celery", "-A", "hermes_site", "worker",
        "--loglevel", "INFO", "--concurrency", "1", "--pool", pool,
        "--without-gossip", "--without-mingle", "--without-heartbeat",
        "-Q", queue, "-n", f"{queue}@%h",
    ]  # fmt: skip
    environment = subprocess_env(
        REDIS_URL=redis_url, HERMES_CELERY_EAGER="0", HERMES_CHANNEL_PREFIX=RUN_ID, **env
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: b"ready." in log.read_bytes() or proc.poll() is not None,
            timeout=60,
            what="the Celery worker to start",
        )
        assert proc.poll() is None, log.read_text()
        yield WorkerHandle(redis_url=redis_url, queue=queue, log=log, pid=proc.pid)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def celery_worker(redis_url, transactional_db, tmp_path):
    """A real worker for one test; send tasks with `celery_worker.send(name, *args)`. Its
    environment is this process's when it starts (monkeypatch.setenv before requesting it)."""
    with running_worker(redis_url, tmp_path / "worker.log") as handle:
        yield handle


@pytest.fixture(scope="module")
def scripted_worker_env() -> dict[str, str]:
    """Environment a folder's `scripted_worker` needs beyond the model (override per folder)."""
    return {}


@pytest.fixture(scope="module")
def scripted_worker(
    llm_server: ScriptedLLM,
    redis_url: str,
    scripted_worker_env: dict[str, str],
    django_db_setup: None,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[WorkerHandle]:
    """A real worker whose model is `llm_server`, started once for the test module (its
    tests must be transactional: the worker sees only committed rows)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    log = tmp_path_factory.mktemp(f"{name}-worker") / "worker.log"
    env = {
        "OPENAI_BASE_URL": llm_server.base_url,
        "OPENAI_API_KEY": "x",
        "HERMES_MODEL": "scripted",
        "HERMES_SUMMARY_MODEL": "",
        "HERMES_LLM_MAX_RETRIES": "0",
        **scripted_worker_env,
    }
    with running_worker(redis_url, log, queue=f"{RUN_ID}-{name}", **env) as handle:
        yield handle


class WorkerHandle:
    def __init__(self, *, redis_url: str, queue: str, log: Path, pid: int = 0) -> None:
        from hermes_site.settings.deployment import _celery_redis_url

        self.broker_url = _celery_redis_url(redis_url)
        self.queue = queue
        self.log = log
        #: The worker's main process (its pool children are its children).
        self.pid = pid

    def children(self) -> list[int]:
        """Pids of the worker's pool children (prefork)."""
        path = Path(f"/proc/{self.pid}/task/{self.pid}/children")
        return [int(p) for p in path.read_text().split()] if path.exists() else []

    def send(self, task_name: str, *args, **kwargs):
        """Publish a task to the worker through the real broker (never inline)."""
        with celery_app.connection_for_write(self.broker_url) as conn, warnings.catch_warnings():
            # send_task always publishes; the eager-mode warning does not apply here.
            warnings.simplefilter("ignore")
            return celery_app.send_task(
                task_name, args=args, kwargs=kwargs, connection=conn, queue=self.queue
            )
