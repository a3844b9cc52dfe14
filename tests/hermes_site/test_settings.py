"""Settings are safe by default and refuse bad values with one clear message."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = (
    "import json, django; from django.conf import settings; django.setup(); "
    "print(json.dumps({'debug': settings.DEBUG, 'hosts': settings.ALLOWED_HOSTS, "
    "'key': settings.SECRET_KEY, 'db': settings.DATABASES['default']['ENGINE'], "
    "'opts': settings.DATABASES['default'].get('OPTIONS', {}), "
    "'layer': settings.CHANNEL_LAYERS['default']['BACKEND'], "
    "'broker': settings.CELERY_BROKER_URL}))"
)
OUR_VARS = ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "HERMES_VAR_DIR")


def run_settings(tmp_path, **env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARS}
    env.update(
        {"HERMES_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "hermes_site.settings"}
    )
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {PROBE}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_defaults_are_safe_and_embedded(tmp_path):
    result = run_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["debug"] is False
    assert "*" not in values["hosts"]
    assert values["db"] == "django.db.backends.sqlite3"
    assert values["opts"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in values["opts"]["init_command"]
    assert "synchronous=NORMAL" in values["opts"]["init_command"]
    assert values["opts"]["timeout"] >= 5
    assert values["layer"] == "channels.layers.InMemoryChannelLayer"


def test_secret_key_is_generated_once_into_var_and_kept(tmp_path):
    first = json.loads(run_settings(tmp_path).stdout)["key"]
    second = json.loads(run_settings(tmp_path).stdout)["key"]
    key_file = tmp_path / "var" / "secret_key"
    assert first == second == key_file.read_text().strip()
    assert len(first) >= 50
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_redis_url_selects_redis_for_layer_and_broker(tmp_path):
    values = json.loads(run_settings(tmp_path, REDIS_URL="unix:///tmp/x.sock").stdout)
    assert values["layer"] == "channels_redis.core.RedisChannelLayer"
    assert values["broker"] == "redis+socket:///tmp/x.sock"


def test_a_wrong_database_url_names_the_setting(tmp_path):
    result = run_settings(tmp_path, DATABASE_URL="nosuchdb://whatever")
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr.strip().splitlines()[-1]


def test_a_wrong_redis_url_names_the_setting(tmp_path):
    result = run_settings(tmp_path, REDIS_URL="http://127.0.0.1:6379")
    assert result.returncode != 0
    assert "REDIS_URL" in result.stderr.strip().splitlines()[-1]


def test_allowed_hosts_star_is_refused(tmp_path):
    result = run_settings(tmp_path, ALLOWED_HOSTS="*")
    assert result.returncode != 0
    assert "ALLOWED_HOSTS" in result.stderr.strip().splitlines()[-1]
