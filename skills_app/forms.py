"""Page forms: shapes and sizes only; the rules live in the services."""

from __future__ import annotations

from django import forms
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from . import skillmd


def _help_text(text, **codes: str) -> SafeString:
    return format_html(
        str(text), **{key: format_html("<code>{}</code>", value) for key, value in codes.items()}
    )


#: A help text in the reader's language with the names in it as <code> (help texts are HTML).
_help = lazy(_help_text, SafeString)


class SkillCreateForm(forms.Form):
    category = forms.CharField(
        label=_("Category"),
        max_length=skillmd.NAME_MAX,
        required=False,
        help_text=_help(_("Optional, e.g. {example}."), example="devops"),
    )
    content = forms.CharField(
        label="SKILL.md",
        strip=False,
        max_length=skillmd.CONTENT_MAX,
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "class": "mono"}),
        help_text=_help(
            _(
                "The skill's name is the {name} line of the frontmatter (lowercase letters, "
                "digits, {dot}, {underscore} and {dash}, e.g. {example})."
            ),
            name="name:",
            dot=".",
            underscore="_",
            dash="-",
            example="k8s-storage",
        ),
    )


class SkillEditForm(forms.Form):
    category = forms.CharField(label=_("Category"), max_length=skillmd.NAME_MAX, required=False)
    content = forms.CharField(
        label="SKILL.md",
        strip=False,
        max_length=skillmd.CONTENT_MAX,
        widget=forms.Textarea(attrs={"rows": 26, "spellcheck": "false", "class": "mono"}),
    )


class SkillFileForm(forms.Form):
    path = forms.CharField(
        label=_("Path"),
        max_length=skillmd.FILE_PATH_MAX,
        help_text=_help(
            _("Under {references}, {templates}, {scripts} or {assets}, e.g. {example}."),
            references="references/",
            templates="templates/",
            scripts="scripts/",
            assets="assets/",
            example="references/api.md",
        ),
    )
    content = forms.CharField(
        label=_("Content"),
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "mono"}),
        help_text=_("Type the text, or upload a file instead."),
    )
    upload = forms.FileField(required=False, label=_("Or upload a file"))

    def clean(self):
        data = super().clean()
        if not data.get("content") and not data.get("upload"):
            raise forms.ValidationError(_("Type the file's text or choose a file to upload."))
        return data


class SkillImportForm(forms.Form):
    archive = forms.FileField(
        label=_("Skills zip"),
        help_text=_help(_("A zip of {layout} folders."), layout="skills/[category/]name/SKILL.md"),
    )
