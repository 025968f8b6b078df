"""An agent loop built on the `anthropic` SDK against `tagloop serve`'s Messages face:
LangChain's ChatAnthropic (langchain-anthropic, which drives the official SDK) with bind_tools,
a two-step tool task (call a tool, run it, send its result back, read the answer), once whole
and once streamed (LangChain then rebuilds the tool call from the `input_json_delta` events).

The upstream is the test's fake (see anthropic_tools.py).
"""

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from clientlib import TIMEOUT_SECONDS, base_url, check, model


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny, 21 C in {city}" if city == "Paris" else "unknown city"


TOOLS = {"get_weather": get_weather}
MAX_STEPS = 4  # the task takes two; a server that keeps calling fails instead of looping


def run(streaming: bool) -> None:
    what = "streamed" if streaming else "whole"
    llm = ChatAnthropic(
        model=model(),
        base_url=base_url().removesuffix("/").removesuffix("/v1"),
        api_key="unused",
        max_tokens=256,
        temperature=0,
        timeout=TIMEOUT_SECONDS,
        max_retries=0,
        streaming=streaming,
    ).bind_tools([get_weather])
    messages = [HumanMessage("What is the weather in Paris?")]
    calls = []
    for _ in range(MAX_STEPS):
        ai = llm.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            break
        for call in ai.tool_calls:
            check(call["name"] in TOOLS, f"{what}: unknown tool {call['name']!r}")
            calls.append(call)
            result = TOOLS[call["name"]].invoke(call["args"])
            messages.append(ToolMessage(result, tool_call_id=call["id"]))
    else:
        check(False, f"{what}: no answer after {MAX_STEPS} steps: {messages}")
    check(len(calls) == 1, f"{what}: {len(calls)} tool calls: {calls}")
    check(calls[0]["args"] == {"city": "Paris"}, f"{what}: arguments {calls[0]['args']!r}")
    check(calls[0]["id"].startswith("toolu_"), f"{what}: id {calls[0]['id']!r}")
    answer = messages[-1].text if hasattr(messages[-1], "text") else messages[-1].content
    answer = answer() if callable(answer) else answer
    check(isinstance(answer, str) and "21" in answer, f"{what}: answer {answer!r}")


def main() -> None:
    run(streaming=False)
    run(streaming=True)
    print("langchain_anthropic_tools: ok (whole, streamed)")


if __name__ == "__main__":
    main()
