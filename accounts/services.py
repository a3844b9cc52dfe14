"""Account operations: profiles, API tokens, first admin, the team (roles, invitations,
deactivation, password resets, quotas) and the daily quota check of chat turns."""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.formats import number_format
from django.utils.http import urlsafe_base64_encode
from django.utils.translation import gettext_lazy

from core.db.rows import first_row, raw_first
from core.exceptions import NotFound, ServiceError, Text, lazy_format

from . import selectors
from .meter import usage_meter
from .models import ApiToken, Membership, Profile, TokenScope


def profile_get(*, user: AbstractBaseUser) -> Profile:
    """The person's profile, made on first use. Every turn reads it: through `raw()`, which
    builds the instance without compiling a query (the ORM's `get()` took twice as long)."""
    found = raw_first(Profile, "FROM accounts_profile WHERE user_id = %s", [user.pk])
    return found or Profile.objects.get_or_create(user=user)[0]


def turn_account_joins(person: str) -> str:
    """The joins that read a turn's account beside another row (`first_row` with the part
    `(Profile, "ap")` and the columns `TURN_ACCOUNT_LIMITS`): the profile and the
    membership's own limits of the person whose id is the column `person`."""
    return (
        f" LEFT JOIN accounts_profile ap ON ap.user_id = {person}"
        f" LEFT JOIN accounts_membership am ON am.user_id = {person}"
    )


#: The membership's own limits, read with `turn_account_joins`.
TURN_ACCOUNT_LIMITS = ", am.daily_message_limit, am.daily_token_limit"


def turn_account_of(
    *, user: AbstractBaseUser, profile: Profile | None, messages: int | None, tokens: int | None
) -> tuple[selectors.Quota, Profile]:
    """`turn_account` from what its joins read: the profile is made on first use."""
    return selectors.quota_of(messages, tokens), profile or profile_get(user=user)


def turn_account(*, user: AbstractBaseUser) -> tuple[selectors.Quota, Profile]:
    """The person's daily limits (selectors.quota_for) and profile (`profile_get`) in one
    read: every chat turn needs both before its model call, and on PostgreSQL each read is
    a round trip to another process. A later turn reads them with its conversation
    (sessions_app.selectors.turn_session_read)."""
    people = get_user_model()._meta.db_table
    profile, messages, tokens = first_row(
        f"{TURN_ACCOUNT_LIMITS} FROM {people} u{turn_account_joins('u.id')} WHERE u.id = %s",
        [user.pk],
        (Profile, "ap"),
    ) or (None, None, None)
    return turn_account_of(user=user, profile=profile, messages=messages, tokens=tokens)


def profile_set_theme(*, user: AbstractBaseUser, theme: str) -> Profile:
    if theme not in Profile.Theme.values:
        raise ServiceError("invalid", gettext_lazy("Choose System, Light or Dark."))
    profile = profile_get(user=user)
    profile.theme = theme
    profile.save(update_fields=["theme"])
    return profile


def api_token_create(
    *, user: AbstractBaseUser, name: str, scopes: Iterable[str] | None = None
) -> tuple[ApiToken, str]:
    """Create a token and return it with its key; the key is never retrievable again.
    `scopes` are TokenScope values (None: all of them)."""
    name = name.strip()
    if not name:
        raise ServiceError("invalid", gettext_lazy("Give the token a name."))
    if len(name) > 100:
        raise ServiceError("invalid", gettext_lazy("Token names are at most 100 characters."))
    chosen = TokenScope.values if scopes is None else list(dict.fromkeys(scopes))
    unknown = [s for s in chosen if s not in TokenScope.values]
    if unknown:
        raise ServiceError(
            "invalid",
            lazy_format(
                gettext_lazy("Unknown scope %(scope)s. Scopes: %(scopes)s."),
                scope=repr(unknown[0]),
                scopes=", ".join(TokenScope.values),
            ),
        )
    if not chosen:
        raise ServiceError("invalid", gettext_lazy("Choose at least one scope for the token."))
    key = ApiToken.generate_key()
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name,
                prefix=key[: ApiToken.PREFIX_LEN],
                key_hash=ApiToken.hash_key(key),
                scopes=" ".join(chosen),
            )
    except IntegrityError:
        raise ServiceError(
            "duplicate",
            lazy_format(gettext_lazy("You already have a token named %(name)s."), name=repr(name)),
        ) from None
    return token, key


def api_token_use(*, key: str) -> ApiToken | None:
    """The token with this key, its user loaded, stamped as used now; None when the key is
    unknown (or revoked) or its owner is deactivated."""
    token = ApiToken.objects.select_related("user").filter(key_hash=ApiToken.hash_key(key)).first()
    if token is None or not token.user.is_active:
        return None
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token


def api_token_revoke(*, user: AbstractBaseUser, token_id: int) -> None:
    deleted, _rows = ApiToken.objects.filter(user=user, pk=token_id).delete()
    if not deleted:
        raise ServiceError("not_found", gettext_lazy("No such token."), status=404)


def superuser_exists() -> bool:
    return get_user_model().objects.filter(is_superuser=True).exists()


def admin_ensure(*, username: str, password: str | None) -> tuple[bool, str | None]:
    """Create the first superuser when there is none.

    Returns (created, generated password or None when the caller supplied one).
    """
    if superuser_exists():
        return False, None
    generated = None
    if not password:
        password = generated = secrets.token_urlsafe(12)
    get_user_model().objects.create_superuser(username=username, email="", password=password)
    return True, generated


def superuser_grant(*, username: str) -> Any:
    """Make the existing, active account `username` (any case) a superuser and team admin:
    how the first administrator arrives when password sign-in is off (they sign in with the
    provider first, then someone with a shell runs `manage.py make_superuser`)."""
    user = get_user_model().objects.filter(username__iexact=username.strip()).first()
    if user is None:
        raise ServiceError(
            "not_found",
            f"There is no account called {username!r}; they make it by signing in once.",
            status=404,
        )
    if not user.is_active:
        raise ServiceError("inactive", f"The account {user.get_username()!r} is deactivated.")
    with transaction.atomic():
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
        membership = _membership(user)
        if membership.role != Membership.Role.ADMIN:
            membership.role = Membership.Role.ADMIN
            membership.save(update_fields=["role", "updated_at"])
    return user


# --- Quotas -----------------------------------------------------------------------------


def _until(moment: datetime, now: datetime) -> Text:
    minutes = max(1, round((moment - now).total_seconds() / 60))
    hours, minutes = divmod(minutes, 60)
    if hours:
        return lazy_format(
            gettext_lazy("%(hours)s h %(minutes)s min"), hours=hours, minutes=minutes
        )
    return lazy_format(gettext_lazy("%(minutes)s min"), minutes=minutes)


def quota_check(*, user: AbstractBaseUser, quota: selectors.Quota | None = None) -> None:
    """Refuse a chat turn once the user's daily message or token quota is used up; `quota`:
    their limits when read already (`turn_account`).

    Counted from saved messages, so it holds across processes; two turns started at the
    same instant may both pass at the edge, which a daily budget can afford.
    """
    quota = quota or selectors.quota_for(user=user)
    if not quota.messages and not quota.tokens:
        return
    now = timezone.now()
    start, resets_at = selectors.day_bounds(now)
    used = usage_meter().usage_since(user=user, since=start)
    local_reset = timezone.localtime(resets_at)
    # Marked, not translated: the refusal is said in the language of whoever reads it.
    when = lazy_format(
        gettext_lazy("%(time)s %(zone)s (in %(wait)s)"),
        time=f"{local_reset:%H:%M}",
        zone=local_reset.tzname(),
        wait=_until(resets_at, now),
    )
    if quota.messages and used.messages >= quota.messages:
        raise ServiceError(
            "quota_exceeded",
            lazy_format(
                gettext_lazy(
                    "You have sent %(used)s messages today; your daily limit is %(limit)s. "
                    "It resets at %(when)s."
                ),
                used=number_format(used.messages, force_grouping=True),
                limit=number_format(quota.messages, force_grouping=True),
                when=when,
            ),
            status=429,
            limit=quota.messages,
            used=used.messages,
            resets_at=resets_at.isoformat(),
        )
    if quota.tokens and used.tokens >= quota.tokens:
        raise ServiceError(
            "quota_exceeded",
            lazy_format(
                gettext_lazy(
                    "Your answers used %(used)s tokens today; your daily limit is %(limit)s "
                    "tokens. It resets at %(when)s."
                ),
                used=number_format(used.tokens, force_grouping=True),
                limit=number_format(quota.tokens, force_grouping=True),
                when=when,
            ),
            status=429,
            limit=quota.tokens,
            used=used.tokens,
            resets_at=resets_at.isoformat(),
        )


# --- The team ---------------------------------------------------------------------------


def _check_admin(actor: Any) -> None:
    # Not an admin: the team pages do not exist for you (404, like other people's rows).
    if not selectors.is_team_admin(actor):
        raise NotFound(gettext_lazy("page"))


def access_member(*, actor: Any, user_id: int) -> Any:
    """The account `user_id`, for a team admin to manage. NotFound for non-admins and
    missing ids; refused when a non-superuser admin reaches for a superuser."""
    _check_admin(actor)
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound(gettext_lazy("person"))
    if user.is_superuser and not actor.is_superuser:
        raise ServiceError(
            "forbidden",
            gettext_lazy("Only a superuser can change a superuser's account."),
            status=403,
        )
    return user


def _check_passwords_on() -> None:
    # Invitations and resets are links to choose a password: nothing to hand out while
    # password sign-in is off (people get their account when they first sign in).
    if not settings.HERMES_PASSWORD_LOGIN:
        raise ServiceError(
            "password_login_off",
            gettext_lazy(
                "Password sign-in is off: people get their account the first time they sign in."
            ),
            status=409,
        )


def _membership(user: Any) -> Membership:
    membership, _created = Membership.objects.get_or_create(user=user)
    return membership


def set_password_path(user: Any) -> str:
    """A one-time link (path) where `user` chooses a password; it stops working once used,
    when the password changes, or after PASSWORD_RESET_TIMEOUT."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return reverse("password_set", kwargs={"uidb64": uid, "token": token})


def member_create(
    *, actor: Any, username: str, email: str = "", role: str = Membership.Role.MEMBER
) -> tuple[Any, str]:
    """Create an account without a password; returns it with its invitation link (path)."""
    _check_admin(actor)
    _check_passwords_on()
    User = get_user_model()
    username = (username or "").strip()
    email = (email or "").strip()
    if not username:
        raise ServiceError("invalid", gettext_lazy("Give the person a username."))
    if len(username) > 150:
        raise ServiceError("invalid", gettext_lazy("Usernames are at most 150 characters."))
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError:
        raise ServiceError(
            "invalid", gettext_lazy("Usernames may contain letters, digits and @ . + - _ only.")
        ) from None
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise ServiceError(
                "invalid",
                lazy_format(gettext_lazy("%(email)s is not an email address."), email=repr(email)),
            ) from None
    if role not in Membership.Role.values:
        raise ServiceError("invalid", gettext_lazy("The role is admin or member."))
    if User.objects.filter(username__iexact=username).exists():
        raise ServiceError(
            "duplicate",
            lazy_format(
                gettext_lazy("There is already someone called %(name)s."), name=repr(username)
            ),
        )
    try:
        with transaction.atomic():
            user = User(username=username, email=email)
            user.set_unusable_password()
            user.save()
            Membership.objects.create(user=user, role=role, invited_by=actor)
    except IntegrityError:
        raise ServiceError(
            "duplicate",
            lazy_format(
                gettext_lazy("There is already someone called %(name)s."), name=repr(username)
            ),
        ) from None
    return user, set_password_path(user)


def member_invite_link(*, actor: Any, user_id: int) -> str:
    """A fresh invitation link for someone who has not chosen a password yet."""
    user = access_member(actor=actor, user_id=user_id)
    _check_passwords_on()
    if user.has_usable_password():
        raise ServiceError(
            "has_password", gettext_lazy("This person already has a password; reset it instead.")
        )
    return set_password_path(user)


def member_password_reset(*, actor: Any, user_id: int) -> str:
    """Void the password (ending the person's sessions and sockets) and return a link
    where they choose a new one. The admin never learns the password."""
    user = access_member(actor=actor, user_id=user_id)
    _check_passwords_on()
    if user.pk == actor.pk:
        raise ServiceError(
            "forbidden", gettext_lazy("Change your own password on the Account page."), status=403
        )
    with transaction.atomic():
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return set_password_path(user)


def member_set_active(*, actor: Any, user_id: int, active: bool) -> Any:
    user = access_member(actor=actor, user_id=user_id)
    if user.pk == actor.pk and not active:
        raise ServiceError(
            "forbidden", gettext_lazy("You cannot deactivate your own account."), status=403
        )
    if user.is_active != active:
        with transaction.atomic():
            user.is_active = active
            # Saving is_active=False also closes the person's open sockets (accounts.signals).
            user.save(update_fields=["is_active"])
    return user


def member_set_role(*, actor: Any, user_id: int, role: str) -> Membership:
    user = access_member(actor=actor, user_id=user_id)
    if role not in Membership.Role.values:
        raise ServiceError("invalid", gettext_lazy("The role is admin or member."))
    if user.pk == actor.pk and role != Membership.Role.ADMIN and not actor.is_superuser:
        raise ServiceError(
            "forbidden",
            gettext_lazy("You cannot remove your own admin role; ask another admin."),
            status=403,
        )
    with transaction.atomic():
        membership = _membership(user)
        if membership.role != role:
            membership.role = role
            membership.save(update_fields=["role", "updated_at"])
    return membership


def _limit(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        if name == "message":
            raise ServiceError(
                "invalid", gettext_lazy("The message limit is a whole number, 0 or more.")
            )
        raise ServiceError("invalid", gettext_lazy("The token limit is a whole number, 0 or more."))
    return value


def member_set_quota(
    *,
    actor: Any,
    user_id: int,
    daily_message_limit: int | None,
    daily_token_limit: int | None,
) -> Membership:
    """Set a person's daily limits: None = the team default, 0 = no limit."""
    user = access_member(actor=actor, user_id=user_id)
    messages = _limit(daily_message_limit, "message")
    tokens = _limit(daily_token_limit, "token")
    with transaction.atomic():
        membership = _membership(user)
        membership.daily_message_limit = messages
        membership.daily_token_limit = tokens
        membership.save(update_fields=["daily_message_limit", "daily_token_limit", "updated_at"])
    return membership


def login_sessions_expire() -> int:
    """Delete expired login sessions (what `manage.py clearsessions` does); returns how
    many."""
    from django.contrib.sessions.models import Session as LoginSession

    deleted, _rows = LoginSession.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted
