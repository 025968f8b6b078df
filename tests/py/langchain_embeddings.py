"""LangChain's OpenAIEmbeddings and ChatOpenAI pointed at the same `tagloop serve`: an app with
retrieval sets one base URL for both. The embeddings pass through to the upstream's
`/v1/embeddings` (the fake's vector of a text is [length, sum of its bytes mod 97, 1]); the chat
model then runs langchain_tools.py's two-step tool task through serve's core.

`check_embedding_ctx_length=False`: LangChain would otherwise count tokens with tiktoken, whose
encodings it downloads, and no request leaves the machine in these tests.
"""

from langchain_openai import OpenAIEmbeddings

from clientlib import TIMEOUT_SECONDS, base_url, check
from langchain_tools import run as run_tool_task


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

    # The chat model on the same base URL: langchain_tools.py's two-step task, whole.
    run_tool_task(streaming=False)
    print("langchain_embeddings: ok")


if __name__ == "__main__":
    main()
