"""The model's side of session search in a real turn: what it is taught (the tool
description it receives) and what it sends (recorded by the scripted model), and that a
wide OR query with other word forms finds the earlier conversation."""

from __future__ import annotations

import asyncio
import json

from sessions_app.models import Message, Session
from sessions_app.search.tool import NAME
from tests.chat.conftest import events_until, settle
from tests.factories import MessageFactory, SessionFactory

WIDE_QUERY = "trams OR tram OR streetcar OR Lisbon OR castle OR line"


def test_the_model_is_taught_wide_or_queries_and_its_query_finds_the_chat(
    owner, outsider, scripted, sockets
):
    earlier = SessionFactory(owner=owner, title="Lisbon trams")
    MessageFactory(session=earlier, role="user", content="Which one climbs up to the castle?")
    theirs = SessionFactory(owner=outsider, title="Lisbon trams too")
    MessageFactory(session=theirs, role="user", content="tram castle line")
    # Summaries are asked of the same model: answer them without tools.
    scripted.add_rule(lambda body: not body.get("tools"), reply="They discussed tram 28.")
    scripted.enqueue(tool_calls=[{"name": NAME, "arguments": {"query": WIDE_QUERY}}])
    scripted.enqueue(reply="Tram 28 goes up to the castle.")
    sockets.login(owner)

    async def scenario():
        ws = await sockets.open(owner)
        text = "Which tram did we say goes to the castle?"
        await ws.send_json_to({"type": "chat.send", "session": None, "text": text})
        events = await events_until(ws, "assistant.done")
        await ws.disconnect()
        await settle()
        return events

    asyncio.run(scenario())
    turn = [r for r in scripted.requests if r.get("tools")]
    # What the model was taught.
    tool = next(t["function"] for t in turn[0]["tools"] if t["function"]["name"] == NAME)
    assert "OR" in tool["description"] and "synonyms" in tool["description"]
    assert "OR" in tool["parameters"]["properties"]["query"]["description"]
    # What it sent, as recorded by the scripted model and saved with the turn.
    sent = [
        json.loads(call["function"]["arguments"])
        for m in turn[1]["messages"]
        for call in m.get("tool_calls") or []
    ]
    assert sent == [{"query": WIDE_QUERY}]
    saved = Message.objects.get(role="assistant", tool_calls__isnull=False, session__owner=owner)
    assert json.loads(saved.tool_calls[0]["function"]["arguments"]) == {"query": WIDE_QUERY}
    # What came back: the owner's chat (found by title and by "tram" ~ "trams"), not theirs.
    result = json.loads(turn[1]["messages"][-1]["content"])
    assert [r["session_id"] for r in result["results"]] == [earlier.id]
    assert Session.objects.filter(owner=owner).count() == 2
