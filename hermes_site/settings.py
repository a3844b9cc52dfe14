"""Settings for Hermes Web, read from the environment (and an optional `.env`).

Safe by default: DEBUG is off, ALLOWED_HOSTS lists loopback only, and a secret key is
generated once into `var/` when none is given. Every setting a deployment may change is
listed in the README's configuration table.
"""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("HERMES_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)


def _generated_secret_key() -> str:
    """Return the key stored in var/secret_key, creating it (mode 0600) on first use."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        key = secrets.token_urlsafe(64)
        # O_EXCL: two processes starting at once must not both write a key.
        try:
            fd = path.open("x", encoding="ascii")
        except FileExistsError:
            pass
        else:
            with fd:
                path.chmod(0o600)
                fd.write(key)
    return path.read_text(encoding="ascii").strip()


SECRET_KEY = env.str("SECRET_KEY", default="") or _generated_secret_key()
DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
if "*" in ALLOWED_HOSTS and not env.bool("HERMES_ALLOW_ANY_HOST", default=False):
    # Channels' origin check reuses ALLOWED_HOSTS: '*' would accept websockets from any site.
    raise ImproperlyConfigured(
        "ALLOWED_HOSTS='*' accepts any Host and any websocket Origin; list your hostnames "
        "(or set HERMES_ALLOW_ANY_HOST=true if a proxy validates them)."
    )
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "channels",
    "core",
    "accounts",
    "sessions_app",
    "memory",
    "skills_app",
    "privacy",
    "usage",
]

MIDDLEWARE = [
    # First, so every log line of the request (and its response) carries the request id.
    "core.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.LoginThrottleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    "core.middleware.ServiceErrorMiddleware",
]

ROOT_URLCONF = "hermes_site.urls"
ASGI_APPLICATION = "hermes_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.hermes",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
try:
    _db = env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
except (ImproperlyConfigured, ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
_SUPPORTED_ENGINES = ("django.db.backends.sqlite3", "django.db.backends.postgresql")
if _db.get("ENGINE") not in _SUPPORTED_ENGINES:
    raise ImproperlyConfigured(
        "DATABASE_URL must be sqlite:///path or postgres://user:password@host:port/name "
        f"(got a {env.str('DATABASE_URL').split(':')[0]}: URL)."
    )
# Lets two test runs share a machine without sharing a test database.
_TEST_DB_SUFFIX = env.str("HERMES_TEST_DB_SUFFIX", default="")
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db_name = Path(_db["NAME"])
    if not _db_name.is_absolute():
        _db_name = (BASE_DIR / _db_name).resolve()
    _db["NAME"] = str(_db_name)
    _db["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so concurrent writers wait for the busy
        # timeout instead of failing with "database is locked" on lock upgrade.
        "timeout": env.float("HERMES_SQLITE_TIMEOUT", default=20.0),
        "transaction_mode": env.str("HERMES_SQLITE_TRANSACTION_MODE", default="IMMEDIATE"),
        "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
        "PRAGMA secure_delete=ON;",
    }
    # A file, not :memory:, so tests see real locking and other processes can share it.
    _db["TEST"] = {"NAME": str(_db_name.with_name(f"test{_TEST_DB_SUFFIX}_{_db_name.name}"))}
    # Opening a SQLite connection costs its PRAGMAs; keep one per thread.
    _db["CONN_MAX_AGE"] = None
    _db["CONN_HEALTH_CHECKS"] = True
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db["TEST"] = {"NAME": f"test{_TEST_DB_SUFFIX}_{_db['NAME']}"}
    _db["CONN_MAX_AGE"] = env.int("HERMES_DB_CONN_MAX_AGE", default=60)
    _db["CONN_HEALTH_CHECKS"] = True
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer and Celery ------------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        "REDIS_URL must start with redis://, rediss:// or unix:// "
        f"(got {REDIS_URL.split(':')[0]}:…)."
    )


def _celery_redis_url(url: str) -> str:
    # redis-py spells a socket unix:///path; kombu and Celery's backend spell it
    # redis+socket:///path.
    if url.startswith("unix://"):
        return "redis+socket://" + url.removeprefix("unix://")
    return url


if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, which is exactly
                # how long channels_redis blocks in BZPOPMIN waiting for a message: every
                # socket quiet for 5 s died with TimeoutError (django/channels_redis#422).
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                "prefix": env.str("HERMES_CHANNEL_PREFIX", default="hermes"),
                # group_send drops silently when a channel is full, and for channels_redis
                # all sockets of one ASGI process share one Redis inbox: the capacity
                # bounds the messages queued for the whole process, not one tab. 1000
                # dropped stream deltas with ~100 busy sockets per process.
                "capacity": env.int("HERMES_CHANNEL_CAPACITY", default=20000),
                "expiry": 60,
                "group_expiry": 86400,
            },
        }
    }
    CELERY_BROKER_URL = _celery_redis_url(REDIS_URL)
    CELERY_RESULT_BACKEND = _celery_redis_url(REDIS_URL)
else:
    # Single-process development and unit tests: no broker, tasks run inline.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CELERY_BROKER_URL = "memory://"
    CELERY_RESULT_BACKEND = "cache+memory://"
CELERY_TASK_ALWAYS_EAGER = env.bool("HERMES_CELERY_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("HERMES_TASK_TIME_LIMIT", default=600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("HERMES_TASK_SOFT_TIME_LIMIT", default=540)
CELERY_RESULT_EXPIRES = 3600
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Workers log through LOGGING below (JSON on stdout) instead of Celery's own handlers.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The queue tasks go to and workers read; distinct names let deployments share a Redis.
CELERY_TASK_DEFAULT_QUEUE = env.str("HERMES_CELERY_QUEUE", default="celery")
# Periodic housekeeping, sent by `make beat` (run exactly one beat per deployment). When an
# app gains something that expires (temporary chats, exports), give it an idempotent task
# with a time limit and add one line here; tests/deploy checks every entry is registered.
CELERY_BEAT_SCHEDULE = {
    "expire": {"task": "hermes_site.expire", "schedule": 15 * 60},
    "prune": {"task": "hermes_site.prune", "schedule": 60 * 60},
    "optimize-database": {"task": "hermes_site.optimize_database", "schedule": 24 * 60 * 60},
    "privacy-expire-exports": {"task": "accounts.exports_expire", "schedule": 30 * 60},
    "expire-temporary-chats": {"task": "sessions_app.expire_temporary_chats", "schedule": 60 * 60},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Memory audit events older than this many days are deleted by `prune` (0: keep forever).
HERMES_AUDIT_RETENTION_DAYS = env.int("HERMES_AUDIT_RETENTION_DAYS", default=365)

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# ModelBackend behind the login throttle (accounts/throttle.py).
AUTHENTICATION_BACKENDS = ["accounts.backends.ThrottledModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
HERMES_ALLOW_SIGNUP = env.bool("HERMES_ALLOW_SIGNUP", default=False)

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

HERMES_PUBLIC_URL = env.str("HERMES_PUBLIC_URL", default="").rstrip("/")
HERMES_BEHIND_PROXY = env.bool("HERMES_BEHIND_PROXY", default=False)
if HERMES_PUBLIC_URL:
    _origin = HERMES_PUBLIC_URL
    if _origin not in CSRF_TRUSTED_ORIGINS:
        CSRF_TRUSTED_ORIGINS.append(_origin)
    if _origin.startswith("https://"):
        SESSION_COOKIE_SECURE = True
        CSRF_COOKIE_SECURE = True
        SECURE_SSL_REDIRECT = env.bool("HERMES_SSL_REDIRECT", default=True)
        SECURE_HSTS_SECONDS = env.int("HERMES_HSTS_SECONDS", default=31536000)
        SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("HERMES_HSTS_SUBDOMAINS", default=True)
        SECURE_HSTS_PRELOAD = env.bool("HERMES_HSTS_PRELOAD", default=False)
if HERMES_BEHIND_PROXY:
    # Only safe because the proxy overwrites these headers (see deploy/nginx).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    USE_X_FORWARDED_HOST = True

# --- Team deployment: proxy trust, login throttling, quotas ----------------------------
if HERMES_PUBLIC_URL:
    _public = urlsplit(HERMES_PUBLIC_URL)
    if _public.scheme not in ("http", "https") or not _public.hostname or _public.path:
        raise ImproperlyConfigured(
            "HERMES_PUBLIC_URL must be a scheme and host, like https://chat.example.org "
            f"(got {HERMES_PUBLIC_URL!r})."
        )
    # The public host needs no second mention in ALLOWED_HOSTS (which also gates websocket
    # Origins).
    if _public.hostname not in ALLOWED_HOSTS:
        ALLOWED_HOSTS.append(_public.hostname)
# Peers whose X-Forwarded-For/-Proto/-Host are believed (the reverse proxy); from anyone
# else those headers are dropped (core/proxy.py). Addresses or networks.
HERMES_TRUSTED_PROXIES = env.list("HERMES_TRUSTED_PROXIES", default=["127.0.0.1", "::1"])
for _proxy in HERMES_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy.strip(), strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"HERMES_TRUSTED_PROXIES: {_proxy!r} is not an IP address or network "
            "(examples: 127.0.0.1, 10.0.0.0/8, ::1)."
        ) from None
# The health check stays reachable over plain HTTP for the proxy and monitoring.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
if not globals().get("SECURE_HSTS_PRELOAD"):
    # Preloading is an opt-in for a registrable domain that cannot be undone quickly
    # (HERMES_HSTS_PRELOAD=true); without it this check can only ever nag.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
# Login lockout: this many attempts per window and per client address / per username,
# then refusals (429) until the lockout ends. 0 turns a limit off.
HERMES_LOGIN_MAX_PER_USER = env.int("HERMES_LOGIN_MAX_PER_USER", default=5)
HERMES_LOGIN_MAX_PER_IP = env.int("HERMES_LOGIN_MAX_PER_IP", default=20)
HERMES_LOGIN_WINDOW_SECONDS = env.int("HERMES_LOGIN_WINDOW_SECONDS", default=900)
HERMES_LOGIN_LOCKOUT_SECONDS = env.int("HERMES_LOGIN_LOCKOUT_SECONDS", default=900)
# Team defaults of the per-person daily quotas (0: no limit); admins override them per
# person on the team page.
HERMES_DAILY_MESSAGE_LIMIT = env.int("HERMES_DAILY_MESSAGE_LIMIT", default=0)
HERMES_DAILY_TOKEN_LIMIT = env.int("HERMES_DAILY_TOKEN_LIMIT", default=0)
for _name in ("HERMES_LOGIN_MAX_PER_USER", "HERMES_LOGIN_MAX_PER_IP",
              "HERMES_DAILY_MESSAGE_LIMIT", "HERMES_DAILY_TOKEN_LIMIT"):  # fmt: skip
    if globals()[_name] < 0:
        raise ImproperlyConfigured(f"{_name} must be 0 or more (got {globals()[_name]}).")
for _name in ("HERMES_LOGIN_WINDOW_SECONDS", "HERMES_LOGIN_LOCKOUT_SECONDS"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1 (got {globals()[_name]}).")

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: its WWW-Authenticate header makes unauthenticated requests 401s.
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    # REMOTE_ADDR is already the real client (core/proxy.py); never let a throttle
    # key on the client-controlled X-Forwarded-For.
    "NUM_PROXIES": 0,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Hermes Web API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Schema-generation warnings are about API docs, not deployment safety; keep them out
    # of `check --deploy` (they show in `manage.py spectacular --validate`).
    "ENABLE_DJANGO_DEPLOY_CHECK": False,
}

# --- LLM ------------------------------------------------------------------------------
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
HERMES_MODEL = env.str("HERMES_MODEL", default="")
HERMES_SUMMARY_MODEL = env.str("HERMES_SUMMARY_MODEL", default="")
HERMES_CONTEXT_LENGTH = env.int("HERMES_CONTEXT_LENGTH", default=128000)
# Per-model context windows: {"gpt-4o": 128000, "llama3": 8192}; the longest key contained
# in the model name wins.
HERMES_CONTEXT_OVERRIDES = env.json("HERMES_CONTEXT_OVERRIDES", default={})
# Compress when the next prompt would pass this share of (context − reply budget).
HERMES_COMPRESSION_THRESHOLD = env.float("HERMES_COMPRESSION_THRESHOLD", default=0.75)
HERMES_COMPRESSION_TAIL_RATIO = env.float("HERMES_COMPRESSION_TAIL_RATIO", default=0.2)
HERMES_COMPRESSION_COOLDOWN = env.int("HERMES_COMPRESSION_COOLDOWN", default=120)
HERMES_COMPRESSION_TASK_LIMIT = env.int("HERMES_COMPRESSION_TASK_LIMIT", default=600)
# How long a message sent during compression waits for it (seconds).
HERMES_COMPRESSION_WAIT = env.int("HERMES_COMPRESSION_WAIT", default=180)
HERMES_LLM_CONNECT_TIMEOUT = env.float("HERMES_LLM_CONNECT_TIMEOUT", default=5.0)
HERMES_LLM_READ_TIMEOUT = env.float("HERMES_LLM_READ_TIMEOUT", default=30.0)
HERMES_LLM_MAX_RETRIES = env.int("HERMES_LLM_MAX_RETRIES", default=2)

# --- Chat turns -----------------------------------------------------------------------
# The agent's default identity; a user can replace it on the Account page.
HERMES_IDENTITY = env.str(
    "HERMES_IDENTITY",
    default="You are Hermes, a helpful assistant for a team, working in Hermes Web. You are "
    "direct and accurate, you say when you are unsure, and you keep a memory of each person "
    "you work with.",
)
HERMES_MAX_MESSAGE_CHARS = env.int("HERMES_MAX_MESSAGE_CHARS", default=32000)
HERMES_WS_MAX_MESSAGE_BYTES = env.int("HERMES_WS_MAX_MESSAGE_BYTES", default=262144)
# Temporary chats are deleted this many days after they start.
HERMES_TEMPORARY_CHAT_DAYS = env.int("HERMES_TEMPORARY_CHAT_DAYS", default=7)
HERMES_MAX_TOOL_ITERATIONS = env.int("HERMES_MAX_TOOL_ITERATIONS", default=12)
HERMES_TURN_STALE_SECONDS = env.int("HERMES_TURN_STALE_SECONDS", default=900)
# How often a streaming answer is written to the database (seconds).
HERMES_STREAM_SAVE_INTERVAL = env.float("HERMES_STREAM_SAVE_INTERVAL", default=1.0)
# Deltas arriving within this window are sent to the browser as one event.
HERMES_STREAM_COALESCE_MS = env.int("HERMES_STREAM_COALESCE_MS", default=100)
HERMES_REPLY_MAX_TOKENS = env.int("HERMES_REPLY_MAX_TOKENS", default=4096)
# External memory provider (at most one beside the built-in memory), by name.
HERMES_MEMORY_PROVIDER = env.str("HERMES_MEMORY_PROVIDER", default="")
HERMES_PROVIDER_PREFETCH_TIMEOUT = env.float("HERMES_PROVIDER_PREFETCH_TIMEOUT", default=8.0)
# More providers by name, {"name": "module:Class"}, beside installed packages' entry points
# (group "hermes_web.memory_providers") and the built-in "local" (memory/providers/local.py).
HERMES_MEMORY_PROVIDERS = env.json("HERMES_MEMORY_PROVIDERS", default={})
if not isinstance(HERMES_MEMORY_PROVIDERS, dict) or not all(
    isinstance(v, str) and ":" in v for v in HERMES_MEMORY_PROVIDERS.values()
):
    raise ImproperlyConfigured(
        'HERMES_MEMORY_PROVIDERS must be a JSON object like {"name": "package.module:Class"}.'
    )
# USD per million tokens, per model: {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}
HERMES_MODEL_PRICES = env.json("HERMES_MODEL_PRICES", default={})

# --- Inferences: the local provider's user model (HERMES_MEMORY_PROVIDER=local) ----------
# Inference for people who have not chosen on the Inferences page (false: opt-in).
HERMES_INFERENCE_DEFAULT_ENABLED = env.bool("HERMES_INFERENCE_DEFAULT_ENABLED", default=True)
# Conversation text sent to the summary model per extraction, in characters.
HERMES_INFERENCE_TRANSCRIPT_CHARS = env.int("HERMES_INFERENCE_TRANSCRIPT_CHARS", default=12000)
# Celery time limit of one extraction or recall task (s).
HERMES_INFERENCE_TASK_LIMIT = env.int("HERMES_INFERENCE_TASK_LIMIT", default=180)
for _name in ("HERMES_INFERENCE_TRANSCRIPT_CHARS", "HERMES_INFERENCE_TASK_LIMIT"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1 (got {globals()[_name]}).")

# --- Memory ---------------------------------------------------------------------------
HERMES_MEMORY_CHAR_LIMIT = env.int("HERMES_MEMORY_CHAR_LIMIT", default=2200)
HERMES_USER_CHAR_LIMIT = env.int("HERMES_USER_CHAR_LIMIT", default=1375)

# --- Privacy: exports, imports, erasure, admin content access (hermes_site/privacy) ------
# Superusers manage accounts and see counts; reading other people's content in the admin is
# off unless this is on, and then every such view is written to the audit log.
HERMES_ADMIN_CONTENT_ACCESS = env.bool("HERMES_ADMIN_CONTENT_ACCESS", default=False)
# "Download my data" archives are written here and deleted this many hours after they are
# ready (the periodic `privacy-expire-exports` task).
HERMES_EXPORT_DIR = Path(env.str("HERMES_EXPORT_DIR", default=str(VAR_DIR / "exports"))).resolve()
HERMES_EXPORT_EXPIRY_HOURS = env.int("HERMES_EXPORT_EXPIRY_HOURS", default=24)
# GET /api/me/export/ answers with the zip itself up to this many messages; larger accounts
# get a 202 and an export job to poll.
HERMES_EXPORT_SYNC_MAX_MESSAGES = env.int("HERMES_EXPORT_SYNC_MAX_MESSAGES", default=5000)
HERMES_EXPORT_TASK_LIMIT = env.int("HERMES_EXPORT_TASK_LIMIT", default=1800)
# Largest Hermes home (zip) the Account page accepts for import, in MiB.
HERMES_IMPORT_MAX_MB = env.int("HERMES_IMPORT_MAX_MB", default=200)
for _name in ("HERMES_EXPORT_EXPIRY_HOURS", "HERMES_EXPORT_TASK_LIMIT", "HERMES_IMPORT_MAX_MB"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1 (got {globals()[_name]}).")

# --- L2 search (session_search, /sessions/, /api/search/) ------------------------------
# Summaries the search waits for at once (clamped to 1..5) and for how long in total (s);
# past the timeout the results fall back to snippets.
HERMES_SEARCH_SUMMARY_CONCURRENCY = min(
    5, max(1, env.int("HERMES_SEARCH_SUMMARY_CONCURRENCY", default=3))
)
HERMES_SEARCH_SUMMARY_TIMEOUT = env.float("HERMES_SEARCH_SUMMARY_TIMEOUT", default=60.0)
HERMES_SEARCH_SUMMARY_MAX_TOKENS = env.int("HERMES_SEARCH_SUMMARY_MAX_TOKENS", default=4000)
# Transcript window sent to the summary model, in characters.
HERMES_SEARCH_TRANSCRIPT_CHARS = env.int("HERMES_SEARCH_TRANSCRIPT_CHARS", default=100_000)
# Celery time limit of one summary task (s); an older claim counts as abandoned.
HERMES_SEARCH_SUMMARY_TASK_LIMIT = env.int("HERMES_SEARCH_SUMMARY_TASK_LIMIT", default=300)
for _name in ("HERMES_SEARCH_SUMMARY_TIMEOUT", "HERMES_SEARCH_SUMMARY_MAX_TOKENS",
              "HERMES_SEARCH_TRANSCRIPT_CHARS", "HERMES_SEARCH_SUMMARY_TASK_LIMIT"):  # fmt: skip
    if globals()[_name] <= 0:
        raise ImproperlyConfigured(f"{_name} must be positive (got {globals()[_name]}).")

# --- Skills and background review -----------------------------------------------------
HERMES_REVIEW_ENABLED = env.bool("HERMES_REVIEW_ENABLED", default=True)
# A skill review after a turn that brings tool-loop iterations since the last one to this.
HERMES_SKILL_REVIEW_ITERATIONS = env.int("HERMES_SKILL_REVIEW_ITERATIONS", default=10)
# A memory review every this many user turns.
HERMES_MEMORY_REVIEW_TURNS = env.int("HERMES_MEMORY_REVIEW_TURNS", default=10)
HERMES_REVIEW_MAX_ITERATIONS = env.int("HERMES_REVIEW_MAX_ITERATIONS", default=16)
HERMES_REVIEW_TIME_LIMIT = env.int("HERMES_REVIEW_TIME_LIMIT", default=300)
_review_limits = {
    "HERMES_SKILL_REVIEW_ITERATIONS": HERMES_SKILL_REVIEW_ITERATIONS,
    "HERMES_MEMORY_REVIEW_TURNS": HERMES_MEMORY_REVIEW_TURNS,
    "HERMES_REVIEW_MAX_ITERATIONS": HERMES_REVIEW_MAX_ITERATIONS,
    "HERMES_REVIEW_TIME_LIMIT": HERMES_REVIEW_TIME_LIMIT,
}
for _name, _value in _review_limits.items():
    if _value < 1:
        raise ImproperlyConfigured(f"{_name} must be at least 1 (got {_value}).")

# --- Static files, i18n ---------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
# Hashed, compressed names once `collectstatic` has run (make run does); before that
# (tests, a fresh checkout) files are served unhashed straight from the app folders.
_COLLECTED = (STATIC_ROOT / "staticfiles.json").exists()
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if _COLLECTED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not _COLLECTED
LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

# --- Logs: stdout, one JSON object per line behind a proxy (see core/logs.py) ----
LOG_FORMAT = env.str("LOG_FORMAT", default="json" if HERMES_BEHIND_PROXY else "plain")
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or plain (got {LOG_FORMAT!r}).")
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
    "root": {"handlers": ["stdout"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
