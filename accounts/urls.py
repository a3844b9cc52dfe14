from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from . import team_views, views
from .oidc import views as oidc_views
from .views import passwords_only

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    # Ends the provider's session too after a single sign-on.
    path("logout/", oidc_views.LogoutView.as_view(), name="logout"),
    # Single sign-on: the start, and the redirect URI registered at the provider.
    path("oidc/login/", oidc_views.SignInView.as_view(), name="oidc_login"),
    path("oidc/callback/", oidc_views.CallbackView.as_view(), name="oidc_callback"),
    # Pages about passwords are 404s while HERMES_PASSWORD_LOGIN is off.
    path("password/", passwords_only(views.PasswordChangeView.as_view()), name="password_change"),
    path(
        "password/done/",
        passwords_only(auth_views.PasswordChangeDoneView.as_view()),
        name="password_change_done",
    ),
    path(
        "password/forgot/",
        passwords_only(views.PasswordResetView.as_view()),
        name="password_reset",
    ),
    path(
        "password/forgot/sent/",
        passwords_only(
            auth_views.PasswordResetDoneView.as_view(
                template_name="registration/password_reset_sent.html"
            )
        ),
        name="password_reset_done",
    ),
    path("signup/", passwords_only(views.signup), name="signup"),
    path("", views.account, name="account"),
    path("theme/", views.theme_set, name="theme_set"),
    path("tokens/", views.token_create, name="token_create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    # The team page (team admins only) and the link invited people set a password with.
    path("team/", team_views.team, name="team"),
    path("team/<int:user_id>/", team_views.member, name="team_member"),
    path("team/<int:user_id>/role/", team_views.member_role, name="team_member_role"),
    path("team/<int:user_id>/quota/", team_views.member_quota, name="team_member_quota"),
    path("team/<int:user_id>/active/", team_views.member_active, name="team_member_active"),
    path("team/<int:user_id>/reset/", team_views.member_reset, name="team_member_reset"),
    path("team/<int:user_id>/invite/", team_views.member_invite, name="team_member_invite"),
    path(
        "welcome/<uidb64>/<token>/",
        passwords_only(team_views.PasswordSetView.as_view()),
        name="password_set",
    ),
]
