"""`python -m tests.support.oidc_provider`: the test provider's process. Reads
OIDC_PROVIDER_DATA (its folder: database, key, directory.json), OIDC_PROVIDER_PORT and
OIDC_PROVIDER_CLIENTS (a JSON list of clients: client_id, client_secret or "" for a public
client, redirect_uris, post_logout_redirect_uris), then serves on 127.0.0.1."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def _key(path: Path) -> None:
    if path.exists():
        return
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _clients() -> None:
    from oauth2_provider.models import Application

    for client in json.loads(os.environ.get("OIDC_PROVIDER_CLIENTS", "[]")):
        secret = client.get("client_secret", "")
        Application.objects.filter(client_id=client["client_id"]).delete()
        Application.objects.create(
            name=client["client_id"],
            client_id=client["client_id"],
            client_secret=secret,
            client_type=Application.CLIENT_CONFIDENTIAL if secret else Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(client["redirect_uris"]),
            post_logout_redirect_uris=" ".join(client.get("post_logout_redirect_uris", [])),
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )


def main() -> None:
    data = Path(os.environ["OIDC_PROVIDER_DATA"])
    data.mkdir(parents=True, exist_ok=True)
    _key(data / "key.pem")
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.support.oidc_provider.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.servers.basehttp import WSGIServer, run
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0)
    _clients()
    run("127.0.0.1", int(os.environ["OIDC_PROVIDER_PORT"]), get_wsgi_application(),
        threading=True, server_cls=WSGIServer)  # fmt: skip


if __name__ == "__main__":
    main()
