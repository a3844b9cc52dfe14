"""Structured logs on stdout, with the request id that the response also carries."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from django.test import Client
from django.urls import reverse

from core.logs import JsonFormatter, request_id_var
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def test_each_response_carries_a_request_id_and_one_access_line(owner, caplog, settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    client = Client()
    client.force_login(owner)
    with caplog.at_level(logging.INFO, logger="hermes.access"):
        response = client.get(
            reverse("dashboard") + "?q=private-search-words",
            REMOTE_ADDR="127.0.0.1",
            HTTP_X_FORWARDED_FOR="198.51.100.20",
        )
    request_id = response["X-Request-ID"]
    assert len(request_id) == 32
    [line] = [r for r in caplog.records if r.name == "hermes.access"]
    assert line.request_id == request_id
    assert line.status == 200 and line.path == "/" and line.method == "GET"
    assert line.client_ip == "198.51.100.20"
    assert line.user_id == owner.pk
    # Query strings (search terms, tokens) never reach the log.
    assert "private-search-words" not in JsonFormatter().format(line)


def test_the_proxy_may_name_the_request_but_a_client_may_not(settings):
    settings.HERMES_TRUSTED_PROXIES = ["127.0.0.1"]
    offered = "0123456789abcdef0123456789abcdef"
    from_proxy = Client().get(reverse("login"), REMOTE_ADDR="127.0.0.1", HTTP_X_REQUEST_ID=offered)
    assert from_proxy["X-Request-ID"] == offered
    from_client = Client().get(
        reverse("login"), REMOTE_ADDR="203.0.113.7", HTTP_X_REQUEST_ID=offered
    )
    assert from_client["X-Request-ID"] != offered
    junk = Client().get(
        reverse("login"), REMOTE_ADDR="127.0.0.1", HTTP_X_REQUEST_ID="bad id\nwith newline"
    )
    assert junk["X-Request-ID"] != "bad id\nwith newline"


def test_json_lines_carry_level_logger_request_id_extra_fields_and_tracebacks():
    token = request_id_var.set("req-1234abcd")
    try:
        try:
            raise ValueError("boom")
        except ValueError:
            record = logging.getLogger("hermes.test").makeRecord(
                "hermes.test",
                logging.ERROR,
                __file__,
                1,
                "turn %s failed",
                ("abc",),
                sys.exc_info(),
                extra={"session_id": "abc"},
            )
        from core.logs import ContextFilter

        ContextFilter().filter(record)
        line = json.loads(JsonFormatter().format(record))
    finally:
        request_id_var.reset(token)
    assert line["level"] == "ERROR"
    assert line["logger"] == "hermes.test"
    assert line["message"] == "turn abc failed"
    assert line["request_id"] == "req-1234abcd"
    assert line["session_id"] == "abc"
    assert "ValueError: boom" in line["exception"]
    assert line["time"].endswith("+00:00")


def test_behind_a_proxy_the_processes_log_json_to_stdout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LOG_FORMAT", "DATABASE_URL")}
    env.update(HERMES_BEHIND_PROXY="true", HERMES_VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "import logging; logging.getLogger('hermes.probe').warning('hello %s', 'there')",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert {"level": "WARNING", "logger": "hermes.probe", "message": "hello there"}.items() <= (
        lines[-1].items()
    )
