"""The database: SQLite under var/ by default, PostgreSQL for a team."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

from .core import BASE_DIR, VAR_DIR
from .declare import declare_float, declare_int, declare_str

_SUPPORTED_ENGINES = ("django.db.backends.sqlite3", "django.db.backends.postgresql")

_url = declare_str(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
    help="sqlite:///path or postgres://user:password@host:port/name.",
    default_doc="`sqlite:///var/db.sqlite3`",
)
# Lets two test runs share a machine without sharing a test database.
_test_db_suffix = declare_str(
    "HERMES_TEST_DB_SUFFIX", "", help="Suffix of the test database's name (test runs only)."
)
_sqlite_timeout = declare_float(
    "HERMES_SQLITE_TIMEOUT", 20.0, min=0, help="SQLite busy timeout in seconds."
)
_sqlite_transaction_mode = declare_str(
    "HERMES_SQLITE_TRANSACTION_MODE",
    "IMMEDIATE",
    help="SQLite's BEGIN mode for Django transactions.",
)
_pg_conn_max_age = declare_int(
    "HERMES_DB_CONN_MAX_AGE",
    60,
    min=0,
    help="Seconds a PostgreSQL connection is reused (0: one per request).",
)

try:
    _db: dict[str, Any] = environ.Env.db_url_config(_url)
except (ImproperlyConfigured, ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from exc
if _db.get("ENGINE") not in _SUPPORTED_ENGINES:
    raise ImproperlyConfigured(
        "DATABASE_URL must be sqlite:///path or postgres://user:password@host:port/name "
        f"(got a {_url.split(':')[0]}: URL)."
    )
if _db["ENGINE"] == "django.db.backends.sqlite3":
    _db_name = Path(_db["NAME"])
    if not _db_name.is_absolute():
        _db_name = (BASE_DIR / _db_name).resolve()
    _db["NAME"] = str(_db_name)
    _db["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so concurrent writers wait for the busy
        # timeout instead of failing with "database is locked" on lock upgrade.
        "timeout": _sqlite_timeout,
        "transaction_mode": _sqlite_transaction_mode,
        "init_command": "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL;"
        "PRAGMA secure_delete=ON;",
    }
    # A file, not :memory:, so tests see real locking and other processes can share it.
    _db["TEST"] = {"NAME": str(_db_name.with_name(f"test{_test_db_suffix}_{_db_name.name}"))}
    # Opening a SQLite connection costs its PRAGMAs; keep one per thread.
    _db["CONN_MAX_AGE"] = None
    _db["CONN_HEALTH_CHECKS"] = True
else:
    # Django's PostgreSQL backend, health-checking only connections that were idle
    # (core/db/postgresql/base.py).
    _db["ENGINE"] = "core.db.postgresql"
    _db["TEST"] = {"NAME": f"test{_test_db_suffix}_{_db['NAME']}"}
    _db["CONN_MAX_AGE"] = _pg_conn_max_age
    _db["CONN_HEALTH_CHECKS"] = True
    _db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
