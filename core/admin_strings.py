"""Django's admin in the person's language where Django's own catalog falls short.

Django's zh_Hans admin catalog lacks a few strings its templates show (the app list's
column headers, read by screen readers): they are marked here so our catalog
(locale/zh_Hans) translates them. And the admin's yes/no icons carry `alt="True"` /
`alt="False"` (Python's words, untranslated): `boolean_icons_translate` makes them say
Django's own translated "Yes", "No" and "Unknown"."""

from __future__ import annotations

from django.utils.translation import gettext_noop

# Shown by django/contrib/admin/templates (app_list.html, auth/user/add_form.html,
# login.html, includes/fieldset.html) and missing from Django's zh_Hans admin catalog.
MISSING_FROM_DJANGOS_CATALOG = (
    gettext_noop("Model name"),
    gettext_noop("Add link"),
    gettext_noop("Change or view list link"),
    gettext_noop("After you’ve created a user, you’ll be able to edit more user options."),
    gettext_noop("Error:"),
    gettext_noop("Forgotten your login credentials?"),
    gettext_noop("In case you’ve forgotten, you are:"),
)


def boolean_icons_translate() -> None:
    """Replace the admin's `_boolean_icon` (every caller imports it from admin_list when
    it runs) by one whose alt text is translated."""
    from django.contrib.admin.templatetags import admin_list
    from django.templatetags.static import static
    from django.utils.html import format_html
    from django.utils.translation import gettext

    if getattr(admin_list._boolean_icon, "translated", False):
        return

    def _boolean_icon(field_val: bool | None) -> str:
        icon = {True: "yes", False: "no", None: "unknown"}[field_val]
        alt = {True: gettext("Yes"), False: gettext("No"), None: gettext("Unknown")}[field_val]
        return format_html('<img src="{}" alt="{}">', static(f"admin/img/icon-{icon}.svg"), alt)

    _boolean_icon.translated = True  # type: ignore[attr-defined]
    admin_list._boolean_icon = _boolean_icon
