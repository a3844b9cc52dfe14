"""Page forms: shapes and sizes only; the rules live in the services."""

from __future__ import annotations

from django import forms

from . import skillmd


class SkillCreateForm(forms.Form):
    category = forms.CharField(
        max_length=skillmd.NAME_MAX, required=False, help_text="Optional, e.g. devops."
    )
    content = forms.CharField(
        label="SKILL.md",
        strip=False,
        max_length=skillmd.CONTENT_MAX,
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "class": "mono"}),
        help_text="The skill's name is the name: line of the frontmatter (lowercase letters, "
        "digits, '.', '_' and '-', e.g. k8s-storage).",
    )


class SkillEditForm(forms.Form):
    category = forms.CharField(max_length=skillmd.NAME_MAX, required=False)
    content = forms.CharField(
        label="SKILL.md",
        strip=False,
        max_length=skillmd.CONTENT_MAX,
        widget=forms.Textarea(attrs={"rows": 26, "spellcheck": "false", "class": "mono"}),
    )


class SkillFileForm(forms.Form):
    path = forms.CharField(
        max_length=skillmd.FILE_PATH_MAX,
        help_text="Under references/, templates/, scripts/ or assets/, e.g. references/api.md.",
    )
    content = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text="Type the text, or upload a file instead.",
    )
    upload = forms.FileField(required=False, label="Or upload a file")

    def clean(self):
        data = super().clean()
        if not data.get("content") and not data.get("upload"):
            raise forms.ValidationError("Type the file's text or choose a file to upload.")
        return data


class SkillImportForm(forms.Form):
    archive = forms.FileField(
        label="Skills zip", help_text="A zip of skills/[category/]name/SKILL.md folders."
    )
