"""ASGI entry point: HTTP through Django (but /mcp/, the MCP server), websockets through
Channels."""

from __future__ import annotations

import os
import sys

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_site.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: consumers import models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from core.db.checkpoint import sqlite_checkpoint_in_background  # noqa: E402
from core.leases import recover_on_startup  # noqa: E402
from core.origin import SameOriginValidator  # noqa: E402
from mcp_server.routing import with_mcp  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402

# A claim's statements each hand the interpreter lock back from the event loop: see the
# setting's note.
sys.setswitchinterval(settings.HERMES_ASGI_SWITCH_INTERVAL_MS / 1000)
# With SQLite, checkpoints run in a thread of their own, not in a turn's commit.
sqlite_checkpoint_in_background()
# Leases of this host's dead processes (an ASGI server killed mid-answer) are released
# and their answers marked interrupted before this one serves anyone.
recover_on_startup("web")

application = ProtocolTypeRouter(
    {
        # /mcp/ (streamable HTTP, personal API tokens) beside Django.
        "http": with_mcp(django_asgi_app),
        # Only from the site's own origin (scheme, host and port) or a trusted one.
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
