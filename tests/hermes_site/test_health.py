from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_reports_each_component_as_json():
    response = Client().get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert set(body["components"]) == {"database", "channel_layer", "broker"}
    assert all(c["ok"] for c in body["components"].values())


def test_healthz_names_the_failing_component_with_503(settings):
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "core.channel_layer.LocalFirstRedisChannelLayer",
            # Nothing listens on port 1.
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    response = Client().get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["components"]["channel_layer"]["ok"] is False
    assert "error" in body["components"]["channel_layer"]
    assert body["components"]["database"]["ok"] is True


def test_healthz_checks_the_real_redis_layer(redis_channel_layer):
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json()["components"]["channel_layer"]["detail"] == "LocalFirstRedisChannelLayer"
