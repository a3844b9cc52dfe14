"""Settings for Hermes Web, read from the environment (and an optional `.env`).

Safe by default: DEBUG is off, ALLOWED_HOSTS lists loopback only, and a secret key is
generated once into `var/` when none is given. Every setting a deployment may change is
listed in the README's configuration table.
"""

from __future__ import annotations

import secrets
from pathlib import Path

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
    "hermes_site",
    "accounts",
    "sessions_app",
    "memory",
    "skills_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "hermes_site.middleware.ContentSecurityPolicyMiddleware",
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
                "hermes_site.context_processors.hermes",
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
    _db["TEST"] = {"NAME": str(_db_name.with_name(f"test_{_db_name.name}"))}
elif _db["ENGINE"] == "django.db.backends.postgresql":
    _db.setdefault("CONN_MAX_AGE", env.int("HERMES_DB_CONN_MAX_AGE", default=0))
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
                "hosts": [REDIS_URL],
                "prefix": env.str("HERMES_CHANNEL_PREFIX", default="hermes"),
                # Streams go to a few sockets per user; a larger buffer keeps a slow tab
                # from losing deltas (group_send drops silently when a channel is full).
                "capacity": 1000,
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

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
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
    "EXCEPTION_HANDLER": "hermes_site.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Hermes Web API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
}

# --- LLM ------------------------------------------------------------------------------
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
HERMES_MODEL = env.str("HERMES_MODEL", default="")
HERMES_SUMMARY_MODEL = env.str("HERMES_SUMMARY_MODEL", default="")
HERMES_CONTEXT_LENGTH = env.int("HERMES_CONTEXT_LENGTH", default=128000)
HERMES_LLM_CONNECT_TIMEOUT = env.float("HERMES_LLM_CONNECT_TIMEOUT", default=5.0)
HERMES_LLM_READ_TIMEOUT = env.float("HERMES_LLM_READ_TIMEOUT", default=30.0)
HERMES_LLM_MAX_RETRIES = env.int("HERMES_LLM_MAX_RETRIES", default=2)
# USD per million tokens, per model: {"gpt-4o": {"input": 2.5, "output": 10, "cached_input": 1.25}}
HERMES_MODEL_PRICES = env.json("HERMES_MODEL_PRICES", default={})

# --- Memory ---------------------------------------------------------------------------
HERMES_MEMORY_CHAR_LIMIT = env.int("HERMES_MEMORY_CHAR_LIMIT", default=2200)
HERMES_USER_CHAR_LIMIT = env.int("HERMES_USER_CHAR_LIMIT", default=1375)

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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
