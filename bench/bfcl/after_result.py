"""The turn after a call's result: BFCL's one-turn questions made into the second turn of a
conversation, to measure what a client's agent loop meets once its calls have run.

BFCL asks each question once, so a rule that acts only after results (`tagloop serve`'s
`answered-call`: a turn whose every call repeats one already answered is refused and the answer
asked for) never acts on it. Here the conversation a client would send next is built from the
case itself: the user's question, an assistant message holding the question's right calls (the
first value BFCL accepts for each argument; an argument BFCL lets a call leave out is left out),
and one `tool` message per call with the same short result, `{"status": "ok"}`. The question
asked for those calls and they ran, so the right next turn is a text answer; a call is wrong,
and a call that is one of those already made (same name, same arguments) is a *repeat*.

The result says nothing about the question on purpose: a made-up value would be one more thing
the model could argue with, and what is measured is whether it calls again what it has already
called. Pure functions, so that `test_after_result.py` runs without BFCL.
"""

import json

RESULT = {"status": "ok"}


def first_value(accepted):
    """The first value BFCL accepts for an argument, or None when it may be left out (BFCL marks
    an omissible argument with an empty string among its accepted values): a call leaves out
    what the question did not ask for, as `unsaid-optional` makes serve's calls do."""
    if "" in accepted or not accepted:
        return None
    return _chosen(accepted[0])


def _chosen(value):
    """A value as a call writes it: in BFCL's ground truth an object argument's members list
    their accepted values too (`{"min": [300000], "max": [400000]}`), at any depth, and so do
    the objects of a list."""
    if isinstance(value, dict):
        out = {}
        for key, accepted in value.items():
            chosen = first_value(accepted) if isinstance(accepted, list) else _chosen(accepted)
            if chosen is not None:
                out[key] = chosen
        return out
    if isinstance(value, list):
        return [_chosen(v) if isinstance(v, dict) else v for v in value]
    return value


def right_calls(ground_truth, declared):
    """The calls of BFCL's ground truth (`[{name: {arg: [accepted, …]}}, …]`) as OpenAI tool calls
    (name, arguments as a JSON text), named as the tools were declared: BFCL's OpenAI converter
    writes a dotted name with underscores. None when a call names no declared tool."""
    calls = []
    for n, call in enumerate(ground_truth):
        (name, accepted), = call.items()
        if name not in declared:
            name = name.replace(".", "_")
        if name not in declared:
            return None
        args = {}
        for arg, values in accepted.items():
            value = first_value(values)
            if value is not None:
                args[arg] = value
        calls.append({"id": f"call_{n}", "name": name, "arguments": json.dumps(args)})
    return calls


def second_turn(messages, calls):
    """The conversation after `calls` ran: the question's messages, the assistant's calls, and
    one result per call."""
    return list(messages) + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]},
    ] + [{"role": "tool", "tool_call_id": c["id"], "content": json.dumps(RESULT)} for c in calls]


def judge(made, answered):
    """The outcome of the turn after the results: `text` (right), `repeat` (every call is one of
    those already answered), or `call` (something else called)."""
    if not made:
        return "text"

    def key(c):
        try:
            return c["name"], json.dumps(json.loads(c["arguments"] or "null"), sort_keys=True)
        except ValueError:
            return c["name"], c["arguments"]
    done = {key(c) for c in answered}
    return "repeat" if all(key(c) in done for c in made) else "call"
