"""Fixtures of the deployment tests: the chat fixtures (scripted model, websocket clients)
are shared with tests/chat."""

from __future__ import annotations

import pytest

from tests.chat.conftest import scripted_settings, sockets  # noqa: F401


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # These tests log in (and fail to) dozens of times; what they check does not depend
    # on how slow the hash is.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
