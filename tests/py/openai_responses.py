"""The official `openai` SDK's `client.responses` against `tagloop serve`'s Responses face
(`/v1/responses`): a function call whole and streamed, its output sent back as a
`function_call_output` item (the whole conversation again, and then only the new item with
`previous_response_id`), the final text read; a stored response read back and deleted, and
hidden from another key; errors raised as the SDK's exceptions.

Every answer and every streamed event is validated against the Open Responses specification's
own Pydantic models (`openresponses-types`), from the raw bytes serve sent, besides being parsed
by the SDK. The upstream behind the server is the test's fake (tests/serve_clients.rs): it calls
get_weather(city="Paris") until the prompt holds the tool's result ("sunny, 21 C"), then answers
from it.
"""

import json

import httpx
import openai
import openresponses_types as spec
from openai import OpenAI

from clientlib import TIMEOUT_SECONDS, WEATHER_PARAMETERS, base_url, check, model

# The Responses API's flat function tool.
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "strict": True,
    "parameters": WEATHER_PARAMETERS,
}
QUESTION = "What is the weather in Paris?"
RESULT = "sunny, 21 C"

# The model of each event type serve may send, from the specification.
EVENTS = {
    "response.created": spec.ResponseCreatedStreamingEvent,
    "response.in_progress": spec.ResponseInProgressStreamingEvent,
    "response.completed": spec.ResponseCompletedStreamingEvent,
    "response.incomplete": spec.ResponseIncompleteStreamingEvent,
    "response.failed": spec.ResponseFailedStreamingEvent,
    "response.output_item.added": spec.ResponseOutputItemAddedStreamingEvent,
    "response.output_item.done": spec.ResponseOutputItemDoneStreamingEvent,
    "response.content_part.added": spec.ResponseContentPartAddedStreamingEvent,
    "response.content_part.done": spec.ResponseContentPartDoneStreamingEvent,
    "response.output_text.delta": spec.ResponseOutputTextDeltaStreamingEvent,
    "response.output_text.done": spec.ResponseOutputTextDoneStreamingEvent,
    "response.reasoning.delta": spec.ResponseReasoningDeltaStreamingEvent,
    "response.reasoning.done": spec.ResponseReasoningDoneStreamingEvent,
    "response.function_call_arguments.delta": spec.ResponseFunctionCallArgumentsDeltaStreamingEvent,
    "response.function_call_arguments.done": spec.ResponseFunctionCallArgumentsDoneStreamingEvent,
    "error": spec.ErrorStreamingEvent,
}


def valid_response(raw: dict, what: str) -> None:
    """The response object as the specification writes it (raises when it is not)."""
    spec.ResponseResource.model_validate(raw)
    check(raw["object"] == "response", f"{what}: object {raw['object']!r}")


def create(client: OpenAI, what: str, **params):
    """A whole response, its raw JSON validated, parsed by the SDK."""
    raw = client.responses.with_raw_response.create(model=model(), **params)
    valid_response(json.loads(raw.text), what)
    return raw.parse()


def raw_events(params: dict) -> list:
    """The streamed events of a request, read from the wire and each validated."""
    body = {"model": model(), "stream": True, **params}
    events = []
    url = base_url() + "/responses"
    with httpx.stream("POST", url, json=body, timeout=TIMEOUT_SECONDS) as r:
        check(r.status_code == 200, f"stream: status {r.status_code}")
        name = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = json.loads(line[len("data: "):])
                check(data["type"] == name, f"stream: event {name!r} holds {data['type']!r}")
                kind = EVENTS.get(name)
                check(kind is not None, f"stream: an event the specification does not name: {name!r}")
                kind.model_validate(data)
                events.append(data)
    numbers = [e["sequence_number"] for e in events]
    check(numbers == list(range(len(events))), f"stream: sequence numbers {numbers}")
    return events


def the_call(response, what: str):
    """The response's one function call, of get_weather with JSON arguments."""
    calls = [item for item in response.output if item.type == "function_call"]
    check(len(calls) == 1, f"{what}: {len(calls)} calls in {response.output}")
    call = calls[0]
    check(call.name == "get_weather", f"{what}: called {call.name!r}")
    check(json.loads(call.arguments) == {"city": "Paris"}, f"{what}: arguments {call.arguments!r}")
    check(bool(call.call_id), f"{what}: no call_id")
    return call


def main() -> None:
    client = OpenAI(base_url=base_url(), api_key="key-one", timeout=TIMEOUT_SECONDS, max_retries=0)
    other = OpenAI(base_url=base_url(), api_key="key-two", timeout=TIMEOUT_SECONDS, max_retries=0)
    ask = dict(tools=[WEATHER], temperature=0, instructions="Answer briefly.")

    # 1. Whole: the call, then the answer with the whole conversation sent again.
    first = create(client, "whole call", input=QUESTION, **ask)
    check(first.status == "completed", f"whole call: status {first.status}")
    call = the_call(first, "whole call")
    check(first.usage is not None and first.usage.total_tokens > 0, f"usage {first.usage}")
    again = [{"role": "user", "content": QUESTION}]
    again += [item.model_dump(exclude_none=True) for item in first.output]
    again.append({"type": "function_call_output", "call_id": call.call_id, "output": RESULT})
    answer = create(client, "whole answer", input=again, store=False, **ask)
    check("21" in answer.output_text, f"whole answer: {answer.output_text!r}")

    # 2. previous_response_id: only the new item, the conversation from the store.
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": RESULT}]
    continued = create(client, "continued", input=output, previous_response_id=first.id, **ask)
    check("21" in continued.output_text, f"continued: {continued.output_text!r}")
    check(continued.previous_response_id == first.id, "continued: previous_response_id")

    # 3. Streamed, validated on the wire; then through the SDK's stream helper.
    events = raw_events(dict(input=QUESTION, **ask))
    kinds = [e["type"] for e in events]
    check(kinds[:2] == ["response.created", "response.in_progress"], f"stream: {kinds}")
    check(kinds[-1] == "response.completed", f"stream: ends with {kinds[-1]}")
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
    check(json.loads(deltas) == {"city": "Paris"}, f"stream: argument deltas {deltas!r}")

    with client.responses.stream(model=model(), input=QUESTION, **ask) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    streamed = the_call(final, "streamed call")
    check("response.function_call_arguments.done" in seen, f"SDK stream: {seen}")
    pieces = []
    with client.responses.stream(
        model=model(),
        input=[{"type": "function_call_output", "call_id": streamed.call_id, "output": RESULT}],
        previous_response_id=final.id,
        **ask,
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                pieces.append(event.delta)
        final = stream.get_final_response()
    check("21" in final.output_text, f"streamed answer: {final.output_text!r}")
    check("".join(pieces) == final.output_text, f"streamed answer: deltas {pieces!r}")

    # 4. The stored response: read back, hidden from another key, deleted.
    stored = client.responses.retrieve(first.id)
    check(stored.id == first.id and stored.output[-1].type == "function_call", "retrieve")
    for attempt in (lambda: other.responses.retrieve(first.id), lambda: other.responses.delete(first.id)):
        try:
            attempt()
            check(False, "another key reached a stored response")
        except openai.NotFoundError:
            pass
    try:
        create(other, "other key", input=output, previous_response_id=first.id, **ask)
        check(False, "another key continued a stored response")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "previous_response_id", f"other key: {e.body}")
    client.responses.delete(first.id)
    try:
        client.responses.retrieve(first.id)
        check(False, "a deleted response was read")
    except openai.NotFoundError:
        pass

    # 5. An error: a tool_choice naming no tool is a 400 naming the field.
    try:
        client.responses.create(
            model=model(), input=QUESTION, tool_choice={"type": "function", "name": "nope"}, **ask
        )
        check(False, "an unknown tool_choice was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400, f"error: status {e.status_code}")
        check(e.body.get("param") == "tool_choice.name", f"error: {e.body}")

    print("openai_responses: ok (whole, two steps, previous_response_id, streamed, stored, error)")


if __name__ == "__main__":
    main()
