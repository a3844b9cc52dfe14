"""Who a signed-in person is here, from the claims their provider vouched for.

Admission first (the rules hold for new and known people alike, at every sign-in): with
HERMES_OIDC_ALLOWED_DOMAINS only a verified e-mail address at one of them, with
HERMES_OIDC_ALLOWED_GROUPS only members of one of them (or of the admin group); both when
both are set.

Then the account, found by the provider's subject id (`sub`, stable; names and addresses
change), never by a name the provider sends:
1. a subject seen before signs in to the account it was linked to;
2. a new subject, with HERMES_OIDC_LINK_BY_EMAIL, takes over the one account whose e-mail
   address is the person's *verified* address (a provider that lets people type any
   address without verifying it could otherwise hand out other people's accounts);
3. else, with HERMES_OIDC_CREATE_USERS, a new account named by HERMES_OIDC_USERNAME_CLAIM
   (no password; a name already taken is refused, not merged).
Deactivated accounts are refused. At every sign-in a verified e-mail address is copied to
the account, and with HERMES_OIDC_ADMIN_GROUP the team role follows the groups claim.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from ..models import Membership, SignInIdentity
from .errors import SignInRefused
from .provider import provider_name

logger = logging.getLogger(__name__)


def claim(claims: dict[str, Any], name: str) -> Any:
    """The claim `name`; a dotted name (`realm_access.roles`) walks into nested objects
    when no claim has that exact name (namespaced claims are URLs full of dots)."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def groups_of(value: Any) -> set[str] | None:
    """A groups claim as a set (a list, or one string separated by commas or spaces), each
    without the leading `/` of Keycloak's full group paths; None when it was not sent."""
    if value is None:
        return None
    items = value if isinstance(value, list) else re.split(r"[,\s]+", str(value))
    return {str(item).strip().lstrip("/") for item in items if str(item).strip().lstrip("/")}


@dataclass(frozen=True)
class Person:
    subject: str
    username: Any
    #: A well-formed address, or "".
    email: str
    email_verified: bool
    groups: set[str] | None

    @property
    def trusted_email(self) -> str:
        """The address when the provider vouches for it, else ""."""
        return self.email if self.email_verified else ""


def person_from(claims: dict[str, Any]) -> Person:
    email = claim(claims, settings.HERMES_OIDC_EMAIL_CLAIM)
    email = email.strip() if isinstance(email, str) else ""
    try:
        validate_email(email)
    except ValidationError:
        email = ""
    verified = claims.get("email_verified")
    return Person(
        subject=str(claims.get("sub") or ""),
        username=claim(claims, settings.HERMES_OIDC_USERNAME_CLAIM),
        email=email,
        email_verified=bool(email)
        and (verified is True or verified == "true" or settings.HERMES_OIDC_TRUST_EMAIL),
        groups=groups_of(claim(claims, settings.HERMES_OIDC_GROUPS_CLAIM)),
    )


def _refused(code: str, reason: str) -> SignInRefused:
    logger.warning("single sign-on refused: %s", code)
    return SignInRefused(
        gettext("%(reason)s Ask your team's administrator if you should have access.")
        % {"reason": reason},
        code=code,
    )


def check_admission(person: Person) -> None:
    """Refuse people the site's domain and group rules keep out."""
    name = provider_name()
    domains = settings.HERMES_OIDC_ALLOWED_DOMAINS
    if domains:
        allowed = ", ".join(domains)
        if not person.email:
            raise _refused(
                "no_email",
                gettext(
                    "%(name)s did not send your e-mail address (claim %(claim)s), and only "
                    "addresses at %(allowed)s may sign in here."
                )
                % {
                    "name": name,
                    "claim": repr(settings.HERMES_OIDC_EMAIL_CLAIM),
                    "allowed": allowed,
                },
            )
        if not person.email_verified:
            raise _refused(
                "email_unverified",
                gettext(
                    "%(name)s has not verified your e-mail address %(email)s, and only "
                    "verified addresses at %(allowed)s may sign in here."
                )
                % {"name": name, "email": person.email, "allowed": allowed},
            )
        if person.email.rsplit("@", 1)[1].lower() not in domains:
            raise _refused(
                "domain_not_allowed",
                gettext(
                    "You signed in to %(name)s as %(email)s, but only addresses at %(allowed)s "
                    "may use Hermes here. Sign out of %(name)s and sign in with that account."
                )
                % {"name": name, "email": person.email, "allowed": allowed},
            )
    groups = settings.HERMES_OIDC_ALLOWED_GROUPS
    if groups:
        if person.groups is None:
            raise _refused(
                "no_groups",
                gettext(
                    "%(name)s did not say which groups you are in (claim %(claim)s), and only "
                    "members of %(groups)s may sign in here."
                )
                % {
                    "name": name,
                    "claim": repr(settings.HERMES_OIDC_GROUPS_CLAIM),
                    "groups": ", ".join(groups),
                },
            )
        admitted = {*groups, settings.HERMES_OIDC_ADMIN_GROUP} - {""}
        if not person.groups & admitted:
            raise _refused(
                "group_not_allowed",
                gettext(
                    "Only members of %(groups)s may use Hermes here, and %(name)s does not "
                    "list you in any of them."
                )
                % {"groups": ", ".join(groups), "name": name},
            )


def _active(user: Any) -> Any:
    if not user.is_active:
        raise _refused(
            "deactivated",
            gettext("Your account %(name)s here is deactivated.")
            % {"name": repr(user.get_username())},
        )
    return user


def _linked_by_email(person: Person, issuer: str) -> Any:
    """The account whose address is the person's verified one (HERMES_OIDC_LINK_BY_EMAIL),
    or None."""
    if not settings.HERMES_OIDC_LINK_BY_EMAIL or not person.trusted_email:
        return None
    matches = list(get_user_model().objects.filter(email__iexact=person.trusted_email)[:2])
    if not matches:
        return None
    if len(matches) > 1:
        raise _refused(
            "email_ambiguous",
            gettext(
                "Several accounts here have the address %(email)s, so your sign-in cannot "
                "tell which one is yours."
            )
            % {"email": person.trusted_email},
        )
    user = _active(matches[0])
    if SignInIdentity.objects.filter(user=user, issuer=issuer).exists():
        raise _refused(
            "email_account_linked",
            gettext(
                "The account with the address %(email)s is already linked to another "
                "%(name)s account."
            )
            % {"email": person.trusted_email, "name": provider_name()},
        )
    logger.info("single sign-on linked a new subject to account %s by e-mail", user.pk)
    return user


def _username(person: Person) -> str:
    claim_name = settings.HERMES_OIDC_USERNAME_CLAIM
    value = person.username
    if not isinstance(value, str) or not value.strip():
        raise _refused(
            "no_username",
            gettext(
                "%(name)s did not send the claim %(claim)s your username here would be made from."
            )
            % {"name": provider_name(), "claim": repr(claim_name)},
        )
    value = value.strip()
    try:
        if len(value) > 150:
            raise ValidationError("too long")
        UnicodeUsernameValidator()(value)
    except ValidationError:
        raise _refused(
            "bad_username",
            gettext(
                "%(name)s gave your name as %(value)s (claim %(claim)s), which is not a "
                "username here (at most 150 letters, digits and @ . + - _)."
            )
            % {"name": provider_name(), "value": repr(value), "claim": repr(claim_name)},
        ) from None
    return value


def _created(person: Person) -> Any:
    if not settings.HERMES_OIDC_CREATE_USERS:
        raise _refused(
            "no_account",
            gettext(
                "There is no account here for your %(name)s sign-in, and new accounts are not "
                "made at sign-in."
            )
            % {"name": provider_name()},
        )
    username = _username(person)
    User = get_user_model()
    if User.objects.filter(username__iexact=username).exists():
        raise _refused(
            "username_taken",
            gettext(
                "There is already an account called %(username)s here, and it is not linked to "
                "your %(name)s sign-in."
            )
            % {"username": repr(username), "name": provider_name()},
        )
    user = User(username=username, email=person.trusted_email)
    user.set_unusable_password()
    user.save()
    Membership.objects.create(user=user)
    logger.info("single sign-on created account %s", user.pk)
    return user


def _account(person: Person, issuer: str) -> Any:
    now = timezone.now()
    identity = (
        SignInIdentity.objects.select_related("user")
        .filter(issuer=issuer, subject=person.subject)
        .first()
    )
    if identity is not None:
        SignInIdentity.objects.filter(pk=identity.pk).update(last_sign_in_at=now)
        return _active(identity.user)
    user = _linked_by_email(person, issuer) or _created(person)
    SignInIdentity.objects.create(
        user=user, issuer=issuer, subject=person.subject, last_sign_in_at=now
    )
    return user


def _update(user: Any, person: Person) -> None:
    if person.trusted_email and person.trusted_email != user.email:
        user.email = person.trusted_email
        user.save(update_fields=["email"])
    if settings.HERMES_OIDC_ADMIN_GROUP and person.groups is not None:
        admin = settings.HERMES_OIDC_ADMIN_GROUP.lstrip("/") in person.groups
        role = Membership.Role.ADMIN if admin else Membership.Role.MEMBER
        membership, _ = Membership.objects.get_or_create(user=user)
        if membership.role != role:
            membership.role = role
            membership.save(update_fields=["role", "updated_at"])


def _sign_in_once(person: Person, issuer: str) -> Any:
    with transaction.atomic():
        user = _account(person, issuer)
        _update(user, person)
        return user


def oidc_sign_in(*, issuer: str, claims: dict[str, Any]) -> Any:
    """The account the verified `claims` sign in to (made or linked on a first sign-in),
    with its e-mail and role brought up to date; SignInRefused says why not."""
    person = person_from(claims)
    if not person.subject:
        raise _refused("no_subject", f"{provider_name()} did not say who you are (no 'sub').")
    check_admission(person)
    try:
        return _sign_in_once(person, issuer)
    except IntegrityError:
        # The same person's first sign-in in another tab made the account a moment ago:
        # now it is found.
        return _sign_in_once(person, issuer)
