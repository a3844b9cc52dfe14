"""Per-user settings and personal API tokens."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _


class Profile(models.Model):
    """What a person sets for their own agent. Created on first access (see services)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="hermes_profile",
    )
    identity = models.TextField(
        verbose_name=_("identity"),
        blank=True,
        default="",
        help_text=_("Replaces the deployment's default agent identity."),
    )
    custom_instructions = models.TextField(
        verbose_name=_("custom instructions"), blank=True, default=""
    )
    memory_enabled = models.BooleanField(verbose_name=_("memory enabled"), default=True)
    memory_write_approval = models.BooleanField(
        verbose_name=_("memory write approval"),
        default=False,
        help_text=_("Agent memory writes wait for your approval."),
    )
    memory_char_limit = models.PositiveIntegerField(
        verbose_name=_("memory char limit"), null=True, blank=True
    )
    user_char_limit = models.PositiveIntegerField(
        verbose_name=_("user char limit"), null=True, blank=True
    )

    class Theme(models.TextChoices):
        SYSTEM = "system", _("System")
        LIGHT = "light", _("Light")
        DARK = "dark", _("Dark")

    # Rendered on <html data-theme> by base.html, so a page never flashes the other theme.
    theme = models.CharField(
        verbose_name=_("theme"), max_length=6, choices=Theme.choices, default=Theme.SYSTEM
    )
    # Empty: the browser's language (Accept-Language, or the login page's switch).
    language = models.CharField(
        _("language"),
        max_length=10,
        blank=True,
        default="",
        choices=[("", _("As my browser says")), *settings.LANGUAGES],
    )
    # What the browser last asked for while `language` is empty: the language of what the
    # site says to the person outside a page (mail, notices from background work).
    browser_language = models.CharField(
        verbose_name=_("browser language"), max_length=10, blank=True, default="", editable=False
    )

    class Meta:
        verbose_name = _("profile")
        verbose_name_plural = _("profiles")

    def __str__(self) -> str:
        return gettext("Profile of %(user)s") % {"user": self.user}


class TokenScope(models.TextChoices):
    """What a personal API token may do. `api` is the REST API (everything the account can
    do there), `chat` the OpenAI-compatible endpoint; the others are the MCP server's tools
    and resources."""

    API = "api", _("REST API (/api/): everything your account can do")
    CHAT = "chat", _("Chat with the agent as a model (/v1/); it reads and writes memory")
    MEMORY_READ = "memory:read", _("MCP: read memory (MEMORY.md, USER.md)")
    MEMORY_WRITE = "memory:write", _("MCP: add, replace and remove memory entries")
    SEARCH = "search", _("MCP: search past conversations")
    SKILLS_READ = "skills:read", _("MCP: list and read skills")
    SKILLS_WRITE = "skills:write", _("MCP: create and change skills")


#: Tokens made before scopes existed got every scope, so they do what they did.
ALL_SCOPES = " ".join(TokenScope.values)


class ApiToken(models.Model):
    """A personal token for the REST API and the MCP server. Only a hash is stored; the key
    is shown once. `scopes` holds TokenScope values separated by spaces (as OAuth does)."""

    PREFIX_LEN = 8

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="api_tokens",
    )
    name = models.CharField(verbose_name=_("name"), max_length=100)
    prefix = models.CharField(verbose_name=_("prefix"), max_length=PREFIX_LEN)
    key_hash = models.CharField(verbose_name=_("key hash"), max_length=64, unique=True)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    last_used_at = models.DateTimeField(verbose_name=_("last used at"), null=True, blank=True)
    scopes = models.CharField(verbose_name=_("scopes"), max_length=200, default=ALL_SCOPES)

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "name"], name="apitoken_unique_name_per_user"),
            models.CheckConstraint(condition=~Q(name=""), name="apitoken_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    def has_scope(self, scope: str) -> bool:
        return scope in self.scope_list

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8")).hexdigest()

    @staticmethod
    def generate_key() -> str:
        return "hw_" + secrets.token_urlsafe(32)


class Membership(models.Model):
    """A person's place in the team: their role and daily quotas, set by a team admin.

    Superusers are admins whatever their row says. A limit of None means the team default
    (HERMES_DAILY_MESSAGE_LIMIT / HERMES_DAILY_TOKEN_LIMIT); 0 means no limit.
    """

    class Role(models.TextChoices):
        ADMIN = "admin", pgettext_lazy("team role", "Admin")
        MEMBER = "member", pgettext_lazy("team role", "Member")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="membership",
    )
    role = models.CharField(
        verbose_name=_("role"), max_length=16, choices=Role.choices, default=Role.MEMBER
    )
    daily_message_limit = models.PositiveIntegerField(
        verbose_name=_("daily message limit"), null=True, blank=True
    )
    daily_token_limit = models.PositiveBigIntegerField(
        verbose_name=_("daily token limit"), null=True, blank=True
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("invited by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    updated_at = models.DateTimeField(verbose_name=_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.CheckConstraint(
                condition=Q(role__in=["admin", "member"]), name="membership_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.get_role_display()})"


class LoginThrottle(models.Model):
    """Login attempts per client address and per username, for the lockout.

    `key` is a keyed hash ("ip:…" / "user:…"), so the table holds neither addresses nor
    whatever people typed as a username. `attempts` counts attempts in the current window
    that did not succeed; it is incremented *before* the password is checked, so parallel
    guesses cannot slip past the limit.
    """

    key = models.CharField(verbose_name=_("key"), max_length=80, unique=True)
    attempts = models.PositiveIntegerField(verbose_name=_("attempts"), default=0)
    window_started_at = models.DateTimeField(verbose_name=_("window started at"))
    locked_until = models.DateTimeField(verbose_name=_("locked until"), null=True, blank=True)

    class Meta:
        verbose_name = _("login throttle")
        verbose_name_plural = _("login throttles")
        indexes = [models.Index(fields=["window_started_at"], name="loginthrottle_window_idx")]

    def __str__(self) -> str:
        return self.key


class SignInIdentity(models.Model):
    """Who a person is at a single sign-on provider: the provider's issuer and its stable
    subject id (`sub`), never the name or e-mail, which people can change there. Made at
    the first sign-in (creating the account, or taking over one by a verified e-mail
    address when HERMES_OIDC_LINK_BY_EMAIL is on); deleted with the account."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="sign_in_identities",
    )
    issuer = models.CharField(verbose_name=_("issuer"), max_length=255)
    subject = models.CharField(verbose_name=_("subject"), max_length=255)
    created_at = models.DateTimeField(verbose_name=_("created at"), auto_now_add=True)
    last_sign_in_at = models.DateTimeField(verbose_name=_("last sign-in at"), null=True, blank=True)

    class Meta:
        verbose_name = _("sign-in identity")
        verbose_name_plural = _("sign-in identities")
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "subject"], name="signinidentity_unique_subject"
            ),
            models.UniqueConstraint(fields=["user", "issuer"], name="signinidentity_one_per_user"),
            models.CheckConstraint(condition=~Q(subject=""), name="signinidentity_subject_set"),
        ]

    def __str__(self) -> str:
        return gettext("%(user)s at %(issuer)s") % {"user": self.user, "issuer": self.issuer}
