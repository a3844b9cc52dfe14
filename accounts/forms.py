from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from .models import Profile


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
