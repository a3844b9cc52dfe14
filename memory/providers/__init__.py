"""Memory providers: the built-in one plus at most one external provider (see manager)."""

from __future__ import annotations

from .base import MemoryProvider
from .manager import MemoryManager, active_provider_name

__all__ = ["MemoryManager", "MemoryProvider", "active_provider_name"]
