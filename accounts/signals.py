"""Close a person's open websockets when their login ends: logout, a password change or
deactivation. Channels resolves the user once at connect, so without this an open socket
would outlive the session (ASVS V7.4.1/V7.4.2). Also notes when a session signed in, for
accounts/reauth.py."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db import transaction
from django.db.models.signals import pre_save
from django.dispatch import receiver

from core.realtime import user_group


def close_sockets_of(user_id: int) -> None:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(user_group(user_id), {"type": "auth.revoked"})


@receiver(user_logged_in)
def _on_login(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # When this session's person last proved who they are (accounts/reauth.py).
    from .reauth import signed_in_mark

    signed_in_mark(request)


@receiver(user_logged_out)
def _on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        close_sockets_of(user.pk)


@receiver(pre_save, sender=get_user_model())
def _on_credentials_change(sender: Any, instance: Any, **kwargs: Any) -> None:
    if instance.pk is None:
        return
    before = sender.objects.filter(pk=instance.pk).values("password", "is_active").first()
    if before is None:
        return
    if before["password"] != instance.password or (before["is_active"] and not instance.is_active):
        user_id = instance.pk
        transaction.on_commit(lambda: close_sockets_of(user_id))
