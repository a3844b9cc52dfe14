"""A whole team deployment on loopback ports, for the integration test and the load
benchmark: PostgreSQL (a fresh database), Redis (a unique channel prefix and queue),
N ASGI processes started with `make serve`, one Celery worker started with `make worker`,
nginx in the foreground with the site rendered from deploy/nginx (TLS with a certificate
made now), and the scripted model in its own process.

Everything runs in its own process group and is stopped (and checked gone) on exit.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, free_port
from tests.support.processes import descendants

sys.path.insert(0, str(ROOT / "deploy"))
from render_nginx import render  # noqa: E402

HOST = "hermes.test"
POSTGRES_ADMIN_URL = os.environ.get("STACK_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("STACK_REDIS_URL", "redis://127.0.0.1:6379/0")
STAMP = ".venv/.installed-requirements"  # `make -o` it: never reinstall during a test


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def missing_prerequisites() -> str:
    """Why the stack cannot run here, or '' when it can."""
    if shutil.which("nginx") is None:
        return "nginx is not installed (apt-get install nginx)"
    if shutil.which("openssl") is None:
        return "openssl is not installed"
    if not _reachable("127.0.0.1", 5432):
        return "PostgreSQL is not running on 127.0.0.1:5432"
    if not _reachable("127.0.0.1", 6379):
        return "Redis is not running on 127.0.0.1:6379"
    return ""


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def pids(self) -> list[int]:
        """This process and its descendants (make → daphne, celery → pool children)."""
        return [self.popen.pid, *sorted(descendants(self.popen.pid))]


def process_group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


@dataclass
class Stack:
    tmp: Path
    nginx_port: int
    asgi_ports: list[int]
    env: dict[str, str]
    database: str
    cert: Path
    procs: dict[str, Proc] = field(default_factory=dict)

    @property
    def origin(self) -> str:
        return f"https://{HOST}:{self.nginx_port}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))

    def asgi(self) -> list[Proc]:
        return [p for name, p in self.procs.items() if name.startswith("asgi")]

    def start(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> Proc:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env or self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(name, popen, log)
        self.procs[name] = proc
        return proc

    def manage(self, *args: str, timeout: float = 120) -> str:
        """Run a management command against the stack's database; returns its stdout."""
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env={**self.env, "LOG_FORMAT": "plain"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"manage.py {args[0]} failed:\n{result.stdout}{result.stderr}")
        return result.stdout

    def stop(self) -> list[int]:
        """Stop everything; returns the pids of anything that outlived it (should be [])."""
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                with _suppress_lookup():
                    os.killpg(proc.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in self.procs.values():
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with _suppress_lookup():
                    os.killpg(proc.popen.pid, signal.SIGKILL)
                proc.popen.wait()
        # Grandchildren (daphne under make, the worker's pool) share the group: wait for
        # them too, then kill whatever is still there.
        leftovers: list[int] = []
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            while process_group_members(proc.popen.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            members = process_group_members(proc.popen.pid)
            if members:
                leftovers.extend(members)
                with _suppress_lookup():
                    os.killpg(proc.popen.pid, signal.SIGKILL)
        return leftovers


@contextmanager
def _suppress_lookup() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass


def _wait(predicate, *, timeout: float, what: str, procs: list[Proc]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for proc in procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(f"{proc.name} exited early:\n{proc.text()[-3000:]}")
        time.sleep(0.1)
    logs = "\n".join(f"--- {p.name}\n{p.text()[-2000:]}" for p in procs)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}\n{logs}")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _psql(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{POSTGRES_ADMIN_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _redis_forget(run: str) -> None:
    """Delete the run's channel-layer keys and Celery queue (they share the run's name)."""
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=10)
        for pattern in (f"{run}*", f"_kombu.binding.{run}", f"_kombu.binding_permanent.{run}"):
            for key in client.scan_iter(match=pattern, count=1000):
                client.delete(key)
        client.close()
    except redis.RedisError as exc:
        print(f"could not clean Redis keys of {run}: {exc}", file=sys.stderr)


def make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", f"/CN={HOST}",
            "-addext", f"subjectAltName=DNS:{HOST}", "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def nginx_conf(tmp: Path, site: str, *, workers: str = "1") -> Path:
    (tmp / "site.conf").write_text(site)
    temp = tmp / "nginx-temp"
    temp.mkdir(exist_ok=True)
    conf = tmp / "nginx.conf"
    # Started as root (CI containers), nginx would hand its workers to `nobody`, who
    # cannot enter the private temp dir; keep them as the invoking user instead.
    user = "user root;\n" if os.geteuid() == 0 else ""
    conf.write_text(
        f"""daemon off;
{user}worker_processes {workers};
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    include {tmp}/site.conf;
}}
"""
    )
    return conf


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(f"terminated by signal {signum}")


@contextmanager
def running_stack(
    tmp: Path,
    *,
    model_reply: str,
    model_latency: float = 0.0,
    model_chunk_delay: float = 0.02,
    asgi_processes: int = 2,
    nginx_workers: str = "1",
    extra_env: dict[str, str] | None = None,
    database_url: str | None = None,
) -> Iterator[Stack]:
    """Start the stack; yields it once nginx answers and every process is ready.

    Without `database_url` a fresh PostgreSQL database is created, migrated and dropped
    afterwards; with it (already migrated) that one is used and left alone.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    run = f"stack{os.getpid()}{secrets.token_hex(2)}"
    database = f"hermes_{os.environ.get('HERMES_TEST_DB_SUFFIX', '')}_{run}".lower()
    own_database = database_url is None
    cert, key = make_certificate(tmp)
    nginx_port = free_port()
    asgi_ports = [free_port() for _ in range(asgi_processes)]
    model_port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HERMES_", "OPENAI_", "DJANGO_", "CELERY_"))
        and k not in ("DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")
    }
    env.update(
        {
            "DATABASE_URL": database_url or f"{POSTGRES_ADMIN_URL}/{database}",
            "REDIS_URL": REDIS_URL,
            "HERMES_CHANNEL_PREFIX": run,
            "HERMES_CELERY_QUEUE": run,
            "HERMES_PUBLIC_URL": f"https://{HOST}:{nginx_port}",
            "HERMES_BEHIND_PROXY": "true",
            "HERMES_TRUSTED_PROXIES": "127.0.0.1",
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECRET_KEY": secrets.token_urlsafe(64),
            "HERMES_VAR_DIR": str(tmp / "var"),
            "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "OPENAI_API_KEY": "stack",
            "HERMES_MODEL": "scripted",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
    )
    stack = Stack(tmp, nginx_port, asgi_ports, env, database, cert)
    # A SIGTERM (a CI timeout, `kill`) must still run the cleanup below.
    previous_handler = None
    if threading.current_thread() is threading.main_thread():
        previous_handler = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if own_database:
        _psql(f'CREATE DATABASE "{database}"')
    try:
        # Everything that does not need the schema starts while it is being migrated.
        migrate = stack.start(
            "migrate",
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"]
            if own_database
            else ["true"],
            env={**env, "PGOPTIONS": "-c synchronous_commit=off"},
        )
        stack.start(
            "model",
            [
                sys.executable, "-m", "devtools.scripted_llm", "--port", str(model_port),
                "--reply", model_reply, "--latency", str(model_latency),
                "--chunk-delay", str(model_chunk_delay),
            ],
        )  # fmt: skip
        for i, port in enumerate(asgi_ports):
            stack.start(
                f"asgi{i}",
                ["make", "-s", "-o", STAMP, "serve"],
                env={**env, "HERMES_HOST": "127.0.0.1", "HERMES_PORT": str(port)},
            )
        stack.start("worker", ["make", "-s", "-o", STAMP, "worker"])
        site = render(
            server_name=HOST,
            upstreams=[f"127.0.0.1:{p}" for p in asgi_ports],
            ssl_certificate=str(cert),
            ssl_certificate_key=str(key),
            https_listen=f"127.0.0.1:{nginx_port}",
            http_listen=f"127.0.0.1:{free_port()}",
            log_dir=str(tmp),
        )
        conf = nginx_conf(tmp, site, workers=nginx_workers)
        stack.start(
            "nginx", ["nginx", "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "nginx-error.log")]
        )
        _wait(lambda: migrate.popen.poll() is not None, timeout=120, what="migrate", procs=[])
        if migrate.popen.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{migrate.text()}")
        del stack.procs["migrate"]
        watched = list(stack.procs.values())
        for port in asgi_ports:
            _wait(
                lambda port=port: _http_ok(f"http://127.0.0.1:{port}/healthz"),
                timeout=90,
                what=f"the ASGI process on {port}",
                procs=watched,
            )
        _wait(
            lambda: "ready." in stack.procs["worker"].text(),
            timeout=90,
            what="the Celery worker",
            procs=watched,
        )
        _wait(
            lambda: _http_ok(f"http://127.0.0.1:{model_port}/v1/models"),
            timeout=30,
            what="the scripted model",
            procs=watched,
        )
        _wait(lambda: _reachable("127.0.0.1", nginx_port), timeout=15, what="nginx", procs=watched)
        yield stack
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)
        leftovers = stack.stop()
        stack.leftovers = leftovers
        _redis_forget(run)
        if own_database:
            try:
                _psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            except Exception as exc:  # noqa: BLE001 — cleanup must not hide the test's error
                print(f"could not drop {database}: {exc}", file=sys.stderr)
