"""Transcript format and the 100,000-character window around the matches."""

from __future__ import annotations

from types import SimpleNamespace

from sessions_app.search.transcript import (
    EARLIER_MARK,
    LATER_MARK,
    TOOL_CUT_MARK,
    format_message,
    format_transcript,
    match_positions,
    truncate_around_matches,
)


def msg(role, content="", **kw):
    return SimpleNamespace(
        role=role,
        content=content,
        tool_name=kw.get("tool_name", ""),
        tool_calls=kw.get("tool_calls"),
    )


def test_roles_are_labelled_and_system_messages_left_out():
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "memory", "arguments": "{}"}},
    ]
    text = format_transcript(
        [
            msg("system", "you are hermes"),
            msg("user", "deploy it"),
            msg("assistant", "", tool_calls=calls),
            msg("tool", "ok", tool_name="terminal"),
            msg("assistant", "Done."),
        ]
    )
    assert text == (
        "[USER]: deploy it\n\n[ASSISTANT]: [Called: terminal, memory]\n\n"
        "[TOOL:terminal]: ok\n\n[ASSISTANT]: Done."
    )


def test_long_tool_output_is_cut_in_the_middle():
    output = "A" * 300 + "B" * 400 + "C" * 300
    line = format_message("tool", output, tool_name="terminal")
    assert line == "[TOOL:terminal]: " + "A" * 250 + TOOL_CUT_MARK + "C" * 250


def test_tool_output_of_500_chars_is_kept_whole():
    assert format_message("tool", "x" * 500, tool_name="t") == "[TOOL:t]: " + "x" * 500


def test_short_text_is_untouched():
    assert truncate_around_matches("short deploy text", ["deploy"], max_chars=100) == (
        "short deploy text"
    )


def test_full_phrase_wins_over_scattered_terms():
    text = "deploy " + "x" * 500 + " script " + "y" * 500 + " deploy script " + "z" * 500
    assert match_positions(text, ["deploy", "script"]) == [text.index("deploy script")]


def test_rarest_term_with_the_others_nearby():
    # "rollback" is rarest; only its second occurrence has "deploy" within 200 chars.
    text = (
        "rollback "
        + "." * 1000
        + "deploy " * 20
        + "." * 1000
        + " deploy then rollback "
        + "." * 1000
    )
    positions = match_positions(text, ["deploy", "rollback"])
    assert positions == [text.rindex("rollback")]


def test_any_term_when_they_never_meet():
    text = "alpha " + "." * 1000 + " beta " + "." * 1000 + " alpha"
    assert match_positions(text, ["alpha", "beta"]) == [0, 1007, 2013]


def test_no_match_keeps_the_start_and_marks_the_cut():
    text = "a" * 1000
    out = truncate_around_matches(text, ["zzz"], max_chars=100)
    assert out == "a" * 100 + LATER_MARK


def test_window_starts_a_quarter_before_the_best_cluster():
    text = "." * 5000 + "needle" + "." * 5000
    out = truncate_around_matches(text, ["needle"], max_chars=1000)
    body = out.removeprefix(EARLIER_MARK).removesuffix(LATER_MARK)
    assert out.startswith(EARLIER_MARK) and out.endswith(LATER_MARK)
    assert len(body) == 1000
    assert body.index("needle") == 250


def test_window_prefers_the_densest_cluster():
    text = "needle" + "." * 5000 + ("needle.." * 10) + "." * 5000
    out = truncate_around_matches(text, ["needle"], max_chars=1000)
    assert out.count("needle") == 10


def test_ties_keep_the_earliest_window():
    text = "." * 3000 + "needle" + "." * 3000 + "needle" + "." * 3000
    out = truncate_around_matches(text, ["needle"], max_chars=1000)
    body = out.removeprefix(EARLIER_MARK).removesuffix(LATER_MARK)
    assert text.index(body) == 3000 - 250


def test_window_near_the_end_is_shifted_back_inside_the_text():
    text = "." * 5000 + "needle"
    out = truncate_around_matches(text, ["needle"], max_chars=1000)
    assert out.startswith(EARLIER_MARK) and not out.endswith(LATER_MARK)
    assert out.endswith("needle")
    assert len(out) == len(EARLIER_MARK) + 1000


def test_match_is_case_insensitive():
    text = "." * 5000 + "NeEdLe" + "." * 5000
    out = truncate_around_matches(text, ["needle"], max_chars=1000)
    assert "NeEdLe" in out
