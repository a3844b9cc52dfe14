from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class McpServerConfig(AppConfig):
    name = "mcp_server"
    verbose_name = _("MCP server")
