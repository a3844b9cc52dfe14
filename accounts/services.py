"""Account operations: profiles, API tokens, first admin."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction

from hermes_site.exceptions import ServiceError

from .models import ApiToken, Profile


def profile_get(*, user: AbstractBaseUser) -> Profile:
    profile, _ = Profile.objects.get_or_create(user=user)
    return profile


def api_token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """Create a token and return it with its key; the key is never retrievable again."""
    name = name.strip()
    if not name:
        raise ServiceError("invalid", "Give the token a name.")
    if len(name) > 100:
        raise ServiceError("invalid", "Token names are at most 100 characters.")
    key = ApiToken.generate_key()
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name,
                prefix=key[: ApiToken.PREFIX_LEN],
                key_hash=ApiToken.hash_key(key),
            )
    except IntegrityError:
        raise ServiceError("duplicate", f"You already have a token named {name!r}.") from None
    return token, key


def api_token_revoke(*, user: AbstractBaseUser, token_id: int) -> None:
    deleted, _ = ApiToken.objects.filter(user=user, pk=token_id).delete()
    if not deleted:
        raise ServiceError("not_found", "No such token.", status=404)


def admin_ensure(*, username: str, password: str | None) -> tuple[bool, str | None]:
    """Create the first superuser when there is none.

    Returns (created, generated password or None when the caller supplied one).
    """
    User = get_user_model()
    if User.objects.filter(is_superuser=True).exists():
        return False, None
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    User.objects.create_superuser(username=username, email="", password=password)
    return True, generated
