from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Serve the scripted OpenAI-compatible model for demos: point OPENAI_BASE_URL at "
        "http://127.0.0.1:8001/v1 and set HERMES_MODEL=scripted."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8001)
        parser.add_argument("--chunk-delay", type=float, default=0.02)

    def handle(self, *args, **options):
        from devtools.scripted_llm import main

        main(
            [
                "--host", options["host"], "--port", str(options["port"]),
                "--chunk-delay", str(options["chunk_delay"]),
            ]
        )  # fmt: skip
