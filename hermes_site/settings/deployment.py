"""Running it: host names and the public URL, proxy trust, Redis (channel layer and Celery),
periodic tasks, login throttling, quotas, the `serve`/`ensure_admin` commands and logs."""

from __future__ import annotations

import ipaddress
import logging
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

from .core import VAR_DIR
from .declare import (
    declare_bool,
    declare_float,
    declare_int,
    declare_list,
    declare_path,
    declare_str,
)

# --- Host names, the public URL, HTTPS ------------------------------------------------
ALLOWED_HOSTS = declare_list(
    "ALLOWED_HOSTS",
    ["127.0.0.1", "localhost", "[::1]"],
    help="Host names the site answers to (and websocket Origins it accepts).",
)
_allow_any_host = declare_bool(
    "HERMES_ALLOW_ANY_HOST",
    False,
    help="Accept ALLOWED_HOSTS='*' (only when a proxy validates host names).",
)
if "*" in ALLOWED_HOSTS and not _allow_any_host:
    # Channels' origin check reuses ALLOWED_HOSTS: '*' would accept websockets from any site.
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS='*' accepts any Host and any websocket Origin; list your hostnames "
        "(or set HERMES_ALLOW_ANY_HOST=true if a proxy validates them)."
    )
CSRF_TRUSTED_ORIGINS = declare_list(
    "CSRF_TRUSTED_ORIGINS", [], help="Extra origins (with scheme) trusted for form posts."
)


def _malformed_origin(origin: str) -> bool:
    """Not `scheme://host[:port]` or Django's `scheme://*.domain[:port]`: Django's CSRF check
    would never match it (or, for a bare `*`, nothing sensible), so it is refused at start."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return True
    host = parts.netloc.removeprefix("*.")
    return (
        parts.scheme not in ("http", "https")
        or not host
        or "*" in host
        or "@" in host
        or bool(parts.path or parts.query or parts.fragment)
    )


_bad_origins = [o for o in CSRF_TRUSTED_ORIGINS if _malformed_origin(o)]
if _bad_origins:
    raise ImproperlyConfigured(
        f"CSRF_TRUSTED_ORIGINS: {', '.join(map(repr, _bad_origins))} is not an origin; write "
        "scheme://host[:port] (e.g. https://chat.example.org) or scheme://*.domain for its "
        "subdomains (e.g. https://*.example.org)."
    )
HERMES_PUBLIC_URL = declare_str(
    "HERMES_PUBLIC_URL", "", help="The site's public URL, scheme and host only."
).rstrip("/")
HERMES_BEHIND_PROXY = declare_bool(
    "HERMES_BEHIND_PROXY", False, help="Believe X-Forwarded-Proto/-Host from the proxy."
)
# Read even when the public URL is not https, so a bad value is refused at once.
_ssl_redirect = declare_bool(
    "HERMES_SSL_REDIRECT", True, help="Redirect HTTP to HTTPS (https public URL only)."
)
_hsts_seconds = declare_int(
    "HERMES_HSTS_SECONDS", 31536000, min=0, help="HSTS max-age (https public URL only)."
)
_hsts_subdomains = declare_bool(
    "HERMES_HSTS_SUBDOMAINS", True, help="HSTS includeSubDomains (https public URL only)."
)
_hsts_preload = declare_bool(
    "HERMES_HSTS_PRELOAD", False, help="HSTS preload (https public URL only)."
)
if HERMES_PUBLIC_URL:
    _public = urlsplit(HERMES_PUBLIC_URL)
    if _public.scheme not in ("http", "https") or not _public.hostname or _public.path:
        raise ImproperlyConfigured(
            "HERMES_PUBLIC_URL must be a scheme and host, like https://chat.example.org "
            f"(got {HERMES_PUBLIC_URL!r})."
        )
    if HERMES_PUBLIC_URL not in CSRF_TRUSTED_ORIGINS:
        CSRF_TRUSTED_ORIGINS.append(HERMES_PUBLIC_URL)
    # The public host needs no second mention in ALLOWED_HOSTS (which also gates websocket
    # Origins).
    if _public.hostname not in ALLOWED_HOSTS:
        ALLOWED_HOSTS.append(_public.hostname)
    if _public.scheme == "https":
        SESSION_COOKIE_SECURE = True
        CSRF_COOKIE_SECURE = True
        SECURE_SSL_REDIRECT = _ssl_redirect
        SECURE_HSTS_SECONDS = _hsts_seconds
        SECURE_HSTS_INCLUDE_SUBDOMAINS = _hsts_subdomains
        SECURE_HSTS_PRELOAD = _hsts_preload
if HERMES_BEHIND_PROXY:
    # Only safe because the proxy overwrites these headers (see deploy/nginx).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True
# The health check stays reachable over plain HTTP for the proxy and monitoring.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
if not globals().get("SECURE_HSTS_PRELOAD"):
    # Preloading is an opt-in for a registrable domain that cannot be undone quickly
    # (HERMES_HSTS_PRELOAD=true); without it this check can only ever nag.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]

# Peers whose X-Forwarded-For/-Proto/-Host are believed (the reverse proxy); from anyone
# else those headers are dropped (core/proxy.py). Addresses or networks.
HERMES_TRUSTED_PROXIES = declare_list(
    "HERMES_TRUSTED_PROXIES",
    ["127.0.0.1", "::1"],
    help="Addresses or networks of the reverse proxy, whose X-Forwarded-* are believed.",
)
for _proxy in HERMES_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy.strip(), strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"HERMES_TRUSTED_PROXIES: {_proxy!r} is not an IP address or network "
            "(examples: 127.0.0.1, 10.0.0.0/8, ::1)."
        ) from None

# --- Redis: channel layer and Celery ------------------------------------------------
REDIS_URL = declare_str(
    "REDIS_URL", "", help="redis://, rediss:// or unix:// URL of the channel layer and broker."
)
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        "REDIS_URL must start with redis://, rediss:// or unix:// "
        f"(got {REDIS_URL.split(':')[0]}:…)."
    )
_channel_prefix = declare_str(
    "HERMES_CHANNEL_PREFIX", "hermes", help="Redis key prefix of the channel layer."
)
# group_send drops silently when a channel is full, and for channels_redis all sockets of
# one ASGI process share one Redis inbox: the capacity bounds the messages queued for the
# whole process, not one tab. 1000 dropped stream deltas with ~100 busy sockets per process.
_channel_capacity = declare_int(
    "HERMES_CHANNEL_CAPACITY",
    20000,
    min=1,
    help="Messages the channel layer queues for one ASGI process before dropping.",
)


def _celery_redis_url(url: str) -> str:
    # redis-py spells a socket unix:///path; kombu and Celery's backend spell it
    # redis+socket:///path.
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://")
    return url


#: The channel layer classes HERMES_CHANNEL_LAYER names (with Redis; see core/channel_layer.py).
CHANNEL_LAYER_BACKENDS = {
    "local-first": "core.channel_layer.LocalFirstRedisChannelLayer",
    "redis": "channels_redis.core.RedisChannelLayer",
    "redis-pubsub": "channels_redis.pubsub.RedisPubSubChannelLayer",
}
_channel_layer = declare_str(
    "HERMES_CHANNEL_LAYER",
    "local-first",
    choices=tuple(CHANNEL_LAYER_BACKENDS),
    help="How events reach sockets with Redis: local-first (core/channel_layer.py) delivers "
    "to this process's own sockets directly and through Redis to the others; redis and "
    "redis-pubsub are channels_redis' layers as they come.",
)
# redis-py 8 reads with a 5 s socket timeout by default, which is exactly how long
# channels_redis blocks in BZPOPMIN waiting for a message: every socket quiet for 5 s died
# with TimeoutError (django/channels_redis#422).
_redis_host = {"address": REDIS_URL, "socket_timeout": 30}

if REDIS_URL:
    _layer_config: dict = {"hosts": [_redis_host], "prefix": _channel_prefix}
    if _channel_layer != "redis-pubsub":
        # The queued layers; pub/sub queues nothing (groups are subscriptions of the
        # processes that have members), so it has no capacity or expiry to set.
        _layer_config.update(capacity=_channel_capacity, expiry=60, group_expiry=86400)
    CHANNEL_LAYERS = {
        "default": {"BACKEND": CHANNEL_LAYER_BACKENDS[_channel_layer], "CONFIG": _layer_config}
    }
    CELERY_BROKER_URL = _celery_redis_url(REDIS_URL)
    CELERY_RESULT_BACKEND = _celery_redis_url(REDIS_URL)
else:
    # Single-process development and unit tests: no broker, tasks run inline.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = declare_bool(
    "HERMES_CELERY_EAGER",
    not REDIS_URL,
    help="Run Celery tasks inline in the calling process.",
    default_doc="on without `REDIS_URL`",
)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = declare_int(
    "HERMES_TASK_TIME_LIMIT", 600, min=1, help="Hard time limit of a Celery task (seconds)."
)
CELERY_TASK_SOFT_TIME_LIMIT = declare_int(
    "HERMES_TASK_SOFT_TIME_LIMIT",
    540,
    min=1,
    help="Soft time limit of a Celery task (seconds).",
)
# An ASGI process runs its database work on one thread beside the event loop; after each
# statement that thread waits for the interpreter lock, which a busy event loop keeps for
# up to this long (Python's default: 5 ms). docs/capacity.md measures it under load.
HERMES_ASGI_SWITCH_INTERVAL_MS = declare_float(
    "HERMES_ASGI_SWITCH_INTERVAL_MS",
    1.0,
    min=0.1,
    max=5.0,
    help="Milliseconds an ASGI process's event loop keeps the interpreter lock from its "
    "database thread (sys.setswitchinterval).",
)
# Leases (core/leases.py): how long a holder's claim on its work lasts without a renewal,
# and how often a holder renews it. A crashed holder's work is taken over after the former.
HERMES_LEASE_SECONDS = declare_int(
    "HERMES_LEASE_SECONDS",
    30,
    min=2,
    help="Seconds a lease on a piece of work lasts without a heartbeat.",
)
HERMES_LEASE_HEARTBEAT = declare_float(
    "HERMES_LEASE_HEARTBEAT",
    10.0,
    min=0.1,
    help="Seconds between heartbeats renewing a lease (well under HERMES_LEASE_SECONDS).",
)
# How long queued background work (an export, a review, a search summary) may wait before
# the periodic `requeue` task sends its task again, in case the broker lost the message.
HERMES_REQUEUE_SECONDS = declare_int(
    "HERMES_REQUEUE_SECONDS",
    60,
    min=1,
    help="Seconds queued background work waits before its task is sent again (and how "
    "often that is checked).",
)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# A late-acknowledged task still running when the broker connection drops can no longer be
# acknowledged and is delivered again: cancel it rather than run it twice at once (tasks are
# idempotent). Celery 6's default; stating it also ends the worker's deprecation warning.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Workers log through LOGGING below (JSON on stdout) instead of Celery's own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Distinct queue names let deployments share a Redis.
CELERY_TASK_DEFAULT_QUEUE = declare_str(
    "HERMES_CELERY_QUEUE", "celery", help="The Celery queue tasks go to and workers read."
)
# Periodic housekeeping, sent by `make beat` (run exactly one beat per deployment). When an
# app gains something that expires (temporary chats, exports), give it an idempotent task
# with a time limit and add one line here; tests/deploy checks every entry is registered.
CELERY_BEAT_SCHEDULE = {
    "expire": {"task": "hermes_site.expire", "schedule": 15 * 60},
    "prune": {"task": "hermes_site.prune", "schedule": 60 * 60},
    "optimize-database": {"task": "hermes_site.optimize_database", "schedule": 24 * 60 * 60},
    "privacy-expire-exports": {"task": "accounts.exports_expire", "schedule": 30 * 60},
    "expire-temporary-chats": {"task": "sessions_app.expire_temporary_chats", "schedule": 60 * 60},
    "requeue": {"task": "hermes_site.requeue", "schedule": HERMES_REQUEUE_SECONDS},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Scheduled backups (core/backups.py): off unless an interval is set ---------------
HERMES_BACKUP_INTERVAL_HOURS = declare_float(
    "HERMES_BACKUP_INTERVAL_HOURS",
    0.0,
    min=0,
    help="Hours between the backups Celery beat makes (0: no scheduled backups).",
)
HERMES_BACKUP_DIR = declare_path(
    "HERMES_BACKUP_DIR",
    VAR_DIR / "backups",
    help="Folder of the scheduled backups (keep it on another disk, or copy it off).",
    default_doc="`var/backups/`",
)
HERMES_BACKUP_KEEP = declare_int(
    "HERMES_BACKUP_KEEP", 7, min=1, help="Scheduled backups kept; older ones are deleted."
)
if HERMES_BACKUP_INTERVAL_HOURS:
    CELERY_BEAT_SCHEDULE["backup"] = {
        "task": "hermes_site.backup",
        "schedule": HERMES_BACKUP_INTERVAL_HOURS * 60 * 60,
    }

# --- Login lockout and quotas ---------------------------------------------------------
# This many attempts per window and per client address / per username, then refusals (429)
# until the lockout ends.
HERMES_LOGIN_MAX_PER_USER = declare_int(
    "HERMES_LOGIN_MAX_PER_USER", 5, min=0, help="Login attempts per window per username (0: off)."
)
HERMES_LOGIN_MAX_PER_IP = declare_int(
    "HERMES_LOGIN_MAX_PER_IP", 20, min=0, help="Login attempts per window per address (0: off)."
)
HERMES_LOGIN_WINDOW_SECONDS = declare_int(
    "HERMES_LOGIN_WINDOW_SECONDS", 900, min=1, help="Window login attempts are counted in."
)
HERMES_LOGIN_LOCKOUT_SECONDS = declare_int(
    "HERMES_LOGIN_LOCKOUT_SECONDS", 900, min=1, help="How long a login lockout lasts."
)
# Team defaults; admins override them per person on the team page.
HERMES_DAILY_MESSAGE_LIMIT = declare_int(
    "HERMES_DAILY_MESSAGE_LIMIT", 0, min=0, help="Messages a person may send per day (0: no limit)."
)
HERMES_DAILY_TOKEN_LIMIT = declare_int(
    "HERMES_DAILY_TOKEN_LIMIT",
    0,
    min=0,
    help="Tokens a person's answers may use per day (0: no limit).",
)

# --- E-mail: invitations, password resets, export-ready notices (accounts/mail.py) ----
EMAIL_URL = declare_str(
    "EMAIL_URL",
    "",
    help="The mail server, e.g. smtp+tls://user:password@host:587 (empty: no mail is sent).",
)


def email_settings(url: str) -> dict[str, object]:
    """Django's EMAIL_* settings for `url` (django-environ's parsing); without one, the
    console backend (nothing leaves the machine and the pages show the links)."""
    if not url:
        return {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
    try:
        return environ.Env.email_url_config(url)
    except (ImproperlyConfigured, ValueError):
        raise ImproperlyConfigured(
            "EMAIL_URL must look like smtp://host:25, smtp+tls://user:password@host:587 or "
            f"smtp+ssl://user:password@host:465 (got {url.split(':')[0]}:…)."
        ) from None


_email = email_settings(EMAIL_URL)
EMAIL_BACKEND = _email["EMAIL_BACKEND"]
EMAIL_HOST = _email.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _email.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _email.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _email.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = bool(_email.get("EMAIL_USE_TLS"))
EMAIL_USE_SSL = bool(_email.get("EMAIL_USE_SSL"))
EMAIL_TIMEOUT = declare_int(
    "HERMES_EMAIL_TIMEOUT", 10, min=1, help="Seconds to wait for the mail server."
)
DEFAULT_FROM_EMAIL = declare_str(
    "DEFAULT_FROM_EMAIL", "Hermes <hermes@localhost>", help="The sender of the site's mail."
)
SERVER_EMAIL = DEFAULT_FROM_EMAIL

# --- `manage.py serve` and `ensure_admin` ---------------------------------------------
HERMES_HOST = declare_str("HERMES_HOST", "127.0.0.1", help="Address `make run`/`make serve` bind.")
HERMES_PORT = declare_int(
    "HERMES_PORT", 8000, min=1, max=65535, help="Port `make run`/`make serve` listen on."
)
HERMES_WORKERS = declare_int(
    "HERMES_WORKERS", 2, min=1, help="Concurrency of the Celery worker `make run` starts."
)
# One scheduler per deployment: `make run` embeds it next to its own Valkey; with REDIS_URL
# (a shared Redis, where a deployment runs `make beat`) only when asked.
HERMES_EMBEDDED_BEAT = declare_bool(
    "HERMES_EMBEDDED_BEAT",
    not REDIS_URL,
    help="Run the periodic-task scheduler inside the worker `make run` starts.",
    default_doc="on without `REDIS_URL`",
)
HERMES_RESTART_DELAY = declare_float(
    "HERMES_RESTART_DELAY",
    1.0,
    min=0.05,
    help="Seconds `make run` waits before restarting a process that died (doubled per crash).",
)
HERMES_RESTART_DELAY_MAX = declare_float(
    "HERMES_RESTART_DELAY_MAX", 30.0, min=0.05, help="Longest wait before a restart (seconds)."
)
HERMES_RESTART_RESET_SECONDS = declare_float(
    "HERMES_RESTART_RESET_SECONDS",
    60.0,
    min=0,
    help="A process that ran this long before dying is restarted after the first delay again.",
)
HERMES_ADMIN_USER = declare_str(
    "HERMES_ADMIN_USER", "admin", help="User name of the first administrator."
)
HERMES_ADMIN_PASSWORD = declare_str(
    "HERMES_ADMIN_PASSWORD",
    "",
    help="Password of the first administrator (empty: generated and printed once).",
    default_doc="generated",
)

# --- Logs: stdout, one JSON object per line behind a proxy (see core/logs.py) ----
LOG_FORMAT = declare_str(
    "LOG_FORMAT",
    "json" if HERMES_BEHIND_PROXY else "plain",
    choices=("json", "plain"),
    help="Log lines as JSON objects or plain text.",
    default_doc="`json` behind a proxy, else `plain`",
)
_log_level = declare_str(
    "LOG_LEVEL",
    "INFO",
    choices=tuple(logging.getLevelNamesMapping()),
    help="Level of the root logger.",
)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logs.ContextFilter"}},
    "formatters": {
        "json": {"()": "core.logs.JsonFormatter"},
        "plain": {"()": "core.logs.PlainFormatter"},
    },
    "handlers": {
        "stdout": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["stdout"], "level": _log_level},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # core.logs writes one access line per request; django.request would add a second
        # ("Not Found: /x") for every 4xx. Its 5xx errors (with the traceback) stay.
        "django.request": {"level": "ERROR"},
        # Daphne's INFO lines repeat the address `serve` prints or are about optional extras
        # (HTTP/2); its warnings and errors stay.
        "daphne": {"level": "WARNING"},
        # The openai client's HTTP library logs every model call at INFO; failures reach our
        # own log through the model client's error mapping.
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # The MCP SDK logs every JSON-RPC message at INFO; mcp_server writes the access line.
        "mcp": {"level": "WARNING"},
    },
}
