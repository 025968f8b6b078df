"""One tool request through the `openai` SDK to `tagloop serve` in front of a real model
(tests/real_models.rs). A tiny model's wording is not tested, only the shape a client relies
on: either tool calls, each naming a declared function with arguments that parse as a JSON
object, or a text answer. An HTTP error (a decoding failure the server gave up on) raises, so
fails. Prints the answer's shape as one JSON line.
"""

import json

from openai import OpenAI

from clientlib import TIMEOUT_SECONDS, base_url, check, model


def function(name: str, description: str, params: dict, required: list) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": params, "required": required},
        },
    }


TOOLS = [
    function("get_weather", "The current weather in a city.", {"city": {"type": "string"}}, ["city"]),
    function(
        "add",
        "The sum of two integers.",
        {"a": {"type": "integer"}, "b": {"type": "integer"}},
        ["a", "b"],
    ),
]
DECLARED = {t["function"]["name"] for t in TOOLS}


def main() -> None:
    # A real model on two shared cores: generous, but bounded.
    client = OpenAI(base_url=base_url(), api_key="unused", timeout=4 * TIMEOUT_SECONDS, max_retries=0)
    r = client.chat.completions.create(
        model=model(),
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=TOOLS,
        temperature=0,
        max_tokens=200,
    )
    choice = r.choices[0]
    calls = choice.message.tool_calls or []
    for call in calls:
        check(call.function.name in DECLARED, f"undeclared function {call.function.name!r}")
        args = json.loads(call.function.arguments)
        check(isinstance(args, dict), f"arguments are not a JSON object: {call.function.arguments!r}")
    if calls:
        check(choice.finish_reason == "tool_calls", f"finish_reason {choice.finish_reason!r}")
    else:
        check(bool(choice.message.content), f"neither calls nor text: {choice}")
        check(choice.finish_reason in ("stop", "length"), f"finish_reason {choice.finish_reason!r}")
    print(json.dumps({
        "calls": [{"name": c.function.name, "arguments": c.function.arguments} for c in calls],
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
    }))


if __name__ == "__main__":
    main()
