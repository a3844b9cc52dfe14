"""Inference tables in the privacy registry (core/privacy/registry.py): exported
under their sections, deleted with the account, and — except the consent switch — by
"Forget all memory"."""

from __future__ import annotations


def register() -> None:
    from core.privacy import registry

    from ..models import (
        Inference,
        InferenceSettings,
        InferenceState,
        InferenceTombstone,
        InferenceUse,
        ProviderConfig,
    )

    registry.register(
        Inference,
        owner_path="owner",
        section="inferences",
        category="Inferences about you",
        provided=False,
        memory=True,
        erase_order=12,
    )
    registry.register(
        InferenceUse,
        owner_path="inference__owner",
        section="inference_uses",
        category="Which inferences were sent with which of your messages",
        provided=False,
        memory=True,
        erase_order=10,
    )
    registry.register(
        InferenceState,
        owner_path="owner",
        section="inference_states",
        category="Inference progress and recall prepared for each conversation",
        provided=False,
        memory=True,
        erase_order=12,
    )
    registry.register(
        InferenceTombstone,
        owner_path="owner",
        section="inference_tombstones",
        category="Fingerprints of inferences you deleted (so they are not derived again)",
        provided=False,
        content=False,
        memory=True,
        erase_order=12,
    )
    registry.register(
        InferenceSettings,
        owner_path="user",
        section="inference_settings",
        category="Whether the agent may infer things about you",
        content=False,
    )
    registry.not_personal(
        ProviderConfig, reason="deployment settings of a memory provider, per provider name"
    )
