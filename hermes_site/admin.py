"""Site-wide admin registrations (loaded by admin autodiscovery)."""

from __future__ import annotations

from .privacy import admin as privacy_admin  # noqa: F401  (accounts, exports, audit log)
