#!/usr/bin/env python3
"""Render deploy/nginx/hermes.conf.template into an nginx site file.

    python3 deploy/render_nginx.py --server-name chat.example.org \\
        --upstream 127.0.0.1:8001 --upstream 127.0.0.1:8002 \\
        --cert /etc/letsencrypt/live/chat.example.org/fullchain.pem \\
        --key /etc/letsencrypt/live/chat.example.org/privkey.pem \\
        > /etc/nginx/sites-available/hermes.conf

Standard library only: it runs on the proxy host without the app installed.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parent / "nginx" / "hermes.conf.template"
_PLACEHOLDER = re.compile(r"\{\{ (\w+) \}\}")
_SAFE = re.compile(r"[A-Za-z0-9_.:/\[\]* -]+")


def render(
    *,
    server_name: str,
    upstreams: Sequence[str],
    ssl_certificate: str,
    ssl_certificate_key: str,
    https_listen: str = "443",
    http_listen: str = "80",
    log_dir: str = "/var/log/nginx",
    template: Path = TEMPLATE,
) -> str:
    if not upstreams:
        raise ValueError("at least one --upstream (host:port of an ASGI process) is needed")
    raw = {
        "server_name": [server_name],
        "upstream": list(upstreams),
        "ssl_certificate": [ssl_certificate],
        "ssl_certificate_key": [ssl_certificate_key],
        "https_listen": [https_listen],
        "http_listen": [http_listen],
        "log_dir": [log_dir],
    }
    for key, items in raw.items():
        for item in items:
            # A ';', '{' or newline in a value would inject nginx directives.
            if not _SAFE.fullmatch(item):
                raise ValueError(f"{key}: unexpected characters in {item!r}")
    values = {
        "server_name": server_name,
        "upstream_servers": "\n".join(
            f"    server {u} max_fails=3 fail_timeout=10s;" for u in upstreams
        ),
        "ssl_certificate": ssl_certificate,
        "ssl_certificate_key": ssl_certificate_key,
        "https_listen": https_listen,
        "http_listen": http_listen,
        "log_dir": log_dir.rstrip("/"),
    }

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"the template has an unknown placeholder {name!r}")
        return values[name]

    return _PLACEHOLDER.sub(fill, template.read_text())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-name", required=True, help="public host name")
    parser.add_argument(
        "--upstream", action="append", required=True, help="host:port of an ASGI process"
    )
    parser.add_argument("--cert", required=True, help="TLS certificate (full chain)")
    parser.add_argument("--key", required=True, help="TLS private key")
    parser.add_argument("--https-listen", default="443", help="listen address for HTTPS")
    parser.add_argument("--http-listen", default="80", help="listen address for HTTP")
    parser.add_argument("--log-dir", default="/var/log/nginx")
    args = parser.parse_args(argv)
    try:
        text = render(
            server_name=args.server_name,
            upstreams=args.upstream,
            ssl_certificate=args.cert,
            ssl_certificate_key=args.key,
            https_listen=args.https_listen,
            http_listen=args.http_listen,
            log_dir=args.log_dir,
        )
    except ValueError as exc:
        print(f"render_nginx: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
