"""Django itself: paths, the secret key, apps, middleware, templates, authentication,
browser security headers, the REST API, static files and time zone."""

from __future__ import annotations

import secrets
from pathlib import Path

from .declare import PROJECT_DIR as _PROJECT_DIR
from .declare import declare_bool, declare_path, declare_str

BASE_DIR = _PROJECT_DIR

VAR_DIR = declare_path(
    "HERMES_VAR_DIR",
    BASE_DIR / "var",
    help="Where the database, secret key, Valkey socket and exports live.",
    default_doc="`var/`",
)
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


SECRET_KEY = (
    declare_str(
        "SECRET_KEY",
        "",
        help="Django's signing key.",
        default_doc="generated once into `var/secret_key` (mode 0600)",
    )
    or _generated_secret_key()
)
DEBUG = declare_bool("DEBUG", False, help="Django's debug mode; never on a reachable server.")

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
    "model_catalog",
    "sessions_app",
    "memory",
    "skills_app",
    "privacy",
    "usage",
    "openai_api",
    "mcp_server",
]

MIDDLEWARE = [
    # First, so every log line of the request (and its response) carries the request id.
    "core.logs.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language of the browser (the login page's switch, else Accept-Language) …
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.proxy_auth.ProxyHeaderMiddleware",
    # … unless the signed-in person chose one on the Account page.
    "accounts.middleware.PersonLanguageMiddleware",
    "accounts.middleware.LoginThrottleMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    "core.middleware.ServiceErrorMiddleware",
    "core.middleware.MethodNotAllowedPageMiddleware",
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

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# ModelBackend behind the login throttle (accounts/throttle.py), sign-in by an auth proxy's
# header (accounts/proxy_auth.py) and single sign-on (accounts/oidc/). Each one's sessions
# end while its way of signing in is off (HERMES_PASSWORD_LOGIN, HERMES_AUTH_HEADER,
# HERMES_OIDC_ISSUER).
AUTHENTICATION_BACKENDS = [
    "accounts.backends.ThrottledModelBackend",
    "accounts.proxy_auth.ProxyHeaderBackend",
    "accounts.oidc.backend.OIDCBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
HERMES_ALLOW_SIGNUP = declare_bool(
    "HERMES_ALLOW_SIGNUP", False, help="Let people create their own accounts."
)

# Browser-side hardening that holds with or without HTTPS (the HTTPS part is in deployment).
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"

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

# --- Static files, i18n ---------------------------------------------------------------
STATIC_URL = "static/"
STATIC_ROOT: Path = VAR_DIR / "static"
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
LANGUAGE_CODE = "en"
# English is the source; docs/glossary-zh-Hans.md keeps the Chinese terms consistent.
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = declare_str(
    "TIME_ZONE", "UTC", help="Time zone of pages and of the daily quotas' day boundary."
)
USE_I18N = True
USE_TZ = True
