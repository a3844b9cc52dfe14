"""API keys at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a key from settings.

``HERMES_ENCRYPTION_KEY`` is any secret text; several, comma-separated, allow a rotation
(the first encrypts, every one decrypts). Unset, the key is derived from ``SECRET_KEY``
(storing a key then logs a warning and the admin shows one): changing SECRET_KEY then makes
stored API keys unreadable, which the admin reports on the entry ("enter the key again")
and a chat reports as an error.
"""

from __future__ import annotations

import base64
import hashlib
import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

logger = logging.getLogger(__name__)

_CONTEXT = b"hermes-web model api keys\x00"


class KeyUnreadable(Exception):
    """A stored API key that the configured encryption key(s) cannot decrypt."""


def _fernet_key(secret: str) -> bytes:
    # Any text becomes a valid 32-byte Fernet key; the context keeps it apart from other uses.
    return base64.urlsafe_b64encode(hashlib.sha256(_CONTEXT + secret.encode("utf-8")).digest())


FALLBACK_WARNING = (
    "HERMES_ENCRYPTION_KEY is not set: API keys are encrypted with a key derived from "
    "SECRET_KEY and become unreadable if SECRET_KEY changes. Set HERMES_ENCRYPTION_KEY."
)


def uses_fallback() -> bool:
    return not str(settings.HERMES_ENCRYPTION_KEY or "").strip()


def secrets_in_use() -> list[str]:
    configured = [s.strip() for s in str(settings.HERMES_ENCRYPTION_KEY or "").split(",")]
    return [s for s in configured if s] or [str(settings.SECRET_KEY)]


def _cipher() -> MultiFernet:
    return MultiFernet([Fernet(_fernet_key(secret)) for secret in secrets_in_use()])


def encrypt(plain: str) -> str:
    """The token stored for ``plain`` ("" stays "": no key)."""
    if not plain:
        return ""
    if uses_fallback():
        logger.warning(FALLBACK_WARNING)
    return _cipher().encrypt(plain.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    """The key stored as ``token``; raises KeyUnreadable when no configured key fits."""
    if not token:
        return ""
    try:
        return _cipher().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError) as exc:
        raise KeyUnreadable(
            "The stored API key cannot be decrypted with the current HERMES_ENCRYPTION_KEY "
            "(was it or SECRET_KEY changed?). Enter the key again."
        ) from exc
