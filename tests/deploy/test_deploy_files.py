"""The files in deploy/ are valid for the tools that read them, and say what the
deployment guide promises."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from tests.conftest import ROOT

DEPLOY = ROOT / "deploy"
sys.path.insert(0, str(DEPLOY))
from render_nginx import render  # noqa: E402

needs_nginx = pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx is not installed")
needs_systemd = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed"
)


def rendered(tmp_path) -> str:
    return render(
        server_name="chat.example.org",
        upstreams=["127.0.0.1:8001", "127.0.0.1:8002"],
        ssl_certificate=str(tmp_path / "cert.pem"),
        ssl_certificate_key=str(tmp_path / "key.pem"),
        https_listen="127.0.0.1:8443",
        http_listen="127.0.0.1:8080",
        log_dir=str(tmp_path),
    )


def test_the_nginx_site_does_what_the_guide_says(tmp_path):
    site = rendered(tmp_path)
    assert "{{" not in site
    assert "server 127.0.0.1:8001" in site and "server 127.0.0.1:8002" in site
    directives = " ".join(site.split())
    # Unknown hosts get no answer; plain HTTP is redirected to HTTPS.
    assert "server_name _; ssl_reject_handshake on;" in directives
    assert "return 444;" in directives
    assert "return 301 https://$host$request_uri;" in directives
    # Websocket upgrade with a long read timeout; streamed responses unbuffered.
    assert "proxy_set_header Upgrade $http_upgrade;" in directives
    assert "proxy_set_header Connection $hermes_connection;" in directives
    # nginx drops inherited proxy_set_header lines in a location that sets its own: all
    # of them live at server level.
    locations = re.findall(r"^ *location [^{]*\{(.*?)^ *\}", site, re.M | re.S)
    assert len(locations) == 5  # the redirect, /ws/, /mcp, /healthz and /
    assert not any("proxy_set_header" in body for body in locations)
    assert "proxy_read_timeout 3600s;" in directives
    assert "proxy_buffering off;" in directives
    # The MCP server's event streams are passed on unbuffered too.
    mcp = re.search(r"location /mcp \{(.*?)\}", site, re.S).group(1)
    assert "proxy_buffering off;" in mcp and "gzip off;" in mcp
    # The client's own X-Forwarded-For is replaced, never appended to.
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in directives
    assert "$proxy_add_x_forwarded_for" not in site
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in directives
    assert "proxy_set_header X-Request-ID $request_id;" in directives


def test_render_refuses_values_that_would_inject_directives(tmp_path):
    with pytest.raises(ValueError, match="server_name"):
        render(
            server_name="chat.example.org; include /etc/passwd",
            upstreams=["127.0.0.1:8001"],
            ssl_certificate="/c",
            ssl_certificate_key="/k",
        )
    with pytest.raises(ValueError, match="upstream"):
        render(server_name="a", upstreams=[], ssl_certificate="/c", ssl_certificate_key="/k")


def write_nginx_conf(tmp_path, site: str) -> str:
    (tmp_path / "site.conf").write_text(site)
    conf = tmp_path / "nginx.conf"
    conf.write_text(
        f"""daemon off;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log;
events {{ worker_connections 64; }}
http {{
    client_body_temp_path {tmp_path}/body;
    proxy_temp_path {tmp_path}/proxy;
    fastcgi_temp_path {tmp_path}/fastcgi;
    uwsgi_temp_path {tmp_path}/uwsgi;
    scgi_temp_path {tmp_path}/scgi;
    include {tmp_path}/site.conf;
}}
"""
    )
    return str(conf)


@needs_nginx
def test_nginx_accepts_the_rendered_site(tmp_path):
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=chat.example.org",
            "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    conf = write_nginx_conf(tmp_path, rendered(tmp_path))
    result = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-c", conf, "-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


@needs_systemd
def test_systemd_units_verify(tmp_path):
    # As installed: paths under /srv/hermes become this checkout, the service user root.
    for unit in (DEPLOY / "systemd").iterdir():
        text = (
            unit.read_text()
            .replace("/srv/hermes", str(ROOT))
            .replace("User=hermes", "User=root")
            .replace("Group=hermes", "Group=root")
            .replace("EnvironmentFile=", "EnvironmentFile=-")
        )
        name = unit.name.replace("@.service", "@8001.service")
        (tmp_path / name).write_text(text)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "hermes-asgi@8001.service",
        "hermes-beat.service",
        "hermes-worker.service",
        "hermes.target",
    ]
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *[f"./{n}" for n in names]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


def exec_start(unit: str) -> list[str]:
    text = (DEPLOY / "systemd" / unit).read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart="))


def make_serve_command() -> list[str]:
    result = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed-requirements", "serve"],
        cwd=ROOT,
        env={
            **os.environ,
            "REDIS_URL": "redis://x",
            "HERMES_HOST": "127.0.0.1",
            "HERMES_PORT": "8001",
        },
        capture_output=True,
        text=True,
        check=True,
    )
    text = result.stdout.replace("\\\n", " ")
    line = next(line for line in text.splitlines() if "daphne" in line)
    return shlex.split(line.removeprefix("exec "))


def test_the_asgi_unit_runs_what_make_serve_runs_without_daphnes_proxy_headers():
    unit = exec_start("hermes-asgi@.service")
    make = make_serve_command()
    assert "--proxy-headers" not in unit and "--proxy-headers" not in make
    assert unit[-1] == make[-1] == "hermes_site.asgi_proxy:application"
    # The same flags; only the values of --bind and --port come from elsewhere.
    assert without_address(unit) == without_address(make)


def without_address(argv: list[str]) -> list[str]:
    out, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in ("--bind", "--port"):
            out.append(arg)
            skip = True
        else:
            out.append(arg)
    return out


def test_make_serve_and_beat_need_redis():
    for target in ("serve", "beat"):
        result = subprocess.run(
            ["make", "-s", "-o", ".venv/.installed-requirements", target],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if k != "REDIS_URL"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode != 0
        assert f"make {target} needs REDIS_URL" in result.stdout


def test_every_setting_of_the_example_env_is_documented_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    keys = re.findall(r"^([A-Z_]+)=", (DEPLOY / "hermes.env.example").read_text(), re.M)
    assert "HERMES_TRUSTED_PROXIES" in keys
    undocumented = [k for k in keys if f"`{k}`" not in readme]
    assert undocumented == []
