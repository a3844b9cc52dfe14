"""Threat scanner: block rate on a corpus of known prompt-injection and exfiltration strings,
false-positive rate on ordinary memory notes in English and Chinese, and scan latency.

    python -m bench scanner --vendor sqlite      # the scanner uses no database

The corpora are tests/memory/corpus/injections.jsonl (one {"kind", "text"} per line, written
for this project from public taxonomies: OWASP LLM01 direct and indirect injection, jailbreak
personas, chat-template tokens, Markdown exfiltration, pipe-to-shell, and obfuscated spellings
of them) and tests/memory/corpus/notes.jsonl ({"lang", "text"}). tests/memory/
test_scanner_corpus.py holds the scanner to the same figures.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from bench.harness import ROOT, percentiles, stopwatch

# The scanner is plain Python: one run is enough, on the default vendor.
VENDORS = ("sqlite",)
CORPUS = ROOT / "tests" / "memory" / "corpus"
ROUNDS = 20


def load(name: str) -> list[dict[str, str]]:
    path: Path = CORPUS / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def corpus_rates() -> dict[str, Any]:
    """Block rate on the injections, false-positive rate on the notes, and what slipped."""
    from memory.scanner import scan

    attacks, notes = load("injections"), load("notes")
    missed = [row for row in attacks if not scan(row["text"])]
    flagged = [
        {**row, "findings": [f.id for f in findings]}
        for row in notes
        if (findings := scan(row["text"]))
    ]
    return {
        "injections": len(attacks),
        "blocked": len(attacks) - len(missed),
        "block_rate": round((len(attacks) - len(missed)) / len(attacks), 4),
        "missed": missed,
        "notes": len(notes),
        "notes_by_language": dict(Counter(row["lang"] for row in notes)),
        "false_positives": len(flagged),
        "false_positive_rate": round(len(flagged) / len(notes), 4),
        "flagged_notes": flagged,
        "blocked_by": dict(
            Counter(
                next(f.id for f in scan(row["text"])) for row in attacks if row not in missed
            ).most_common()
        ),
    }


def run(vendor: str) -> dict[str, Any]:
    from memory.scanner import scan

    figures = corpus_rates()
    texts = [row["text"] for row in load("injections") + load("notes")]
    samples = []
    for _ in range(ROUNDS):
        for text in texts:
            with stopwatch() as elapsed:
                scan(text)
            samples.append(elapsed())
    figures["scan_latency"] = percentiles(samples)
    long_note = "\n".join(texts)[:65_536]
    with stopwatch() as elapsed:
        scan(long_note)
    figures["scan_64k_chars_ms"] = round(elapsed(), 3)
    print(
        f"scanner: blocked {figures['blocked']}/{figures['injections']} injection strings "
        f"({figures['block_rate']:.1%}); {figures['false_positives']}/{figures['notes']} "
        f"ordinary notes flagged ({figures['false_positive_rate']:.2%})",
        flush=True,
    )
    return figures
