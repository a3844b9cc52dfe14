"""ASGI entry point of a team deployment behind a reverse proxy (`make serve`, the systemd
units in deploy/): the application of `hermes_site.asgi`, with proxy headers believed only
from HERMES_TRUSTED_PROXIES and a log line per websocket."""

from __future__ import annotations

from core.logs import WebsocketLogMiddleware
from core.proxy import TrustedProxyMiddleware

from .asgi import application as _application

# The proxy check runs first, so the websocket log and Channels see the real client.
application = TrustedProxyMiddleware(WebsocketLogMiddleware(_application))
