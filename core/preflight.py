"""Startup checks that turn a wrong DATABASE_URL or REDIS_URL into one clear message."""

from __future__ import annotations

import redis
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.utils import Error as DatabaseError


def _describe_database() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return str(s["NAME"])
    return f"{s.get('HOST') or 'localhost'}:{s.get('PORT') or 'default port'}/{s['NAME']}"


def check_database() -> None:
    try:
        connection.ensure_connection()
    except DatabaseError as exc:
        raise ImproperlyConfigured(
            f"DATABASE_URL: cannot connect to {connection.vendor} database "
            f"{_describe_database()}: {str(exc).strip().splitlines()[0]}"
        ) from exc


def check_redis(url: str) -> None:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
        client.ping()
        client.close()
    except (redis.RedisError, ValueError, OSError) as exc:
        raise ImproperlyConfigured(f"REDIS_URL: cannot reach {url}: {exc}") from exc
