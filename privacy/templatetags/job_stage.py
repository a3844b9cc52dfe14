"""`{{ job.stage|stage }}`: a background job's stage in the reader's language."""

from __future__ import annotations

from django import template

from privacy.stages import stage_text

register = template.Library()


@register.filter
def stage(value: str) -> str:
    return stage_text(value)
