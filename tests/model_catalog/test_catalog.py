"""The catalog: one default and one summary model, the environment entry, encrypted keys."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest
from django.db import IntegrityError, connection, transaction

from core.exceptions import ServiceError
from model_catalog import crypto
from model_catalog.models import ModelEntry
from model_catalog.selectors import (
    choice_for,
    default_choice,
    enabled_choices,
    env_choice,
    summary_choice,
)
from model_catalog.services import model_entry_save
from sessions_app.agent.llm import Usage
from sessions_app.agent.llm.cost import CallUsage

pytestmark = pytest.mark.django_db

KEY = "sk-catalog-secret-123456"


def entry(name: str, **fields) -> ModelEntry:
    key = fields.pop("key", "")
    fields.setdefault("model_id", f"{name}-id")
    fields.setdefault("base_url", "http://127.0.0.1:9/v1")
    return model_entry_save(entry=ModelEntry(name=name, **fields), new_api_key=key)


def test_the_database_refuses_a_second_default_or_summary():
    entry("a", is_default=True, is_summary=True)
    for mark in ("is_default", "is_summary"):
        with pytest.raises(IntegrityError), transaction.atomic():
            ModelEntry.objects.create(name=f"x-{mark}", model_id="x", **{mark: True})


def test_the_database_refuses_a_disabled_default():
    with pytest.raises(IntegrityError), transaction.atomic():
        ModelEntry.objects.create(name="off", model_id="x", enabled=False, is_default=True)


def test_marking_a_default_takes_the_mark_from_the_other():
    first = entry("first", is_default=True, is_summary=True)
    entry("second", is_default=True)
    first.refresh_from_db()
    assert (first.is_default, first.is_summary) == (False, True)
    assert default_choice().name == "second"
    assert summary_choice().name == "first"


def test_the_service_refuses_a_disabled_default():
    with pytest.raises(ServiceError) as caught:
        entry("off", enabled=False, is_default=True)
    assert caught.value.code == "model_disabled"


def test_the_environment_is_the_default_without_rows(settings):
    settings.HERMES_MODEL, settings.OPENAI_BASE_URL = "env-model", "http://127.0.0.1:9/v1"
    settings.HERMES_SUMMARY_MODEL = "env-small"
    assert (default_choice().ref, default_choice().model_id) == ("env", "env-model")
    assert summary_choice().model_id == "env-small"
    entry("row", is_default=True)
    assert default_choice().name == "row"
    assert [c.name for c in enabled_choices()] == ["env-model", "row"]


def test_disabled_and_deleted_entries_are_not_choosable():
    off = entry("off", enabled=False)
    assert choice_for(str(off.pk)) is None
    gone = entry("gone")
    ref = str(gone.pk)
    gone.delete()
    assert choice_for(ref) is None
    assert choice_for("nonsense") is None


def test_the_key_is_encrypted_in_the_database_and_never_in_repr():
    row = entry("enc", key=KEY)
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key_encrypted FROM model_catalog_modelentry")
        (raw,) = cursor.fetchone()
    assert KEY not in raw and raw
    choice = choice_for(str(row.pk))
    assert choice is not None and choice.api_key == KEY
    assert KEY not in repr(choice)


def test_a_changed_encryption_key_is_a_clear_error_and_rotation_keeps_keys(settings, caplog):
    settings.HERMES_ENCRYPTION_KEY = "old-secret"
    row = entry("rot", key=KEY)
    settings.HERMES_ENCRYPTION_KEY = "new-secret,old-secret"
    assert choice_for(str(row.pk)).api_key == KEY
    settings.HERMES_ENCRYPTION_KEY = "new-secret"
    choice = choice_for(str(row.pk))
    assert choice.api_key == "" and "Enter the key again" in choice.key_error
    with pytest.raises(crypto.KeyUnreadable):
        crypto.decrypt(row.api_key_encrypted)


def test_storing_a_key_with_the_fallback_warns_without_the_key(settings, caplog):
    settings.HERMES_ENCRYPTION_KEY = ""
    with caplog.at_level(logging.DEBUG):
        entry("fallback", key=KEY)
    assert "HERMES_ENCRYPTION_KEY is not set" in caplog.text
    assert KEY not in caplog.text


def test_cost_uses_the_entry_prices_over_the_environment(settings):
    settings.HERMES_MODEL_PRICES = {"priced": {"input": 100, "output": 100}}
    row = entry(
        "priced",
        model_id="priced",
        price_input=Decimal(2),
        price_output=Decimal(8),
        price_cached_input=Decimal(1),
    )
    choice = choice_for(str(row.pk))
    usage = Usage(prompt_tokens=1_000_000, completion_tokens=500_000, cached_tokens=500_000)
    record = CallUsage.of("priced", usage, prices=choice.prices)
    assert record.cost_usd == Decimal("0.5") * 2 + Decimal("0.5") * 1 + Decimal("0.5") * 8
    env = env_choice()
    assert env.prices is None
    assert CallUsage.of("priced", usage).cost_usd == Decimal(100) + Decimal(50)


def test_the_information_sheet_names_every_endpoint_without_credentials(settings):
    from privacy.information import llm_recipient

    settings.HERMES_MODEL, settings.OPENAI_BASE_URL = "env-model", "http://127.0.0.1:9/v1"
    entry("remote", base_url="https://user:pw@llm.example.org/v1?token=t", key=KEY)
    entry("off", base_url="https://hidden.example.org/v1", enabled=False)
    recipient = llm_recipient()
    assert recipient["endpoint"] == "http://127.0.0.1:9/v1"
    assert recipient["other_endpoints"] == ["https://llm.example.org/v1"]
    assert recipient["chat_model"] == "env-model"
    assert KEY not in str(recipient) and "pw@" not in str(recipient)
