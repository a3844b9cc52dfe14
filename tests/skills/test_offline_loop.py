"""The generic offline tool loop (sessions_app.agent.offline_loop) against the scripted
model: real HTTP, real registry, real database."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from asgiref.sync import async_to_sync

from devtools.scripted_llm import Fault
from sessions_app.agent import llm
from sessions_app.agent.llm import LLMError
from sessions_app.agent.offline_loop import run_offline_loop
from sessions_app.agent.tools import Tool, ToolContext, ToolResult, registry
from sessions_app.models import Message
from skills_app.models import Skill

from .conftest import make_conversation, skill_md

pytestmark = pytest.mark.django_db

PROBE_CALLS: list[dict] = []


def _probe(ctx: ToolContext, args: dict) -> ToolResult:
    PROBE_CALLS.append(args)
    return ToolResult(ok=True, payload={"success": True}, summary="probed")


@pytest.fixture
def probe_tool() -> Iterator[str]:
    """A registered tool that is not on the reviewer's list, recording every call."""
    PROBE_CALLS.clear()
    registry.register(
        Tool(
            name="test_probe",
            toolset="test",
            description="Test only.",
            parameters={"type": "object"},
            handler=_probe,
        )
    )
    yield "test_probe"
    registry._tools.pop("test_probe", None)


def run(**kwargs):
    kwargs.setdefault("entry", llm.model_for("summary"))
    return async_to_sync(run_offline_loop)(**kwargs)


def test_loop_runs_allowed_tools_then_returns_the_final_answer(owner, scripted):
    session = make_conversation(owner)
    before = Message.objects.filter(session=session).count()
    scripted.enqueue(
        tool_calls=[
            {
                "name": "skill_manage",
                "arguments": {"action": "create", "name": "k8s", "content": skill_md("k8s")},
            }
        ]
    )
    scripted.enqueue(reply="Created the skill.")
    result = run(
        messages=[{"role": "user", "content": "go"}],
        ctx=ToolContext(user=owner, session_id=session.pk, origin="review"),
        allowed_tools={"skill_manage", "skill_view"},
    )
    assert result.text == "Created the skill." and result.stopped == "final"
    assert result.iterations == 2
    assert [(t.name, t.ok) for t in result.tool_results] == [("skill_manage", True)]
    assert result.tool_results[0].notice[0] == "skill_created"
    assert result.usage.prompt_tokens == sum(u["prompt_tokens"] for u in scripted.usages)
    assert Skill.objects.get(owner=owner).revisions.get().author == "review"
    # The model saw only the allowed tools, and the tool result came back to it.
    first, second = scripted.requests
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["skill_manage", "skill_view"]
    assert second["messages"][-1]["role"] == "tool"
    assert json.loads(second["messages"][-1]["content"])["success"] is True
    # Nothing of the loop reached the transcript.
    assert Message.objects.filter(session=session).count() == before


def test_a_tool_outside_the_allowed_set_is_denied_and_never_runs(owner, scripted, probe_tool):
    scripted.enqueue(tool_calls=[{"name": probe_tool, "arguments": {}}])
    scripted.enqueue(tool_calls=[{"name": "terminal", "arguments": {"command": "rm -rf /"}}])
    scripted.enqueue(reply="Nothing to save.")
    result = run(
        messages=[{"role": "user", "content": "go"}],
        ctx=ToolContext(user=owner, origin="review"),
        allowed_tools={"skills_list"},
    )
    assert PROBE_CALLS == []
    assert [(t.name, t.ok) for t in result.tool_results] == [
        (probe_tool, False),
        ("terminal", False),
    ]
    denial = json.loads(scripted.requests[1]["messages"][-1]["content"])
    assert denial["code"] == "tool_not_available"
    assert "not available here" in denial["error"]
    assert result.text == "Nothing to save."


def test_loop_stops_after_max_iterations(owner, scripted):
    scripted.enqueue(tool_calls=[{"name": "skills_list", "arguments": {}}], count=5)
    result = run(
        messages=[{"role": "user", "content": "go"}],
        ctx=ToolContext(user=owner, origin="flush"),
        allowed_tools={"skills_list"},
        max_iterations=3,
    )
    assert (result.stopped, result.iterations, result.text) == ("max_iterations", 3, "")
    assert len(scripted.requests) == 3 and len(result.tool_results) == 3


def test_model_errors_reach_the_caller(owner, scripted):
    scripted.set_fault(Fault.server_error(503))
    with pytest.raises(LLMError) as info:
        run(
            messages=[{"role": "user", "content": "go"}],
            ctx=ToolContext(user=owner, origin="review"),
            allowed_tools={"skills_list"},
        )
    assert info.value.code == "llm_server_error"
