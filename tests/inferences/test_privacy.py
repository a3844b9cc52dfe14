"""Inferences are part of the person's data: exported, and erased by "Forget all memory"
(except their consent choice) and with the account."""

from __future__ import annotations

import json
import zipfile

import pytest

from core.privacy import registry
from memory.inferences import services
from memory.models import (
    Inference,
    InferenceSettings,
    InferenceTombstone,
    InferenceUse,
    ProviderConfig,
)
from privacy.erase import memory_forget_all
from privacy.export import build_export

from .conftest import conversation, make_inference

pytestmark = pytest.mark.django_db


def test_every_inference_table_is_registered():
    for model in (Inference, InferenceUse, InferenceTombstone, InferenceSettings):
        assert registry.entry_for(model) is not None, model
    assert "memory.ProviderConfig" in registry.declared_not_personal()
    assert registry.entry_for(Inference).memory and not registry.entry_for(Inference).provided


def test_export_contains_my_inferences_only(owner, outsider, tmp_path):
    make_inference(owner, "Prefers terse answers")
    make_inference(outsider, "Prefers French")
    target = tmp_path / "export.zip"
    build_export(user=owner, target=target)
    with zipfile.ZipFile(target) as zf:
        data = json.loads(zf.read("export.json"))
    assert [row["statement"] for row in data["inferences"]] == ["Prefers terse answers"]
    assert "Prefers French" not in json.dumps(data)


def test_forget_all_memory_deletes_inferences_but_keeps_consent(owner, outsider):
    session = conversation(owner, "short answers")
    mine = make_inference(owner, "Prefers terse answers")
    InferenceUse.objects.create(inference=mine, message=session.messages.get(role="user"))
    services.inference_delete(user=owner, inference_id=make_inference(owner, "Likes tea").pk)
    services.inference_settings_set(user=owner, enabled=False)
    make_inference(outsider, "Prefers French")
    ProviderConfig.objects.create(name="local", values={"recall_limit": 3})

    memory_forget_all(user=owner)
    assert not Inference.objects.filter(owner=owner).exists()
    assert not InferenceUse.objects.exists()
    assert not InferenceTombstone.objects.filter(owner=owner).exists()
    assert InferenceSettings.objects.get(user=owner).enabled is False
    assert Inference.objects.filter(owner=outsider).count() == 1
    assert ProviderConfig.objects.exists()
