from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class PrivacyConfig(AppConfig):
    name = "privacy"
    verbose_name = _("Privacy")

    def ready(self) -> None:
        from django.db.models import Q

        from accounts.account_page import account_section_register
        from core.leases import lease_kind_register
        from core.privacy.admin_base import content_accessed
        from memory.models import Source
        from memory.provenance import writer_lookup_register

        from . import personal_data
        from .admin_access import content_access_record
        from .chat_learning import LEARN_KIND, LEARN_TASK
        from .chat_learning.notes import learned_writers
        from .models import ChatImportJob, ExportJob
        from .views import account_privacy_context

        personal_data.register()
        content_accessed.connect(content_access_record, dispatch_uid="privacy.admin_access")
        lease_kind_register(
            "export",
            ExportJob,
            task="accounts.export_build",
            waiting=Q(status="queued"),
            working=Q(status="running"),
        )
        lease_kind_register(
            "chat_import",
            ChatImportJob,
            task="privacy.chat_import_run",
            waiting=Q(status="queued"),
            working=Q(status="running"),
        )
        lease_kind_register(
            LEARN_KIND,
            ChatImportJob,
            task=LEARN_TASK,
            waiting=Q(learn_status="queued"),
            working=Q(learn_status="running"),
        )
        account_section_register("privacy", account_privacy_context)
        # What an import's learning wrote reads, on the Memory page and in its log, as
        # "Learned from your ChatGPT import of …", linked to the import's panel.
        writer_lookup_register(Source.IMPORT_REVIEW, learned_writers)
