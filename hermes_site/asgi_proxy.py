"""ASGI entry point of a team deployment behind a reverse proxy (`make serve`, the systemd
units in deploy/): the application of `hermes_site.asgi`, with proxy headers believed only
from HERMES_TRUSTED_PROXIES and a log line per websocket."""

from __future__ import annotations

from .asgi import application as _application
from .logs import WebsocketLogMiddleware
from .proxy import TrustedProxyMiddleware

# The proxy check runs first, so the websocket log and Channels see the real client.
application = TrustedProxyMiddleware(WebsocketLogMiddleware(_application))
