"""Forms of the Memory page. They only shape input; memory.services validates it."""

from __future__ import annotations

from django import forms

from .models import Target


class EntryForm(forms.Form):
    # Not stripped or length-checked here: the service gives the one clear message.
    content = forms.CharField(
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "data-counter": ""}),
        label="Entry",
        error_messages={"required": "Content cannot be empty."},
    )


class ImportForm(forms.Form):
    target = forms.ChoiceField(choices=Target.choices, label="Into")
    mode = forms.ChoiceField(
        choices=[
            ("merge", "Add the entries I don't have yet"),
            ("replace", "Make the list match the file (removes entries not in it)"),
        ],
        initial="merge",
        widget=forms.RadioSelect,
        label="How",
    )
    file = forms.FileField(required=False, label="MEMORY.md or USER.md file")
    text = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="…or paste its text (entries separated by a line with only §)",
    )
