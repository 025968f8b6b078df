"""What the client scripts share: where `tagloop serve` is, and how a check fails.

The Rust tests (tests/serve_clients.rs, tests/real_models.rs) start the server and pass its
address in the environment:

    TAGLOOP_SERVE_URL    the base URL the SDKs take, `http://127.0.0.1:PORT/v1`
    TAGLOOP_SERVE_MODEL  the model name to send (default `fake-model`)

A script exits 0 when every check held, and 1 with the failed check on stderr otherwise; an
exception (an HTTP error the SDK raised, a timeout) exits non-zero with its traceback, which the
Rust test prints.
"""

import os
import sys

# Every request is bounded: a proxy that hangs fails the script instead of the suite.
TIMEOUT_SECONDS = 60.0

# The parameters of the scripts' get_weather tool (chat's `function.parameters`, the Responses
# API's flat `parameters`), closed for `strict` tools.
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city's name."}},
    "required": ["city"],
    "additionalProperties": False,
}


def base_url() -> str:
    url = os.environ.get("TAGLOOP_SERVE_URL")
    if not url:
        fail("TAGLOOP_SERVE_URL is not set (the Rust test sets it to the server's /v1 URL)")
    return url


def model() -> str:
    return os.environ.get("TAGLOOP_SERVE_MODEL", "fake-model")


def fail(message: str) -> None:
    print(f"FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition: bool, message: str) -> None:
    """Fail the script with `message` unless `condition` holds."""
    if not condition:
        fail(message)
