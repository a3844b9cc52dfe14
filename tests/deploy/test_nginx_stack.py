"""The team deployment end to end: PostgreSQL, Redis, two ASGI processes (`make serve`),
one Celery worker (`make worker`) and nginx (deploy/nginx, TLS) on loopback ports.

Through nginx: log in (CSRF over HTTPS, as nginx tells Django with X-Forwarded-Proto), open
websockets until one tab sits on each ASGI process, run a chat turn on process A while the
tab on process B follows the stream, run a background task on the worker that reaches
both tabs, and check that a foreign Origin, a wrong Host and brute-forced logins are
refused. Everything started is stopped, and checked gone.

Run by .ci/run (`HERMES_STACK_TEST=1`); `make test` skips it, as it takes ~45 s.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import wait_for
from tests.deploy.stack import HOST, Proc, Stack, missing_prerequisites, running_stack

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("HERMES_STACK_TEST") != "1",
        reason="the nginx stack test runs in .ci/run (set HERMES_STACK_TEST=1)",
    ),
]

REPLY = (
    "Nginx hands this answer to one process while another process's tab reads every word "
    "of it, in order, through the Redis channel layer."
)
PASSWORD = "stack test passphrase 7"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Any:
    why = missing_prerequisites()
    if why:
        pytest.fail(f"the stack test needs: {why}")
    with running_stack(
        Path(tmp_path_factory.mktemp("stack")), model_reply=REPLY, model_chunk_delay=0.03
    ) as running:
        running.manage(
            "shell",
            "-c",
            "from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user('alice', password={PASSWORD!r})",
        )
        yield running
    assert running.leftovers == [], f"processes outlived the stack: {running.leftovers}"


class Browser:
    """An HTTPS client that reaches nginx on 127.0.0.1 but speaks to hermes.test (SNI,
    Host, Origin), keeping cookies like a browser."""

    def __init__(self, stack: Stack, *, host: str = HOST, sni: str = HOST) -> None:
        self.stack = stack
        self.sni = sni
        self.client = httpx.Client(
            base_url=f"https://127.0.0.1:{stack.nginx_port}",
            headers={"Host": f"{host}:{stack.nginx_port}"},
            verify=stack.ssl_context(),
            follow_redirects=False,
            timeout=20,
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.request(method, path, extensions={"sni_hostname": self.sni}, **kwargs)

    def login(self, username: str, password: str, **headers: str) -> httpx.Response:
        page = self.request("GET", "/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return self.request(
            "POST",
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={
                "Origin": self.stack.origin,
                "Referer": f"{self.stack.origin}/accounts/login/",
                **headers,
            },
        )

    def cookie_header(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.client.cookies.jar)


def ws_opens(proc: Proc) -> int:
    return proc.text().count('"message": "websocket open /ws/chat/"')


async def open_socket(stack: Stack, cookie: str, *, origin: str | None = None) -> Any:
    import websockets

    return await websockets.connect(
        f"wss://{HOST}:{stack.nginx_port}/ws/chat/",
        host="127.0.0.1",
        port=stack.nginx_port,
        ssl=stack.ssl_context(),
        origin=origin or stack.origin,
        additional_headers={"Cookie": cookie},
        max_size=2**22,
        open_timeout=10,
    )


async def tab_on_each_process(stack: Stack, cookie: str) -> dict[str, Any]:
    """Open sockets through nginx until one sits on each ASGI process; the daphne logs
    (one JSON line per opened socket) say where each landed."""
    tabs: dict[str, Any] = {}
    extra = []
    for _ in range(8):
        before = {p.name: ws_opens(p) for p in stack.asgi()}
        ws = await open_socket(stack, cookie)
        landed = None
        for _ in range(50):
            grown = [p.name for p in stack.asgi() if ws_opens(p) > before[p.name]]
            if grown:
                landed = grown[0]
                break
            await asyncio.sleep(0.1)
        assert landed, "no ASGI process logged the websocket"
        if landed in tabs:
            extra.append(ws)
        else:
            tabs[landed] = ws
        if len(tabs) == len(stack.asgi()):
            break
    for ws in extra:
        await ws.close()
    assert len(tabs) == 2, f"nginx sent every socket to the same process: {list(tabs)}"
    return tabs


async def receive_until(ws: Any, kind: str, *, timeout: float = 30) -> list[dict[str, Any]]:
    events = []
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {kind} event; got {[e['type'] for e in events]}"
        event = json.loads(await asyncio.wait_for(ws.recv(), remaining))
        events.append(event)
        if event["type"] == kind:
            return events


def test_through_nginx_a_turn_on_one_process_streams_to_a_tab_on_the_other(stack):
    browser = Browser(stack)
    response = browser.login("alice", PASSWORD)
    # CSRF passed over HTTPS (nginx said so with X-Forwarded-Proto): a redirect, not 403.
    assert response.status_code == 302, response.text[:500]
    assert response.headers["location"] == "/"
    assert "x-request-id" in response.headers
    session_cookie = browser.client.cookies.jar
    assert all(c.secure for c in session_cookie if c.name in ("sessionid", "csrftoken"))
    assert "max-age=31536000" in browser.request("GET", "/").headers["strict-transport-security"]
    cookie = browser.cookie_header()
    user_id = browser.request("GET", "/api/me/").json()["id"]
    # Static files come through nginx from whitenoise.
    css = browser.request("GET", "/static/css/team.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], Any]:
        tabs = await tab_on_each_process(stack, cookie)
        (name_a, tab_a), (name_b, tab_b) = sorted(tabs.items())
        # A first turn on A makes the conversation; B then follows it.
        await tab_a.send(json.dumps({"type": "chat.send", "session": None, "text": "Hello"}))
        first = await receive_until(tab_a, "assistant.done")
        session = first[0]["session"]
        await tab_b.send(json.dumps({"type": "chat.subscribe", "session": session}))
        await asyncio.sleep(0.5)  # the subscription reaches Redis before the next turn
        await tab_a.send(json.dumps({"type": "chat.send", "session": session, "text": "Again"}))
        on_a = await receive_until(tab_a, "assistant.done")
        on_b = await receive_until(tab_b, "assistant.done")

        # With sockets open, each process still answers its health check (a channel
        # layer waiter on its own prefix used to hang behind the sockets' one).
        for port in stack.asgi_ports:
            health = await asyncio.to_thread(
                httpx.get, f"http://127.0.0.1:{port}/healthz", timeout=10
            )
            assert health.json()["components"]["channel_layer"]["ok"], health.text

        # Quiet for longer than the layer's 5 s blocking pop: the sockets must survive it
        # (with redis-py 8's default 5 s socket timeout they were torn down).
        await asyncio.sleep(7)

        # A background task on the worker reaches the tabs on both processes.
        from celery import Celery

        sender = Celery(broker=stack.env["REDIS_URL"])
        sender.send_task(
            "hermes_site.deliver_notice",
            args=[user_id, "memory_saved", "Hello from the worker", None],
            queue=stack.env["HERMES_CELERY_QUEUE"],
        )
        notices = [(await receive_until(tab, "notice"))[-1] for tab in (tab_a, tab_b)]

        # The websocket message size limit answers with a clear error, not a dropped tab.
        await tab_b.send(
            json.dumps({"type": "chat.send", "session": session, "text": "x" * 300_000})
        )
        too_large = (await receive_until(tab_b, "error"))[-1]
        for tab in (tab_a, tab_b):
            await tab.close()
        return on_a, on_b, (notices, too_large, name_a, name_b)

    on_a, on_b, (notices, too_large, name_a, name_b) = asyncio.run(scenario())
    assert name_a != name_b
    text_a = "".join(e["text"] for e in on_a if e["type"] == "assistant.delta")
    text_b = "".join(e["text"] for e in on_b if e["type"] == "assistant.delta")
    assert text_a == text_b == REPLY
    seqs_b = [e["seq"] for e in on_b if "seq" in e]
    assert seqs_b == list(range(1, len(seqs_b) + 1)), "the other process's tab missed events"
    assert on_b[-1]["status"] == "complete"
    assert [n["text"] for n in notices] == ["Hello from the worker"] * 2
    assert too_large["code"] == "message_too_large"
    # The notice can arrive before the worker has logged the task's success.
    wait_for(
        lambda: re.search(
            r"hermes_site\.deliver_notice\[[^]]+\] succeeded", stack.procs["worker"].text()
        ),
        timeout=10,
        what="the worker to log the task",
    )


def test_a_foreign_origin_cannot_open_a_websocket(stack):
    import websockets

    browser = Browser(stack)
    assert browser.login("alice", PASSWORD).status_code == 302

    async def attempt(origin: str) -> int:
        try:
            ws = await open_socket(stack, browser.cookie_header(), origin=origin)
        except websockets.InvalidStatus as exc:
            return exc.response.status_code
        await ws.close()
        return 101

    assert asyncio.run(attempt("https://evil.example")) == 403
    assert asyncio.run(attempt(f"https://{HOST}.evil.example:{stack.nginx_port}")) == 403
    assert asyncio.run(attempt(stack.origin)) == 101


def test_a_wrong_host_gets_no_answer(stack):
    # Right TLS name, wrong Host header: nginx's catch-all closes without a response.
    with pytest.raises(httpx.RemoteProtocolError):
        Browser(stack, host="evil.example").request("GET", "/accounts/login/")
    # A TLS name that is not ours: the handshake itself is refused.
    with pytest.raises(httpx.ConnectError) as refused:
        Browser(stack, host="evil.example", sni="evil.example").request("GET", "/")
    assert isinstance(refused.value.__cause__, ssl.SSLError) or "SSL" in str(refused.value)
    # Straight to an ASGI process, Django refuses the unknown host too.
    port = stack.asgi_ports[0]
    response = httpx.get(
        f"http://127.0.0.1:{port}/accounts/login/", headers={"Host": "evil.example"}
    )
    assert response.status_code == 400


def test_brute_force_through_nginx_is_locked_out_despite_rotated_forwarded_for(stack):
    statuses = [
        Browser(stack)
        .login("alice", f"guess-{i}", **{"X-Forwarded-For": f"10.9.{i}.{i}"})
        .status_code
        for i in range(7)
    ]
    assert statuses[:5] == [200] * 5
    assert statuses[5:] == [429, 429]
    locked = Browser(stack).login("alice", PASSWORD)
    assert locked.status_code == 429
    assert "Too many login attempts" in locked.text


class _SniTransport(httpx.AsyncHTTPTransport):
    """Connects to 127.0.0.1 but asks TLS for hermes.test, as Browser does."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions = {**request.extensions, "sni_hostname": HOST}
        return await super().handle_async_request(request)


def test_an_mcp_client_reaches_its_memory_through_nginx(stack):
    import warnings

    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    key = stack.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model; "
        "from accounts.services import api_token_create; "
        "print(api_token_create(user=get_user_model().objects.get(username='alice'), "
        "name='desktop', scopes=['memory:read', 'memory:write'])[1])",
    ).split()[-1]

    def client_factory(headers=None, timeout=None, auth=None) -> httpx.AsyncClient:
        transport = _SniTransport(verify=stack.ssl_context())
        return httpx.AsyncClient(headers=headers, timeout=timeout, auth=auth, transport=transport)

    async def work() -> tuple[Any, str]:
        async with streamablehttp_client(
            f"https://127.0.0.1:{stack.nginx_port}/mcp/",
            headers={"Authorization": f"Bearer {key}", "Host": f"{HOST}:{stack.nginx_port}"},
            httpx_client_factory=client_factory,
        ) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                added = await session.call_tool(
                    "memory", {"action": "add", "target": "user", "content": "Alice uses MCP."}
                )
                text = await session.read_resource("hermes://memory/USER.md")
                return added, text.contents[0].text

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        added, text = asyncio.run(work())
    assert not added.isError, added.content[0].text
    assert text == "Alice uses MCP."
    assert any('"path": "/mcp/"' in p.text() for p in stack.asgi())
