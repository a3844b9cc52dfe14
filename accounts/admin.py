from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import redirect_to_login
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from core.privacy.admin_base import OwnedModelAdmin

from .models import ApiToken, LoginThrottle, Membership, Profile, SignInIdentity


@admin.register(Profile)
class ProfileAdmin(OwnedModelAdmin):
    owner_field = "user"
    list_display = ("user", "memory_enabled", "memory_write_approval")

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Profiles are created with their user.
        return request.user.is_superuser


@admin.register(ApiToken)
class ApiTokenAdmin(OwnedModelAdmin):
    owner_field = "user"
    list_display = ("name", "user", "prefix", "scope_codes", "created_at", "last_used_at")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")

    @admin.display(description=_("scopes"), ordering="scopes")
    def scope_codes(self, obj: ApiToken) -> str:
        # Scopes are identifiers (memory:read), shown as code in every language.
        return format_html("<code>{}</code>", obj.scopes)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Keys are shown once, on the account page; the admin cannot display them.
        return False


@admin.register(Membership)
class MembershipAdmin(OwnedModelAdmin):
    """Roles and quotas are the team admins' (the Team page); staff may look at their own
    row but only superusers change it here, or staff could raise their own quota or role."""

    owner_field = "user"
    list_display = ("user", "role", "daily_message_limit", "daily_token_limit", "updated_at")
    list_filter = ("role",)
    readonly_fields = ("invited_by", "created_at", "updated_at")

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return request.user.is_active and request.user.is_superuser


@admin.register(LoginThrottle)
class LoginThrottleAdmin(OwnedModelAdmin):
    """Lockouts belong to no user (keys are hashes); superusers may lift one by deleting it."""

    list_display = ("key", "attempts", "window_started_at", "locked_until")
    readonly_fields = ("key", "attempts", "window_started_at", "locked_until")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        qs = admin.ModelAdmin.get_queryset(self, request)
        return qs if request.user.is_superuser else qs.none()

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Staff get an empty list (get_queryset); a row by id is superusers' only.
        if obj is not None:
            return request.user.is_active and request.user.is_superuser
        return self._is_staff(request)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return request.user.is_active and request.user.is_superuser


@admin.register(SignInIdentity)
class SignInIdentityAdmin(OwnedModelAdmin):
    """Who signs in to an account by single sign-on. Superusers may delete a link (the
    person's provider account was replaced: their next sign-in links again, by verified
    e-mail or as a new account); a link is never made or edited by hand."""

    owner_field = "user"
    list_display = ("user", "issuer", "subject", "created_at", "last_sign_in_at")
    readonly_fields = ("user", "issuer", "subject", "created_at", "last_sign_in_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return request.user.is_active and request.user.is_superuser


_admin_login = admin.site.login


def _admin_login_or_sign_in(request: HttpRequest, extra_context: Any = None) -> HttpResponse:
    """The admin's own login form checks passwords only: while HERMES_PASSWORD_LOGIN is off
    it sends people to the site's login page (single sign-on), and back once signed in."""
    if not settings.HERMES_PASSWORD_LOGIN and not request.user.is_authenticated:
        return redirect_to_login(request.GET.get("next") or reverse("admin:index"))
    return _admin_login(request, extra_context)


admin.site.login = _admin_login_or_sign_in
