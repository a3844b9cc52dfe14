"""The accounts app's tables in the privacy registry (core/privacy/registry.py)."""

from __future__ import annotations

from typing import Any

from django.db.models import Model

from core.privacy import registry
from core.privacy.serialize import row_dict

from .models import ApiToken, LoginThrottle, Membership, Profile, SignInIdentity


def _api_token_dict(obj: Model) -> dict[str, Any]:
    # Only the name and the first characters of a token, never its hash (as Discourse's
    # user archive truncates auth tokens).
    return row_dict(obj, exclude=("key_hash",))


def register() -> None:
    """Called from the app's ready()."""
    registry.register(
        Profile, owner_path="user", section="profile", category="Profile and agent settings"
    )
    registry.register(
        ApiToken,
        owner_path="user",
        section="api_tokens",
        category="API tokens (names and first characters only)",
        serialize=_api_token_dict,
    )
    registry.register(
        Membership,
        owner_path="user",
        section="membership",
        category="Team role and daily quotas",
        provided=False,
        content=False,
    )
    registry.register(
        SignInIdentity,
        owner_path="user",
        section="sign_in_identities",
        category="Single sign-on identities (the provider and its id for you)",
        provided=False,
        content=False,
    )
    registry.not_personal(
        LoginThrottle,
        reason="keyed hashes of addresses and usernames, no link to an account; expires",
    )
