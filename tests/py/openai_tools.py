"""The official `openai` SDK against `tagloop serve`: a tool call whole and streamed, the result
sent back as a `tool` message, the final text read; `tool_choice` required, a named function and
none.

The upstream behind the server is the test's fake (tests/serve_clients.rs): it answers in
tagloop's text protocol with an action calling get_weather(city="Paris"), with a final answer
once the prompt holds the tool's result ("sunny, 21 C"), and with a plain answer when the
question asks for one "without tools". What is checked is what a client relies on: the shape the
SDK parses, arguments that are JSON for a declared function, ids that the tool message can quote
back, and the streamed deltas adding up to the same answer.
"""

import json

from openai import OpenAI

from clientlib import TIMEOUT_SECONDS, WEATHER_PARAMETERS, base_url, check, model

# `strict` so that the SDK's streaming helper accepts the tool and parses its arguments itself
# (it refuses non-strict tools): the client-side JSON parse is part of what is tested.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "strict": True,
        "parameters": WEATHER_PARAMETERS,
    },
}
QUESTION = {"role": "user", "content": "What is the weather in Paris?"}
RESULT = "sunny, 21 C"


def check_call(message, finish_reason: str, what: str) -> dict:
    """The answer is one call of get_weather with JSON arguments; returns the call."""
    check(finish_reason == "tool_calls", f"{what}: finish_reason {finish_reason!r}")
    calls = message.tool_calls or []
    check(len(calls) == 1, f"{what}: {len(calls)} tool calls: {message}")
    call = calls[0]
    check(call.type == "function", f"{what}: call type {call.type!r}")
    check(call.function.name == "get_weather", f"{what}: called {call.function.name!r}")
    args = json.loads(call.function.arguments)  # raises, so fails, when it is not JSON
    check(args == {"city": "Paris"}, f"{what}: arguments {args!r}")
    check(bool(call.id), f"{what}: the call has no id")
    return {"id": call.id, "arguments": call.function.arguments}


def check_text(message, finish_reason: str, needle: str, what: str) -> str:
    check(finish_reason == "stop", f"{what}: finish_reason {finish_reason!r}")
    check(not message.tool_calls, f"{what}: unexpected tool calls {message.tool_calls}")
    text = message.content or ""
    check(needle in text, f"{what}: {needle!r} not in the answer {text!r}")
    return text


def with_result(call: dict) -> list:
    """The conversation after the call: the assistant's call quoted back, then its result."""
    return [
        QUESTION,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call["arguments"]},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call["id"], "content": RESULT},
    ]


def main() -> None:
    client = OpenAI(base_url=base_url(), api_key="unused", timeout=TIMEOUT_SECONDS, max_retries=0)
    ask = dict(model=model(), tools=[WEATHER], temperature=0)

    # 1. Whole: the call, then the answer once the tool's result is in the history.
    r = client.chat.completions.create(messages=[QUESTION], **ask)
    call = check_call(r.choices[0].message, r.choices[0].finish_reason, "whole call")
    check(r.usage is not None and r.usage.total_tokens > 0, f"whole call: usage {r.usage}")
    r = client.chat.completions.create(messages=with_result(call), **ask)
    check_text(r.choices[0].message, r.choices[0].finish_reason, "21", "whole answer")

    # 2. Streamed: the SDK's helper reassembles the deltas into one completion and parses the
    # arguments of the strict tool; usage comes in the last chunk when asked for.
    deltas = []
    with client.chat.completions.stream(
        messages=[QUESTION], stream_options={"include_usage": True}, **ask
    ) as stream:
        for event in stream:
            if event.type == "tool_calls.function.arguments.delta":
                deltas.append(event.arguments_delta)
        final = stream.get_final_completion()
    choice = final.choices[0]
    streamed = check_call(choice.message, choice.finish_reason, "streamed call")
    check("".join(deltas) == streamed["arguments"], f"streamed call: deltas {deltas!r}")
    parsed = choice.message.tool_calls[0].function.parsed_arguments
    check(parsed == {"city": "Paris"}, f"streamed call: parsed by the SDK as {parsed!r}")
    check(final.usage is not None and final.usage.total_tokens > 0, f"streamed: usage {final.usage}")

    pieces = []
    with client.chat.completions.stream(
        messages=with_result(streamed), stream_options={"include_usage": True}, **ask
    ) as stream:
        for event in stream:
            if event.type == "content.delta":
                pieces.append(event.delta)
        final = stream.get_final_completion()
    choice = final.choices[0]
    text = check_text(choice.message, choice.finish_reason, "21", "streamed answer")
    check("".join(pieces) == text, f"streamed answer: deltas {pieces!r} vs {text!r}")

    # 3. tool_choice: required and a named function give calls; none gives text.
    for choice_param in ["required", {"type": "function", "function": {"name": "get_weather"}}]:
        r = client.chat.completions.create(messages=[QUESTION], tool_choice=choice_param, **ask)
        check_call(r.choices[0].message, r.choices[0].finish_reason, f"tool_choice={choice_param}")
    r = client.chat.completions.create(
        messages=[{"role": "user", "content": "Answer without tools: is Paris in France?"}],
        tool_choice="none",
        **ask,
    )
    check_text(r.choices[0].message, r.choices[0].finish_reason, "without tools", "tool_choice=none")

    print("openai_tools: ok (whole, streamed, required, named, none)")


if __name__ == "__main__":
    main()
