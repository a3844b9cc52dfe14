"""Settings are safe by default and refuse bad values with one clear message."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest
from django.core.exceptions import ImproperlyConfigured

from hermes_site.settings.declare import (
    REGISTRY,
    Setting,
    declare_float,
    declare_int,
    declare_json,
    declare_list,
    declare_str,
)
from tests.conftest import ROOT

PROBE = (
    "import json, django; from django.conf import settings; django.setup(); "
    "print(json.dumps({'debug': settings.DEBUG, 'hosts': settings.ALLOWED_HOSTS, "
    "'key': settings.SECRET_KEY, 'db': settings.DATABASES['default']['ENGINE'], "
    "'opts': settings.DATABASES['default'].get('OPTIONS', {}), "
    "'layer': settings.CHANNEL_LAYERS['default']['BACKEND'], "
    "'broker': settings.CELERY_BROKER_URL, 'beat': settings.HERMES_EMBEDDED_BEAT}))"
)
OUR_VARS = ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "HERMES_VAR_DIR")


def run_settings(tmp_path, code=PROBE, **env_overrides):
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARS}
    env.update(
        {"HERMES_VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "hermes_site.settings"}
    )
    env.update(env_overrides)
    return subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {code}"],
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
    assert values["beat"] is True  # `make run` schedules its own housekeeping


def test_only_the_asgi_process_shortens_the_interpreter_locks_switch_interval(tmp_path):
    # Its database thread waits for the lock after every statement; other processes (a
    # worker, manage.py) keep Python's default.
    code = (
        "import django; django.setup(); before = sys.getswitchinterval(); "
        "import hermes_site.asgi; print(before, sys.getswitchinterval())"
    )
    for env, after in (({}, 0.001), ({"HERMES_ASGI_SWITCH_INTERVAL_MS": "2.5"}, 0.0025)):
        result = run_settings(tmp_path, code, **env)
        assert result.returncode == 0, result.stderr
        last = result.stdout.splitlines()[-1]  # after the startup log lines
        assert [float(v) for v in last.split()] == pytest.approx([0.005, after])


def test_secret_key_is_generated_once_into_var_and_kept(tmp_path):
    first = json.loads(run_settings(tmp_path).stdout)["key"]
    second = json.loads(run_settings(tmp_path).stdout)["key"]
    key_file = tmp_path / "var" / "secret_key"
    assert first == second == key_file.read_text().strip()
    assert len(first) >= 50
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_redis_url_selects_redis_for_layer_and_broker(tmp_path):
    values = json.loads(run_settings(tmp_path, REDIS_URL="unix:///tmp/x.sock").stdout)
    assert values["layer"] == "core.channel_layer.LocalFirstRedisChannelLayer"
    assert values["broker"] == "redis+socket:///tmp/x.sock"
    # A shared Redis has its deployment's one `make beat`: `make run` adds no second one...
    assert values["beat"] is False


def test_the_channel_layer_can_be_channels_redis_own_ones_and_nothing_else(tmp_path):
    for name, backend in [
        ("redis", "channels_redis.core.RedisChannelLayer"),
        ("redis-pubsub", "channels_redis.pubsub.RedisPubSubChannelLayer"),
    ]:
        result = run_settings(
            tmp_path, REDIS_URL="redis://127.0.0.1:1/0", HERMES_CHANNEL_LAYER=name
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["layer"] == backend
    refused = run_settings(tmp_path, REDIS_URL="redis://127.0.0.1:1/0", HERMES_CHANNEL_LAYER="x")
    assert refused.returncode != 0
    assert "HERMES_CHANNEL_LAYER" in refused.stderr


def test_the_embedded_beat_beside_a_shared_redis_is_opt_in(tmp_path):
    # ... unless told this machine is the only one using that Redis.
    values = json.loads(
        run_settings(tmp_path, REDIS_URL="unix:///tmp/x.sock", HERMES_EMBEDDED_BEAT="true").stdout
    )
    assert values["beat"] is True


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


@pytest.mark.parametrize(
    "origins",
    [
        "chat.example.org",
        "https://chat.example.org/app",
        "*",
        "https://*",
        "https://a*.example.org",
    ],
)
def test_a_trusted_origin_that_is_no_origin_is_refused(tmp_path, origins):
    result = run_settings(tmp_path, CSRF_TRUSTED_ORIGINS=f"https://ok.example.org,{origins}")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "CSRF_TRUSTED_ORIGINS" in last and repr(origins) in last


def test_the_wildcard_subdomain_form_is_a_trusted_origin(tmp_path):
    result = run_settings(tmp_path, CSRF_TRUSTED_ORIGINS="https://*.example.org,http://h:81")
    assert result.returncode == 0, result.stderr


def test_a_value_of_the_wrong_type_names_the_variable(tmp_path):
    result = run_settings(tmp_path, HERMES_PORT="eighty")
    assert result.returncode != 0
    assert "HERMES_PORT must be a whole number (got 'eighty')" in result.stderr


def test_a_value_out_of_bounds_names_the_variable_and_the_bound(tmp_path):
    result = run_settings(tmp_path, HERMES_LOGIN_WINDOW_SECONDS="0")
    assert result.returncode != 0
    assert "HERMES_LOGIN_WINDOW_SECONDS must be at least 1 (got 0)" in result.stderr


def test_manage_py_reports_the_bad_value_not_a_later_import_error(tmp_path):
    # manage.py imports the settings a second time after the first attempt fails.
    env = {k: v for k, v in os.environ.items() if k not in OUR_VARS}
    env.update(HERMES_VAR_DIR=str(tmp_path / "var"), HERMES_PORT="0")
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "HERMES_PORT must be at least 1 (got 0)" in result.stderr.strip().splitlines()[-1]


# --- The declarations and the README agree ----------------------------------------------

README = ROOT / "README.md"
# A table row whose first cell names settings: `A`, or `A` / `B` (or `A`, `B`).
ROW = re.compile(
    r"^\| *(`[A-Z][A-Z0-9_]*`(?: *[/,] *`[A-Z][A-Z0-9_]*`)*) *\| *([^|]*?) *\|", re.MULTILINE
)
# Environment variables the README mentions that the test suite reads, not the app.
# Variables only the test suite reads (they configure a test run, not the site).
TEST_SWITCHES = {"HERMES_STACK_TEST", "HERMES_CHAOS_RUNS", "HERMES_CHAOS_SEEDS"}


def readme_defaults() -> dict[str, str]:
    """Each setting in a README table, with its default cell (one part per name when a row
    names several: `A` / `B` | `1` / `2`)."""
    found: dict[str, str] = {}
    for names_cell, default_cell in ROW.findall(README.read_text()):
        names = re.findall(r"`([A-Z][A-Z0-9_]*)`", names_cell)
        parts = [default_cell]
        if len(names) > 1:
            parts = re.split(r" / |, ", default_cell)
            assert len(parts) == len(names), f"one default per setting in: {names_cell}"
        for name, part in zip(names, parts, strict=True):
            assert name not in found, f"{name} has two rows in the README"
            found[name] = unquote(part.strip())
    return found


def unquote(cell: str) -> str:
    """`x` → x; a cell that is more than one code span stays as written."""
    return cell[1:-1] if re.fullmatch(r"`[^`]*`", cell) else cell


def readme_form(setting: Setting) -> str:
    """The declared default as the README writes it: a derived one (generated, taken from
    another setting) in the declaration's own words."""
    value = setting.default
    if setting.default_doc:
        return unquote(setting.default_doc)
    if setting.kind == "bool":
        return "true" if value else "false"
    if setting.kind == "float":
        return f"{value:g}"
    if setting.kind == "list":
        return ",".join(value) or "empty"
    if setting.kind == "json":
        return json.dumps(value)
    return str(value) if value != "" else "empty"


def test_every_declared_setting_has_a_readme_row():
    assert set(REGISTRY) - set(readme_defaults()) == set()


def test_every_setting_in_the_readme_is_declared():
    mentioned = set(re.findall(r"\b(HERMES_[A-Z0-9_]*[A-Z0-9])\b", README.read_text()))
    assert set(readme_defaults()) - set(REGISTRY) == set()
    assert mentioned - TEST_SWITCHES - set(REGISTRY) == set()


def test_readme_defaults_match_the_declarations():
    documented = readme_defaults()
    wrong = {}
    for name, setting in REGISTRY.items():
        expected = readme_form(setting)
        shown = documented.get(name, expected)
        # An empty string is "empty", or "unset" where unset changes the mode (REDIS_URL).
        if expected == "empty" and shown == "unset":
            continue
        if shown != expected:
            wrong[name] = (shown, expected)
    assert wrong == {}, "README default vs declared default"


# --- The declaration helper -------------------------------------------------------------


@pytest.fixture
def registry():
    """The registry as it was before the test: declarations made by a test are forgotten."""
    before = dict(REGISTRY)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(before)


def test_a_declaration_is_recorded_once(registry, monkeypatch):
    monkeypatch.setenv("HERMES_PROBE_LIMIT", "7")
    assert declare_int("HERMES_PROBE_LIMIT", 3, min=1, help="A probe.") == 7
    assert registry["HERMES_PROBE_LIMIT"] == Setting(
        "HERMES_PROBE_LIMIT", "int", 3, "A probe.", min=1
    )
    assert registry["HERMES_PROBE_LIMIT"].module == __name__
    registry["HERMES_PROBE_LIMIT"] = replace(registry["HERMES_PROBE_LIMIT"], module="elsewhere")
    with pytest.raises(ImproperlyConfigured, match="HERMES_PROBE_LIMIT is declared in both"):
        declare_int("HERMES_PROBE_LIMIT", 3, help="Again.")


@pytest.mark.parametrize(
    ("declare", "raw", "message"),
    [
        (lambda: declare_int("HERMES_PROBE", 1, min=0, help="."), "-1", "at least 0 (got -1)"),
        (lambda: declare_float("HERMES_PROBE", 1.0, max=1, help="."), "1.5", "at most 1 (got 1.5)"),
        (lambda: declare_float("HERMES_PROBE", 1.0, help="."), "soon", "a number (got 'soon')"),
        (lambda: declare_json("HERMES_PROBE", {}, help="."), "[1]", "a JSON object (got list)"),
        (lambda: declare_json("HERMES_PROBE", {}, help="."), "{", "must be JSON"),
        (
            lambda: declare_str("HERMES_PROBE", "a", choices=("a", "b"), help="."),
            "c",
            "one of a, b",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_variable(
    registry, monkeypatch, declare, raw, message
) -> None:
    monkeypatch.setenv("HERMES_PROBE", raw)
    with pytest.raises(ImproperlyConfigured, match="HERMES_PROBE") as caught:
        declare()
    assert message in str(caught.value)


def test_clamped_values_are_brought_inside_the_bounds(registry, monkeypatch):
    monkeypatch.setenv("HERMES_PROBE", "9")
    assert declare_int("HERMES_PROBE", 3, min=1, max=5, clamp=True, help=".") == 5


def test_callers_cannot_change_a_declared_default(registry):
    hosts = declare_list("HERMES_PROBE_HOSTS", ["a"], help=".")
    hosts.append("b")
    assert registry["HERMES_PROBE_HOSTS"].default == ["a"]
