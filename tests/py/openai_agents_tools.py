"""The OpenAI Agents SDK (`openai-agents`) running an agent with two function tools against
`tagloop serve`, over the Responses API (the SDK's default model class, `OpenAIResponsesModel`).

The upstream is the test's fake (tests/serve_clients.rs), which speaks only tagloop's text
protocol: it calls get_weather(city="Paris") first, get_time(city="Paris") once the weather's
result ("cloudy, 18 C") is in its prompt, and answers once the time ("14:05") is there too. The
agent's loop, its tool calls and the results it sends back are the SDK's own; what is checked is
that the task finishes with both tools called, in order, with the arguments the model wrote.
Tracing is off: nothing leaves the machine.
"""

from agents import Agent, Runner, function_tool, set_default_openai_api, set_tracing_disabled
from agents import set_default_openai_client
from openai import AsyncOpenAI

from clientlib import TIMEOUT_SECONDS, base_url, check, model

CALLED: list = []


@function_tool
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    CALLED.append(("get_weather", city))
    return "cloudy, 18 C"


@function_tool
def get_time(city: str) -> str:
    """The local time in a city.

    Args:
        city: The city's name.
    """
    CALLED.append(("get_time", city))
    return "14:05"


def main() -> None:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url(), api_key="agent-key", timeout=TIMEOUT_SECONDS, max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_default_openai_api("responses")
    agent = Agent(
        name="Assistant",
        instructions="Answer briefly, using the tools for facts.",
        model=model(),
        tools=[get_weather, get_time],
    )
    result = Runner.run_sync(agent, "What are the weather and the local time in Paris?", max_turns=6)
    check(
        CALLED == [("get_weather", "Paris"), ("get_time", "Paris")],
        f"the tools called: {CALLED}",
    )
    answer = str(result.final_output)
    check("18" in answer and "14:05" in answer, f"the final answer: {answer!r}")
    print(f"openai_agents_tools: ok ({len(CALLED)} tool calls, answer {answer!r})")


if __name__ == "__main__":
    main()
