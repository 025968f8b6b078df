"""The official `anthropic` SDK against `tagloop serve`'s Messages face: a tool call whole and
streamed, its result sent back as a `tool_result` block, the final text read; `tool_choice` any,
a named tool and none; the token count; an error the SDK raises as its own exception.

The upstream behind the server is the test's fake (tests/serve_clients.rs), which speaks only
tagloop's text protocol: an action calling get_weather(city="Paris"), a final answer once the
prompt holds the tool's result ("sunny, 21 C"), a plain answer when the question asks for one
"without tools".
"""

import anthropic

from clientlib import TIMEOUT_SECONDS, base_url, check, model

WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city's name."}},
        "required": ["city"],
    },
}
QUESTION = {"role": "user", "content": "What is the weather in Paris?"}
RESULT = "sunny, 21 C"


def client() -> anthropic.Anthropic:
    # The SDK adds /v1/messages itself.
    root = base_url().removesuffix("/").removesuffix("/v1")
    return anthropic.Anthropic(
        base_url=root, api_key="unused", timeout=TIMEOUT_SECONDS, max_retries=0
    )


def check_call(message, what: str):
    """The answer is one tool_use block calling get_weather; returns it."""
    check(message.stop_reason == "tool_use", f"{what}: stop_reason {message.stop_reason!r}")
    uses = [b for b in message.content if b.type == "tool_use"]
    check(len(uses) == 1, f"{what}: {len(uses)} tool_use blocks: {message.content}")
    use = uses[0]
    check(use.name == "get_weather", f"{what}: called {use.name!r}")
    check(use.input == {"city": "Paris"}, f"{what}: input {use.input!r}")
    check(use.id.startswith("toolu_"), f"{what}: id {use.id!r}")
    check(message.usage.input_tokens > 0, f"{what}: usage {message.usage}")
    return use


def check_text(message, needle: str, what: str) -> str:
    check(message.stop_reason == "end_turn", f"{what}: stop_reason {message.stop_reason!r}")
    texts = [b.text for b in message.content if b.type == "text"]
    text = "".join(texts)
    check(needle in text, f"{what}: {needle!r} not in {text!r}")
    check(all(b.type == "text" for b in message.content), f"{what}: {message.content}")
    return text


def with_result(message, use) -> list:
    """The conversation after the call: the assistant's blocks quoted back, then the result."""
    return [
        QUESTION,
        {"role": "assistant", "content": message.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": RESULT}],
        },
    ]


def whole(c: anthropic.Anthropic) -> None:
    first = c.messages.create(
        model=model(), max_tokens=256, tools=[WEATHER], messages=[QUESTION]
    )
    use = check_call(first, "whole")
    second = c.messages.create(
        model=model(), max_tokens=256, tools=[WEATHER], messages=with_result(first, use)
    )
    check_text(second, "21", "whole, step 2")


def streamed(c: anthropic.Anthropic) -> None:
    kinds = []
    with c.messages.stream(
        model=model(), max_tokens=256, tools=[WEATHER], messages=[QUESTION]
    ) as stream:
        for event in stream:
            kinds.append(event.type)
        first = stream.get_final_message()
    check(kinds[0] == "message_start", f"streamed: events {kinds}")
    check("content_block_start" in kinds and "message_stop" in kinds, f"streamed: {kinds}")
    use = check_call(first, "streamed")
    with c.messages.stream(
        model=model(), max_tokens=256, tools=[WEATHER], messages=with_result(first, use)
    ) as stream:
        text = "".join(stream.text_stream)
        second = stream.get_final_message()
    check("21" in text, f"streamed, step 2: text {text!r}")
    check_text(second, "21", "streamed, step 2")


def choices(c: anthropic.Anthropic) -> None:
    for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
        m = c.messages.create(
            model=model(), max_tokens=256, tools=[WEATHER], messages=[QUESTION],
            tool_choice=choice,
        )
        check_call(m, f"tool_choice {choice}")
    plain = {"role": "user", "content": "Is Paris in France? Answer without tools."}
    m = c.messages.create(
        model=model(), max_tokens=256, tools=[WEATHER], messages=[plain],
        tool_choice={"type": "none"},
    )
    check_text(m, "without tools", "tool_choice none")


def count_and_error(c: anthropic.Anthropic) -> None:
    count = c.messages.count_tokens(model=model(), tools=[WEATHER], messages=[QUESTION])
    check(count.input_tokens > 50, f"count_tokens: {count}")
    try:
        c.messages.create(
            model=model(), max_tokens=256, tools=[WEATHER], messages=[QUESTION],
            tool_choice={"type": "tool", "name": "no_such_tool"},
        )
    except anthropic.BadRequestError as e:
        check(e.status_code == 400, f"error: status {e.status_code}")
        check("no_such_tool" in str(e), f"error: message {e}")
    else:
        check(False, "error: a tool_choice naming no tool was accepted")


def main() -> None:
    c = client()
    whole(c)
    streamed(c)
    choices(c)
    count_and_error(c)
    print("anthropic_tools: ok (whole, streamed, tool_choice, count_tokens, error)")


if __name__ == "__main__":
    main()
