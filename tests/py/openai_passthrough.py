"""The official `openai` SDK against `tagloop serve`'s pass-through: what an application sends to
its one base URL beside its chat. Embeddings (the SDK's default base64 encoding, and floats), a
model's lookup, a multipart upload (an audio transcription), and serve's own key: a client with
a wrong one gets 401 (the SDK's AuthenticationError) on a route serve passes through.

The upstream is the test's fake (tests/common/fake_server/passthrough.rs): its vector of a text
is [length, sum of its bytes mod 97, 1]; its transcription says how many bytes it received.
"""

from openai import AuthenticationError, OpenAI

from clientlib import TIMEOUT_SECONDS, base_url, check

# serve's own key: the Rust test (tests/serve_passthrough_clients.rs) starts serve with it.
SERVE_KEY = "sk-serve-clients-key-0123456789"

# The file uploaded: every byte value, not UTF-8 (the Rust test looks for it upstream).
UPLOAD = bytes(range(256)) * 1200


def fake_embedding(text: str) -> list:
    return [float(len(text)), float(sum(text.encode()) % 97), 1.0]


def main() -> None:
    client = OpenAI(
        base_url=base_url(), api_key=SERVE_KEY, timeout=TIMEOUT_SECONDS, max_retries=0
    )

    texts = ["hello", "world!"]
    got = client.embeddings.create(model="fake-embedder", input=texts)
    check(len(got.data) == 2, f"two vectors expected: {got}")
    for item, text in zip(got.data, texts):
        check(
            list(item.embedding) == fake_embedding(text),
            f"base64 vector of {text!r}: {item.embedding}",
        )
    got = client.embeddings.create(
        model="fake-embedder", input="Paris", encoding_format="float"
    )
    check(got.data[0].embedding == fake_embedding("Paris"), f"float vector: {got}")

    found = client.models.retrieve("fake-model")
    check(found.id == "fake-model", f"model: {found}")
    check(found.owned_by == "fake-upstream", f"not the upstream's model object: {found}")

    said = client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", UPLOAD, "audio/wav")
    )
    check(said.text.startswith("received "), f"transcription: {said}")
    received = int(said.text.split()[1])
    check(received > len(UPLOAD), f"the upstream received {received} bytes")

    wrong = OpenAI(
        base_url=base_url(), api_key="sk-wrong", timeout=TIMEOUT_SECONDS, max_retries=0
    )
    try:
        wrong.embeddings.create(model="fake-embedder", input="x")
    except AuthenticationError:
        pass
    else:
        check(False, "a wrong key got vectors")
    print("openai_passthrough: ok")


if __name__ == "__main__":
    main()
