"""BFCL (the Berkeley Function Calling Leaderboard) through the `openai` SDK, against any
OpenAI-compatible base URL: `tagloop serve`, or llama-server's own tool calling as a baseline;
with `--face anthropic` through the `anthropic` SDK against `tagloop serve`'s Messages face
(`/v1/messages`), with `--face responses` through the `openai` SDK's `client.responses.create`
against its Responses face (`/v1/responses`), with `--face both` through the chat and Messages
faces, and with `--face all` through all three, case by case, to compare the faces on the same
model and slice.

For each case of a category, BFCL's function docs become OpenAI `tools` (BFCL's own converter
for its OpenAI handler, imported), the case's question is sent once, and the answer is scored:

* a call the client could not use (arguments that are not a JSON object, a function that was
  not declared) is a *decoding failure*, and wrong;
* usable calls are turned into BFCL's model-output shape (`[{name: {arg: value}}]`) and judged
  by BFCL's AST checker (`ast_checker`), as BFCL judges its OpenAI function-calling models;
* a text answer (no call) is wrong, except in `irrelevance` and `live_irrelevance`, where no function fits the
  question and a case is right exactly when no call is made;
* an HTTP error (the server could not decode its own model, a timeout) is counted apart, and wrong.

Printed per category (and face): accuracy, decoding failures, text answers, errors, seconds per
case (wall time of the one request, generation included); with `--face both` or `all`, how many
cases the faces answered the same (same outcome, same calls), all of them and each pair. `--json FILE` writes one record per case,
with the response's id (`tagloop serve --session-dir` names the case's transcript by it).

`--split dev` runs cases 0–49 of every category, the cases a change is tuned on; `--split
validation` runs cases 50–79, on which a change is kept or rejected (docs/development.md). A
validation run shows totals only: no line per case while it runs, no case ids where the faces
differ, and `--json` writes the per-category totals instead of the cases, so that nobody reads
(and writes a rule for) a validation case.

`--after-result` asks, instead of the question, the turn after the question's right calls ran
(after_result.py: the question, the assistant's calls as BFCL's ground truth gives them, one
`{"status": "ok"}` result each): right exactly when no call comes back; `repeat` counts the
answers that call again what was already answered. Categories with a ground truth only, through
the OpenAI face.

Through the Anthropic face the same tools go as `{name, description, input_schema}`, system
messages as `system`, and each `tool_use` block is a call (its `input` an object already).
Through the Responses face the tools go flat (`{type: function, name, description,
parameters}`), system messages as `instructions`, the others as `message` input items, with
`store: false`; each `function_call` output item is a call.

Run through scripts/bfcl.sh, which builds the venv this needs. Only what BFCL's data loading,
converter and AST checker import is installed; two of its imports are stubbed (see `_stub`).
"""

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import types
from collections import defaultdict

import after_result  # beside this file: the script's folder is on the path


def _stub(name: str, **attrs) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module


class _AnyModel(dict):
    """What the AST checker asks of a model's config: only `underscore_to_dot`, whether the
    model saw function names with `.` replaced by `_` (OpenAI's names cannot hold a dot, and
    BFCL's OpenAI converter renames them). True for every model sent through this runner."""

    def __missing__(self, key):
        return types.SimpleNamespace(underscore_to_dot=True)


def _import_bfcl():
    """BFCL's pieces this runner uses, without the heavy dependencies its package declares.

    * `bfcl_eval.constants.model_config` imports every model handler of the leaderboard
      (anthropic, cohere, mistralai, google-genai, qwen-agent, boto3, …) only to build
      MODEL_CONFIG_MAPPING; the AST checker reads one flag from it. Stubbed with `_AnyModel`.
    * `bfcl_eval.model_handler.parser.{java,js}_parser` need tree-sitter and its grammars;
      they parse Java/JavaScript model output, which the Python categories never have, and are
      imported only by the module that also holds the OpenAI converter. Stubbed.
    BFCL writes result folders on import: they go to a temporary folder.
    """
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-"))
    _stub("bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING=_AnyModel())
    _stub("bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=None)
    _stub("bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=None)
    from bfcl_eval.constants.enums import Language, ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import convert_to_tool
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    def to_tools(functions):
        return convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)

    return types.SimpleNamespace(
        Language=Language,
        ast_checker=ast_checker,
        to_tools=to_tools,
        load_dataset_entry=load_dataset_entry,
        load_ground_truth_entry=load_ground_truth_entry,
    )


CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance"]
# Categories where no function fits: right exactly when no call comes back (no ground truth).
NO_CALL = {"irrelevance", "live_irrelevance"}


# The splits of docs/development.md: tune on dev, decide on validation's totals.
SPLITS = {"dev": range(0, 50), "validation": range(50, 80)}


def parse_range(text: str) -> range:
    start, _, end = text.partition(":")
    return range(int(start or 0), int(end) if end else 10**9)


def usable_calls(calls, declared: set):
    """The answer's calls as BFCL's model output, or the reason the client could not use them."""
    output = []
    for call in calls:
        name = call["name"]
        if name not in declared:
            return None, f"undeclared function {name!r}"
        try:
            args = json.loads(call["arguments"] or "")
        except ValueError:
            return None, f"arguments of {name} are not JSON: {call['arguments']!r:.200}"
        if not isinstance(args, dict):
            return None, f"arguments of {name} are not a JSON object"
        output.append({name: args})
    return output, None


def ask_openai(client, args, messages, tools):
    """One case through the OpenAI face: its calls, its text, why it ended, the response's id."""
    response = client.chat.completions.create(
        model=args.model, messages=messages, tools=tools, temperature=0,
        max_tokens=args.max_tokens,
    )
    message = response.choices[0].message
    calls = [{"name": c.function.name, "arguments": c.function.arguments}
             for c in message.tool_calls or []]
    return calls, message.content or "", response.choices[0].finish_reason, response.id


def ask_anthropic(client, args, messages, tools):
    """One case through the Anthropic face: the same tools as Anthropic's, the same messages
    (returned as the OpenAI face's are)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    # This SDK's `create` has no `temperature` argument: it goes in the body as the OpenAI face's.
    kwargs = dict(
        model=args.model, max_tokens=args.max_tokens, extra_body={"temperature": 0},
        messages=[m for m in messages if m["role"] != "system"],
        tools=[{"name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"]["parameters"]} for t in tools],
    )
    if system:
        kwargs["system"] = system
    message = client.messages.create(**kwargs)
    calls = [{"name": b.name, "arguments": json.dumps(b.input)}
             for b in message.content if b.type == "tool_use"]
    text = "".join(b.text for b in message.content if b.type == "text")
    return calls, text, message.stop_reason, message.id


def ask_responses(client, args, messages, tools):
    """One case through the Responses face: flat function tools, system messages as
    `instructions`, nothing stored (returned as the OpenAI face's are)."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    kwargs = dict(
        model=args.model, temperature=0, max_output_tokens=args.max_tokens, store=False,
        input=[{"type": "message", "role": m["role"], "content": m["content"]}
               for m in messages if m["role"] != "system"],
        tools=[{"type": "function", "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "parameters": t["function"]["parameters"], "strict": False} for t in tools],
    )
    if system:
        kwargs["instructions"] = system
    response = client.responses.create(**kwargs)
    calls = [{"name": item.name, "arguments": item.arguments}
             for item in response.output if item.type == "function_call"]
    return calls, response.output_text or "", response.status, response.id


ASK = {"openai": ask_openai, "anthropic": ask_anthropic, "responses": ask_responses}
FACES = {"both": ["openai", "anthropic"], "all": ["openai", "anthropic", "responses"]}


def run_case(face, client, bfcl, args, category, entry, truth):
    tools = bfcl.to_tools(copy.deepcopy(entry["function"]))
    declared = {t["function"]["name"] for t in tools}
    record = {"id": entry["id"], "category": category, "face": face}
    ask = ASK[face]
    messages = entry["question"][0]
    answered = None
    if args.after_result:
        answered = after_result.right_calls(truth["ground_truth"], declared)
        if answered is None:
            record.update(outcome="error", correct=False, seconds=0.0,
                          error="the ground truth names a function that was not declared")
            return record
        messages = after_result.second_turn(messages, answered)
    started = time.monotonic()
    try:
        calls, content, finish, response_id = ask(client, args, messages, tools)
    except Exception as e:  # an HTTP error or a timeout: the client got nothing usable
        record.update(outcome="error", correct=False, error=f"{type(e).__name__}: {e}"[:500])
        record["seconds"] = round(time.monotonic() - started, 3)
        return record
    record["seconds"] = round(time.monotonic() - started, 3)
    record["finish_reason"] = finish
    # `tagloop serve --session-dir` names each transcript by this id: a case's turns are found
    # from its record.
    record["response_id"] = response_id
    record["calls"] = calls
    record["content"] = content[:500]
    output, why = usable_calls(calls, declared)
    if why is not None:
        record.update(outcome="decoding_failure", correct=False, error=why)
    elif answered is not None:
        outcome = after_result.judge(calls, answered)
        record.update(outcome=outcome, correct=outcome == "text")
    elif not output:
        record.update(outcome="text", correct=category in NO_CALL)
    elif category in NO_CALL:
        record.update(outcome="call", correct=False)
    else:
        checked = bfcl.ast_checker(
            truth["function"],
            output,
            truth["ground_truth"],
            bfcl.Language.PYTHON,
            category,
            args.model.replace("/", "_"),
        )
        record.update(outcome="call", correct=bool(checked["valid"]))
        if not checked["valid"]:
            record["error"] = checked.get("error_type")
    return record


def summary(records):
    by = defaultdict(list)
    for r in records:
        by[(r["face"], r["category"])].append(r)
    rows = []
    for (face, category), rs in by.items():
        n = len(rs)
        count = lambda outcome: sum(r["outcome"] == outcome for r in rs)
        rows.append({
            "face": face,
            "category": category,
            "cases": n,
            "correct": sum(r["correct"] for r in rs),
            "accuracy": round(sum(r["correct"] for r in rs) / n, 3) if n else 0.0,
            "decoding_failures": count("decoding_failure"),
            "text_answers": count("text"),
            "repeats": count("repeat"),
            "errors": count("error"),
            "seconds_per_case": round(sum(r["seconds"] for r in rs) / n, 2) if n else 0.0,
        })
    return rows


def agreement(records, faces, show_ids: bool = True) -> str:
    """How many cases the faces answered alike: the same outcome and the same calls (names and
    arguments, compared as JSON values)."""
    def value(text):
        try:
            return json.loads(text or "null")
        except ValueError:
            return text

    def key(r):
        calls = [(c["name"], value(c["arguments"])) for c in r.get("calls", [])]
        return r["outcome"], r["correct"], json.dumps(calls, sort_keys=True)
    by = defaultdict(dict)
    for r in records:
        by[r["id"]][r["face"]] = r
    whole = {i: f for i, f in by.items() if all(face in f for face in faces)}
    same = [i for i, f in whole.items() if len({key(f[face]) for face in faces}) == 1]
    differ = sorted(set(whole) - set(same))
    line = f"faces ({', '.join(faces)}) agree on {len(same)}/{len(whole)} cases"
    if len(faces) > 2:
        for a, b in [(a, b) for n, a in enumerate(faces) for b in faces[n + 1:]]:
            alike = sum(key(f[a]) == key(f[b]) for f in whole.values())
            line += f"; {a} and {b} on {alike}/{len(whole)}"
    if not show_ids:
        return line
    return line + (f"; they differ on {', '.join(differ)}" if differ else "")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="the OpenAI-compatible base URL (…/v1)")
    p.add_argument("--face", choices=["openai", "anthropic", "responses", "both", "all"], default="openai",
                   help="the API the cases are sent through (anthropic: tagloop serve's /v1/messages; "
                        "responses: its /v1/responses; both: openai and anthropic; all: the three)")
    p.add_argument("--model", required=True, help="the model name to send")
    p.add_argument("--category", action="append",
                   help=f"a BFCL category, repeatable or comma-separated (default: {','.join(CATEGORIES[:3])},irrelevance)")
    p.add_argument("--range", default=None, help="cases START:END of each category (default 0:30)")
    p.add_argument("--split", choices=sorted(SPLITS),
                   help="dev: cases 0-49 of each category; validation: cases 50-79, totals only")
    p.add_argument("--max-tokens", type=int, default=400, help="per answer (default 400)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--api-key-env", default=None, help="the environment variable holding the key")
    p.add_argument("--json", metavar="FILE", help="write one JSON record per case")
    p.add_argument("--after-result", action="store_true",
                   help="ask the turn after the question's right calls ran (after_result.py); "
                        "right when it answers in text; give --category (categories with a "
                        "ground truth only)")
    args = p.parse_args()
    categories = [c for arg in args.category or ["simple_python,multiple,parallel,irrelevance"]
                  for c in arg.split(",") if c]
    if args.split and args.range:
        p.error("--split and --range choose the cases both: give one")
    cases = SPLITS[args.split] if args.split else parse_range(args.range or "0:30")
    if args.after_result and (args.face != "openai" or NO_CALL & set(categories)):
        p.error("--after-result needs the openai face and categories with a ground truth")
    # Validation is read as totals only (docs/development.md).
    totals_only = args.split == "validation"

    bfcl = _import_bfcl()
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    faces = FACES.get(args.face, [args.face])
    clients = {}
    for face in {"openai", "responses"} & set(faces):
        from openai import OpenAI
        clients[face] = OpenAI(base_url=args.base_url, api_key=key or "unused",
                               timeout=args.timeout, max_retries=0)
    if "anthropic" in faces:
        from anthropic import Anthropic
        root = args.base_url.rstrip("/").removesuffix("/v1")
        clients["anthropic"] = Anthropic(base_url=root, api_key=key or "unused",
                                         timeout=args.timeout, max_retries=0)
    records = []
    out = open(args.json, "w") if args.json else None
    for category in categories:
        entries = bfcl.load_dataset_entry(category)
        truths = {t["id"]: t for t in bfcl.load_ground_truth_entry(category)} if category not in NO_CALL else {}
        plain = {e["id"]: e for e in bfcl.load_dataset_entry(category, include_language_specific_hint=False)}
        for i, entry in enumerate(entries):
            if i not in cases:
                continue
            truth = dict(truths.get(entry["id"], {}), function=plain[entry["id"]]["function"])
            for face in faces:
                r = run_case(face, clients[face], bfcl, args, category, entry, truth)
                records.append(r)
                if totals_only:
                    print(f"{category} [{face}]: {len(records)} cases run", file=sys.stderr, flush=True)
                    continue
                print(f"{r['id']} [{face}]: {r['outcome']}{' ok' if r['correct'] else ''}"
                      f" ({r['seconds']} s)", file=sys.stderr, flush=True)
                if out:
                    out.write(json.dumps(r) + "\n")
                    out.flush()
    if out:
        if totals_only:
            for row in summary(records):
                out.write(json.dumps(dict(row, split="validation")) + "\n")
        out.close()
    print(f"{'face':<10} {'category':<18} {'cases':>5} {'accuracy':>9} {'decoding':>9} {'text':>5} {'errors':>6} {'s/case':>7}"
          + (f" {'repeats':>7}" if args.after_result else ""))
    for row in summary(records):
        print(f"{row['face']:<10} {row['category']:<18} {row['cases']:>5}"
              f" {row['correct']:>4}/{row['cases']:<4} {row['decoding_failures']:>9}"
              f" {row['text_answers']:>5} {row['errors']:>6} {row['seconds_per_case']:>7}"
              + (f" {row['repeats']:>7}" if args.after_result else ""))
    if len(faces) > 1:
        print(agreement(records, faces, show_ids=not totals_only))


if __name__ == "__main__":
    main()
