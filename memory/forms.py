"""Forms of the Memory page. They only shape input; memory.services validates it."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from .models import Target


class EntryForm(forms.Form):
    # Not stripped or length-checked here: the service gives the one clear message.
    content = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "data-counter": ""}),
        label=_("Entry"),
        error_messages={"required": _("Content cannot be empty.")},
    )


class ImportForm(forms.Form):
    target = forms.ChoiceField(choices=Target.choices, label=_("Into"))
    mode = forms.ChoiceField(
        choices=[
            ("merge", _("Add the entries I don't have yet")),
            ("replace", _("Make the list match the file (removes entries not in it)")),
        ],
        initial="merge",
        widget=forms.RadioSelect,
        label=_("How"),
    )
    file = forms.FileField(required=False, label=_("MEMORY.md or USER.md file"))
    text = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label=_("…or paste its text (entries separated by a line with only §)"),
    )
