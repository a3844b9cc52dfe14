from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import PasswordChangeForm, PasswordResetForm, UserCreationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.exceptions import ServiceError

from .language import speaking_to
from .models import Profile, TokenScope
from .throttle import password_confirm


class ProfileForm(forms.ModelForm):
    class Meta:
        model = Profile
        fields = [
            "language",
            "custom_instructions",
            "identity",
            "memory_enabled",
            "memory_write_approval",
        ]
        widgets = {
            "custom_instructions": forms.Textarea(attrs={"rows": 4}),
            "identity": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {
            "language": _("Language"),
            "custom_instructions": _("Custom instructions"),
            "identity": _("Agent identity (optional)"),
            "memory_enabled": _("Memory on"),
            "memory_write_approval": _("Approve the agent's memory writes before they are saved"),
        }
        help_texts = {
            "identity": _("Replaces the deployment's default agent identity."),
            "memory_write_approval": _("Agent memory writes wait for your approval."),
        }


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, label=_("Token name"))
    scopes = forms.MultipleChoiceField(
        choices=TokenScope.choices,
        widget=forms.CheckboxSelectMultiple,
        label=_("What it may do"),
        error_messages={"required": _("Choose at least one scope for the token.")},
    )


class SignupForm(UserCreationForm):
    pass


ROLE_CHOICES = [("member", _("Member")), ("admin", _("Admin — manages the team"))]


class MemberCreateForm(forms.Form):
    username = forms.CharField(max_length=150, label=_("Username"))
    email = forms.EmailField(required=False, label=_("Email (optional)"))
    role = forms.ChoiceField(choices=ROLE_CHOICES, initial="member", label=_("Role"))


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=ROLE_CHOICES, label=_("Role"))


class MemberQuotaForm(forms.Form):
    daily_message_limit = forms.IntegerField(
        min_value=0, required=False, label=_("Messages per day")
    )
    daily_token_limit = forms.IntegerField(min_value=0, required=False, label=_("Tokens per day"))


class PasswordResetMailForm(PasswordResetForm):
    """Django's "forgot password" form, with its mail written in the recipient's language
    (the person asking has not signed in: theirs is the account's, not the browser's)."""

    def send_mail(self, subject_template_name, email_template_name, context, *args, **kwargs):
        with speaking_to(context["user"].pk):
            super().send_mail(subject_template_name, email_template_name, context, *args, **kwargs)


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's form, with the old password checked behind the login throttle."""

    def __init__(self, user: Any, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old = self.cleaned_data["old_password"]
        try:
            right = password_confirm(request=self.request, user=self.user, password=old)
        except ServiceError as exc:
            raise ValidationError(exc.text, code=exc.code) from exc
        if not right:
            raise ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old
