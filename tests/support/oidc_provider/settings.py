"""Settings of the test provider's process (see the package docstring)."""

from __future__ import annotations

import os
from pathlib import Path

DATA = Path(os.environ["OIDC_PROVIDER_DATA"])
PORT = int(os.environ["OIDC_PROVIDER_PORT"])
#: Issuer, and the prefix of every endpoint of the provider.
ISSUER = f"http://127.0.0.1:{PORT}/o"

SECRET_KEY = "oidc-test-provider-" + DATA.name
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.support.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA / "provider.sqlite3"}}
AUTHENTICATION_BACKENDS = ["tests.support.oidc_provider.directory.DirectoryBackend"]
LOGIN_URL = "/login/"
# Cookies are per host, not per port: the site under test on 127.0.0.1 must keep its own.
SESSION_COOKIE_NAME = "provider_sessionid"
CSRF_COOKIE_NAME = "provider_csrftoken"
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (DATA / "key.pem").read_text(),
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.support.oidc_provider.directory.DirectoryValidator",
    "SCOPES": {
        "openid": "Who you are",
        "email": "Your e-mail address",
        "profile": "Your name",
        "groups": "Your groups",
    },
}
LOGGING = {
    "version": 1,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
}
