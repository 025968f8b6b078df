"""LangChain's OpenAIEmbeddings and ChatOpenAI pointed at the same `tagloop serve`: an app with
retrieval sets one base URL for both. The embeddings pass through to the upstream's
`/v1/embeddings` (the fake's vector of a text is [length, sum of its bytes mod 97, 1]); the chat
model then runs a two-step tool task through serve's core, as langchain_tools.py does.

`check_embedding_ctx_length=False`: LangChain would otherwise count tokens with tiktoken, whose
encodings it downloads, and no request leaves the machine in these tests.
"""

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings

from clientlib import TIMEOUT_SECONDS, base_url, check, model


@tool
def get_weather(city: str) -> str:
    """The current weather in a city."""
    return f"sunny, 21 C in {city}" if city == "Paris" else "unknown city"


def fake_embedding(text: str) -> list:
    return [float(len(text)), float(sum(text.encode()) % 97), 1.0]


def main() -> None:
    embeddings = OpenAIEmbeddings(
        model="fake-embedder",
        base_url=base_url(),
        api_key="unused",
        check_embedding_ctx_length=False,
        timeout=TIMEOUT_SECONDS,
        max_retries=0,
    )
    docs = ["Paris is in France.", "get_weather reads the forecast of a city."]
    vectors = embeddings.embed_documents(docs)
    check(len(vectors) == 2, f"two vectors expected: {vectors}")
    for vector, doc in zip(vectors, docs):
        check(vector == fake_embedding(doc), f"vector of {doc!r}: {vector}")
    query = "What is the weather in Paris?"
    check(embeddings.embed_query(query) == fake_embedding(query), "the query's vector")

    llm = ChatOpenAI(
        model=model(),
        base_url=base_url(),
        api_key="unused",
        temperature=0,
        timeout=TIMEOUT_SECONDS,
        max_retries=0,
    ).bind_tools([get_weather])
    messages = [HumanMessage(query)]
    ai = llm.invoke(messages)
    check(len(ai.tool_calls) == 1, f"one tool call expected: {ai}")
    call = ai.tool_calls[0]
    check(call["name"] == "get_weather" and call["args"] == {"city": "Paris"}, f"{call}")
    messages += [ai, ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"])]
    answer = llm.invoke(messages)
    check(not answer.tool_calls and "sunny" in answer.content, f"final answer: {answer}")
    print("langchain_embeddings: ok")


if __name__ == "__main__":
    main()
