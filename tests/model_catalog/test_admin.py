"""The admin: write-only keys, the endpoint's /v1/models, errors, and who may reach it."""

from __future__ import annotations

import logging
import socket

import pytest
from django.test import Client
from django.urls import reverse

from devtools.scripted_llm import ScriptedLLM
from model_catalog.models import ModelEntry

pytestmark = pytest.mark.django_db

KEY = "sk-admin-secret-987654"
ADD = "admin:model_catalog_modelentry_add"


def form(**overrides) -> dict[str, str]:
    data = {
        "name": "Second",
        "enabled": "on",
        "base_url": "http://127.0.0.1:9/v1",
        "model_id": "scripted",
        "context_length": "32000",
        "api_key": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def admin_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_key_is_write_only_kept_when_blank_and_removable(superuser, caplog):
    client = admin_client(superuser)
    with caplog.at_level(logging.DEBUG):
        response = client.post(reverse(ADD), form(api_key=KEY))
        assert response.status_code == 302, response.content[:2000]
        row = ModelEntry.objects.get(name="Second")
        change = reverse("admin:model_catalog_modelentry_change", args=[row.pk])
        page = client.get(change).content.decode()
        listing = client.get(reverse("admin:model_catalog_modelentry_changelist")).content
        assert KEY not in page and KEY.encode() not in listing
        assert "A key is set — leave blank to keep it." in page
        stored = row.api_key_encrypted
        assert stored and KEY not in stored

        client.post(change, form(name="Second!", api_key=""))
        row.refresh_from_db()
        assert (row.name, row.api_key_encrypted) == ("Second!", stored)

        client.post(change, form(name="Second!", clear_api_key="on"))
        row.refresh_from_db()
        assert row.api_key_encrypted == ""
        assert "No key is set." in client.get(change).content.decode()
    assert KEY not in caplog.text


def test_an_unreadable_key_is_reported_on_the_entry(superuser, settings):
    settings.HERMES_ENCRYPTION_KEY = "first"
    client = admin_client(superuser)
    client.post(reverse(ADD), form(api_key=KEY))
    settings.HERMES_ENCRYPTION_KEY = "second"
    row = ModelEntry.objects.get(name="Second")
    page = client.get(reverse("admin:model_catalog_modelentry_change", args=[row.pk]))
    assert page.status_code == 200
    assert "cannot be decrypted" in page.content.decode()


def test_listing_the_endpoint_models_and_picking_one(superuser, scripted):
    server = ScriptedLLM(require_api_key=KEY).start()
    try:
        client = admin_client(superuser)
        client.post(reverse(ADD), form(base_url=server.base_url, api_key=KEY, model_id="x"))
        row = ModelEntry.objects.get(name="Second")
        url = reverse("admin:model_catalog_modelentry_endpoint", args=[row.pk])
        page = client.get(url).content.decode()
        assert "<code>scripted</code>" in page and 'id="endpoint-models"' in page
        client.post(url, {"model_id": "scripted"})
        row.refresh_from_db()
        assert row.model_id == "scripted"
        # The wrong key: a clear 401 message.
        client.post(
            reverse("admin:model_catalog_modelentry_change", args=[row.pk]),
            form(base_url=server.base_url, api_key="sk-wrong-000000"),
        )
        page = client.get(url).content.decode()
        assert "rejected the API key (HTTP 401)" in page
    finally:
        server.stop()


def test_listing_a_refused_or_silent_endpoint_says_so(superuser, free_tcp_port, settings):
    settings.HERMES_LLM_READ_TIMEOUT = 0.5
    client = admin_client(superuser)
    client.post(reverse(ADD), form(base_url=f"http://127.0.0.1:{free_tcp_port}/v1"))
    row = ModelEntry.objects.get(name="Second")
    url = reverse("admin:model_catalog_modelentry_endpoint", args=[row.pk])
    assert "refused the connection" in client.get(url).content.decode()

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        row.base_url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        row.save()
        assert "did not answer in time" in client.get(url).content.decode()
    finally:
        silent.close()


def test_only_administrators_reach_the_models(owner, staff_member, superuser):
    row = ModelEntry.objects.create(name="Hidden", model_id="m")
    urls = [
        reverse("admin:model_catalog_modelentry_changelist"),
        reverse("admin:model_catalog_modelentry_change", args=[row.pk]),
        reverse("admin:model_catalog_modelentry_endpoint", args=[row.pk]),
    ]
    for url in urls:
        assert admin_client(owner).get(url).status_code == 302  # to the admin login
        assert admin_client(staff_member).get(url).status_code in (302, 403)
    assert admin_client(superuser).get(urls[0]).status_code == 200
