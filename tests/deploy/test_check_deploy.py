"""Production settings pass Django's deployment checklist, and the proxy settings are
what the reverse proxy needs."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

from tests.conftest import ROOT

OUR_VARS = (
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "REDIS_URL",
    "HERMES_VAR_DIR",
    "HERMES_PUBLIC_URL",
    "HERMES_BEHIND_PROXY",
    "HERMES_TRUSTED_PROXIES",
    "CSRF_TRUSTED_ORIGINS",
)


def production_env(tmp_path, **overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARS}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "hermes_site.settings",
            "HERMES_VAR_DIR": str(tmp_path / "var"),
            "SECRET_KEY": secrets.token_urlsafe(64),
            "DEBUG": "false",
            "HERMES_PUBLIC_URL": "https://chat.example.org",
            "HERMES_BEHIND_PROXY": "true",
            "DATABASE_URL": "postgres://hermes:secret@127.0.0.1:5432/hermes",
            "REDIS_URL": "redis://127.0.0.1:6379/0",
        }
    )
    env.update(overrides)
    return env


def check_deploy(tmp_path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=production_env(tmp_path, **overrides),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_passes_with_production_settings(tmp_path):
    result = check_deploy(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_without_the_public_https_url(tmp_path):
    # The same command catches a deployment that forgot HTTPS: the test above is not vacuous.
    result = check_deploy(tmp_path, HERMES_PUBLIC_URL="", ALLOWED_HOSTS="chat.example.org")
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr


PROBE = (
    "import json, django; from django.conf import settings; django.setup(); "
    "print(json.dumps({k: getattr(settings, k, None) for k in ("
    "'SECURE_PROXY_SSL_HEADER', 'USE_X_FORWARDED_HOST', 'CSRF_TRUSTED_ORIGINS', "
    "'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
    "'SECURE_SSL_REDIRECT', 'ALLOWED_HOSTS', 'SECURE_REDIRECT_EXEMPT')}))"
)


def probe(tmp_path, **overrides: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=production_env(tmp_path, **overrides),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_behind_proxy_with_public_url_sets_what_the_proxy_needs(tmp_path):
    result = probe(tmp_path)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["USE_X_FORWARDED_HOST"] is True
    assert "https://chat.example.org" in values["CSRF_TRUSTED_ORIGINS"]
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31536000
    assert values["SECURE_SSL_REDIRECT"] is True
    # One setting names the site: its host is allowed (and so are its websocket Origins).
    assert "chat.example.org" in values["ALLOWED_HOSTS"]
    # The health check stays reachable over plain HTTP for monitoring on the app port.
    assert values["SECURE_REDIRECT_EXEMPT"] == ["^healthz$"]


def test_without_the_proxy_flag_forwarded_headers_are_not_believed(tmp_path):
    result = probe(tmp_path, HERMES_BEHIND_PROXY="false", HERMES_PUBLIC_URL="")
    values = json.loads(result.stdout)
    assert values["SECURE_PROXY_SSL_HEADER"] is None
    assert values["USE_X_FORWARDED_HOST"] is False


def test_a_public_url_with_a_path_is_refused_with_a_clear_message(tmp_path):
    result = probe(tmp_path, HERMES_PUBLIC_URL="chat.example.org/hermes")
    assert result.returncode != 0
    assert "HERMES_PUBLIC_URL must be a scheme and host" in result.stderr.strip().splitlines()[-1]


def test_a_bad_trusted_proxy_is_refused_with_a_clear_message(tmp_path):
    result = probe(tmp_path, HERMES_TRUSTED_PROXIES="127.0.0.1,nginx.local")
    assert result.returncode != 0
    assert "HERMES_TRUSTED_PROXIES" in result.stderr.strip().splitlines()[-1]
