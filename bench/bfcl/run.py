"""BFCL (the Berkeley Function Calling Leaderboard) through the `openai` SDK, against any
OpenAI-compatible base URL: `tagloop serve`, or llama-server's own tool calling as a baseline.

For each case of a category, BFCL's function docs become OpenAI `tools` (BFCL's own converter
for its OpenAI handler, imported), the case's question is sent once, and the answer is scored:

* a call the client could not use (arguments that are not a JSON object, a function that was
  not declared) is a *decoding failure*, and wrong;
* usable calls are turned into BFCL's model-output shape (`[{name: {arg: value}}]`) and judged
  by BFCL's AST checker (`ast_checker`), as BFCL judges its OpenAI function-calling models;
* a text answer (no call) is wrong, except in `irrelevance` and `live_irrelevance`, where no function fits the
  question and a case is right exactly when no call is made;
* an HTTP error (the server could not decode its own model, a timeout) is counted apart, and wrong.

Printed per category: accuracy, decoding failures, text answers, errors, seconds per case
(wall time of the one request, generation included). `--json FILE` writes one record per case.

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


def parse_range(text: str) -> range:
    start, _, end = text.partition(":")
    return range(int(start or 0), int(end) if end else 10**9)


def usable_calls(message, declared: set):
    """The answer's calls as BFCL's model output, or the reason the client could not use them."""
    output = []
    for call in message.tool_calls or []:
        name = call.function.name
        if name not in declared:
            return None, f"undeclared function {name!r}"
        try:
            args = json.loads(call.function.arguments or "")
        except ValueError:
            return None, f"arguments of {name} are not JSON: {call.function.arguments!r:.200}"
        if not isinstance(args, dict):
            return None, f"arguments of {name} are not a JSON object"
        output.append({name: args})
    return output, None


def run_case(client, bfcl, args, category, entry, truth):
    tools = bfcl.to_tools(copy.deepcopy(entry["function"]))
    declared = {t["function"]["name"] for t in tools}
    record = {"id": entry["id"], "category": category}
    started = time.monotonic()
    try:
        response = client.chat.completions.create(
            model=args.model,
            messages=entry["question"][0],
            tools=tools,
            temperature=0,
            max_tokens=args.max_tokens,
        )
    except Exception as e:  # an HTTP error or a timeout: the client got nothing usable
        record.update(outcome="error", correct=False, error=f"{type(e).__name__}: {e}"[:500])
        record["seconds"] = round(time.monotonic() - started, 3)
        return record
    record["seconds"] = round(time.monotonic() - started, 3)
    message = response.choices[0].message
    record["finish_reason"] = response.choices[0].finish_reason
    record["calls"] = [
        {"name": c.function.name, "arguments": c.function.arguments}
        for c in message.tool_calls or []
    ]
    record["content"] = (message.content or "")[:500]
    output, why = usable_calls(message, declared)
    if why is not None:
        record.update(outcome="decoding_failure", correct=False, error=why)
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
        by[r["category"]].append(r)
    rows = []
    for category, rs in by.items():
        n = len(rs)
        count = lambda outcome: sum(r["outcome"] == outcome for r in rs)
        rows.append({
            "category": category,
            "cases": n,
            "correct": sum(r["correct"] for r in rs),
            "accuracy": round(sum(r["correct"] for r in rs) / n, 3) if n else 0.0,
            "decoding_failures": count("decoding_failure"),
            "text_answers": count("text"),
            "errors": count("error"),
            "seconds_per_case": round(sum(r["seconds"] for r in rs) / n, 2) if n else 0.0,
        })
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", required=True, help="the OpenAI-compatible base URL (…/v1)")
    p.add_argument("--model", required=True, help="the model name to send")
    p.add_argument("--category", action="append",
                   help=f"a BFCL category, repeatable or comma-separated (default: {','.join(CATEGORIES[:3])},irrelevance)")
    p.add_argument("--range", default="0:30", help="cases START:END of each category (default 0:30)")
    p.add_argument("--max-tokens", type=int, default=400, help="per answer (default 400)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per request (default 300)")
    p.add_argument("--api-key-env", default=None, help="the environment variable holding the key")
    p.add_argument("--json", metavar="FILE", help="write one JSON record per case")
    args = p.parse_args()
    categories = [c for arg in args.category or ["simple_python,multiple,parallel,irrelevance"]
                  for c in arg.split(",") if c]
    cases = parse_range(args.range)

    from openai import OpenAI

    bfcl = _import_bfcl()
    key = os.environ.get(args.api_key_env, "") if args.api_key_env else ""
    client = OpenAI(base_url=args.base_url, api_key=key or "unused",
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
            r = run_case(client, bfcl, args, category, entry, truth)
            records.append(r)
            print(f"{r['id']}: {r['outcome']}{' ok' if r['correct'] else ''} ({r['seconds']} s)",
                  file=sys.stderr, flush=True)
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()
    if out:
        out.close()
    print(f"{'category':<18} {'cases':>5} {'accuracy':>9} {'decoding':>9} {'text':>5} {'errors':>6} {'s/case':>7}")
    for row in summary(records):
        print(f"{row['category']:<18} {row['cases']:>5} {row['correct']:>4}/{row['cases']:<4}"
              f" {row['decoding_failures']:>9} {row['text_answers']:>5} {row['errors']:>6}"
              f" {row['seconds_per_case']:>7}")


if __name__ == "__main__":
    main()
