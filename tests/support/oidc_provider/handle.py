"""The tests' side of the test provider: start it, say who may sign in there, sign someone
in with a plain HTTP client (for tests that drive the site with Django's test client), and
reach into its database for what no HTTP request can do (age a one-time code)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

ROOT = Path(__file__).resolve().parents[3]
CLIENT_ID = "hermes"
CLIENT_SECRET = "hermes-test-secret"
PUBLIC_CLIENT_ID = "hermes-public"
#: Every person's password at the provider unless their entry says otherwise.
PASSWORD = "provider-password"
# Loopback redirect URIs match any port (RFC 8252), so one registration serves every
# live server of the run; "testserver" is Django's test client.
REDIRECTS = [
    "http://testserver/accounts/oidc/callback/",
    "http://127.0.0.1/accounts/oidc/callback/",
]
AFTER_LOGOUT = ["http://testserver/accounts/login/", "http://127.0.0.1/accounts/login/"]


@dataclass
class OIDCProvider:
    data: Path
    port: int
    proc: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    def settings(self, **extra: Any) -> dict[str, Any]:
        """The site's settings that point at this provider (confidential client)."""
        return {
            "HERMES_OIDC_ISSUER": self.issuer,
            "HERMES_OIDC_CLIENT_ID": CLIENT_ID,
            "HERMES_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "HERMES_OIDC_NAME": "Test SSO",
            **extra,
        }

    def set_people(self, people: dict[str, dict[str, Any]]) -> None:
        """Who may sign in at the provider (replaces the directory; read at each login)."""
        entries = {name: {"password": PASSWORD, **entry} for name, entry in people.items()}
        tmp = self.data / "directory.json.tmp"
        tmp.write_text(json.dumps(entries))
        tmp.replace(self.data / "directory.json")

    def expire_codes(self) -> int:
        """Age every one-time code it handed out past its expiry; returns how many."""
        with sqlite3.connect(self.data / "provider.sqlite3") as db:
            return db.execute(
                "UPDATE oauth2_provider_grant SET expires = '2000-01-01 00:00:00'"
            ).rowcount

    def sign_in(
        self, http: httpx.Client, authorize_url: str, username: str, password: str = ""
    ) -> str:
        """Follow the site's redirect to the provider as a browser would, log in there as
        `username` if its session has nobody yet, and return the URL the provider sends the
        browser back to (the site's callback with code and state), not following it."""
        response = http.get(authorize_url)
        while response.is_redirect:
            target = urljoin(str(response.url), response.headers["location"])
            if not target.startswith(self.url):
                return target
            if "/login/" in target:
                page = http.get(target)
                csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
                nxt = re.search(r'name="next" value="([^"]*)"', page.text)
                assert csrf and nxt, page.text
                response = http.post(
                    target,
                    data={
                        "csrfmiddlewaretoken": csrf.group(1),
                        "username": username,
                        "password": password or PASSWORD,
                        "next": nxt.group(1).replace("&amp;", "&"),
                    },
                )
                assert response.is_redirect, f"the provider refused {username}: {response.text}"
                continue
            response = http.get(target)
        raise AssertionError(f"the provider did not send the browser back: {response.text[:500]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_provider(data: Path, port: int) -> OIDCProvider:
    """The provider in a process of its own, once its discovery document answers."""
    data.mkdir(parents=True, exist_ok=True)
    clients = [
        {
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
            "redirect_uris": REDIRECTS,
            "post_logout_redirect_uris": AFTER_LOGOUT,
        },
        {
            "client_id": PUBLIC_CLIENT_ID,
            "client_secret": "",
            "redirect_uris": REDIRECTS,
            "post_logout_redirect_uris": AFTER_LOGOUT,
        },
    ]
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_", "HERMES_"))
    }
    env.update(
        OIDC_PROVIDER_DATA=str(data),
        OIDC_PROVIDER_PORT=str(port),
        OIDC_PROVIDER_CLIENTS=json.dumps(clients),
        PYTHONUNBUFFERED="1",
    )
    log = (data / "provider.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.oidc_provider"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    provider = OIDCProvider(data=data, port=port, proc=proc)
    provider.set_people({})
    discovery = f"{provider.issuer}/.well-known/openid-configuration"

    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(discovery, timeout=2):
                return provider
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                provider.stop()
                log_text = (data / "provider.log").read_text()
                raise AssertionError(f"the test provider did not start: {log_text}") from None
            time.sleep(0.2)
