"""The scanner against the corpora in tests/memory/corpus/ (see bench/bench_scanner.py,
which prints the same figures): every known injection string is blocked, and at most 1% of
ordinary notes in English and Chinese are."""

from __future__ import annotations

from bench.bench_scanner import corpus_rates, load


def test_the_corpora_are_big_enough_and_bilingual():
    attacks, notes = load("injections"), load("notes")
    assert len(attacks) >= 200 and len({row["text"] for row in attacks}) == len(attacks)
    assert len(notes) >= 300 and len({row["text"] for row in notes}) == len(notes)
    languages = {row["lang"] for row in notes}
    assert languages == {"en", "zh"}
    assert sum(row["lang"] == "zh" for row in notes) >= 100


def test_every_injection_is_blocked_and_at_most_one_percent_of_notes_are():
    rates = corpus_rates()
    assert rates["missed"] == []
    assert rates["block_rate"] == 1.0
    assert rates["false_positive_rate"] <= 0.01, rates["flagged_notes"]
