from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.forms import PasswordChangeForm, UserCreationForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from core.exceptions import ServiceError

from .models import Profile, TokenScope
from .throttle import password_confirm


class ProfileForm(forms.ModelForm):
    class Meta:
        model = Profile
        fields = ["custom_instructions", "identity", "memory_enabled", "memory_write_approval"]
        widgets = {
            "custom_instructions": forms.Textarea(attrs={"rows": 4}),
            "identity": forms.Textarea(attrs={"rows": 3}),
        }
        labels = {
            "custom_instructions": "Custom instructions",
            "identity": "Agent identity (optional)",
            "memory_enabled": "Memory on",
            "memory_write_approval": "Approve the agent's memory writes before they are saved",
        }


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, label="Token name")
    scopes = forms.MultipleChoiceField(
        choices=TokenScope.choices,
        widget=forms.CheckboxSelectMultiple,
        label="What it may do",
        error_messages={"required": "Choose at least one scope for the token."},
    )


class SignupForm(UserCreationForm):
    pass


class MemberCreateForm(forms.Form):
    username = forms.CharField(max_length=150, label="Username")
    email = forms.EmailField(required=False, label="Email (optional)")
    role = forms.ChoiceField(
        choices=[("member", "Member"), ("admin", "Admin — manages the team")],
        initial="member",
        label="Role",
    )


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(
        choices=[("member", "Member"), ("admin", "Admin — manages the team")], label="Role"
    )


class MemberQuotaForm(forms.Form):
    daily_message_limit = forms.IntegerField(min_value=0, required=False, label="Messages per day")
    daily_token_limit = forms.IntegerField(min_value=0, required=False, label="Tokens per day")


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
            raise ValidationError(exc.message, code=exc.code) from exc
        if not right:
            raise ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old
