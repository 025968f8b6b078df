"""Calibrate serve's relevance check (issue 32): for BFCL cases, ask an OpenAI-compatible
server (llama-server) the yes/no relevance question serve asks, with `max_tokens: 1`,
`logprobs: true`, `top_logprobs: 10`, temperature 0, and print the score
P(yes) / (P(yes) + P(no)) per case: irrelevance cases with their one function (should be low),
simple_python and multiple cases with their right function (should be high).

    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/relevance_calibrate.py \
        --base-url http://127.0.0.1:PORT/v1 --range 10:20 --wording shots

Wordings (docs/experiments.md, "Serve's decision", has their separation): `question` (the tool's
name, description and parameters, "Can this tool answer the question?"), `fit` (the same, "Is
this tool made for what the question asks?"), `desc` (`question` without the parameters),
`shots` (`desc` after four worked examples: what `src/serve/relevance.rs` sends), `shots-params`
(`shots` with the parameters).
"""

import argparse
import copy
import json
import math
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from run import _import_bfcl, parse_range  # noqa: E402


def prompt(question, tool, wording):
    f = tool["function"]
    params = json.dumps(f.get("parameters", {}), separators=(",", ":"))
    text = (f"Question: {question}\n\nTool: {f['name']}\nDescription: {f.get('description', '')}\n"
            + ("" if wording in ("desc", "shots") else f"Parameters: {params}\n") + "\n")
    if wording == "fit":
        text += "Is this tool made for what the question asks? Answer yes or no."
    else:
        text += "Can this tool answer the question? Answer yes or no."
    return text


SHOTS = [
    ("What is the weather in Oslo today?", "get_weather", "Current weather of a city.", "Yes"),
    ("Solve x^2 - 4 = 0 for x.", "get_weather", "Current weather of a city.", "No"),
    ("Who wrote Hamlet?", "calculate_mortgage", "Monthly payment of a loan.", "No"),
    ("Monthly payment of a 200000 loan at 5% over 30 years?", "calculate_mortgage",
     "Monthly payment of a loan.", "Yes"),
]


def messages(content, wording):
    out = []
    if wording.startswith("shots"):
        for q, name, desc, a in SHOTS:
            out.append({"role": "user", "content": f"Question: {q}\n\nTool: {name}\nDescription: {desc}\n\n"
                        "Can this tool answer the question? Answer yes or no."})
            out.append({"role": "assistant", "content": a})
    out.append({"role": "user", "content": content})
    return out


def score(base_url, content, wording="question"):
    body = {"messages": messages(content, wording), "max_tokens": 1,
            "logprobs": True, "top_logprobs": 10, "temperature": 0}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions",
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    answer = json.load(urllib.request.urlopen(req, timeout=300))
    top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    yes = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "yes")
    no = sum(math.exp(t["logprob"]) for t in top if t["token"].strip().lower() == "no")
    return (yes / (yes + no) if yes + no > 0 else None), top


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--range", default="10:30")
    p.add_argument("--wording", default="question", choices=["question", "fit", "desc", "shots", "shots-params"])
    p.add_argument("--category", default="irrelevance,simple_python,multiple")
    p.add_argument("--no-hint", action="store_true",
                   help="descriptions without BFCL's language hint (not what run.py sends)")
    args = p.parse_args()
    bfcl = _import_bfcl()
    cases = parse_range(args.range)
    for category in args.category.split(","):
        # With BFCL's language hint in each description, as run.py sends the tools.
        entries = bfcl.load_dataset_entry(category, include_language_specific_hint=not args.no_hint)
        truths = {} if category == "irrelevance" else {
            t["id"]: t for t in bfcl.load_ground_truth_entry(category)}
        for i, entry in enumerate(entries):
            if i not in cases:
                continue
            tools = bfcl.to_tools(copy.deepcopy(entry["function"]))
            if category == "irrelevance":
                tool = tools[0]
            else:
                right = next(iter(truths[entry["id"]]["ground_truth"][0])).replace(".", "_")
                tool = next(t for t in tools if t["function"]["name"] == right)
            question = entry["question"][0][-1]["content"]
            s, top = score(args.base_url, prompt(question, tool, args.wording), args.wording)
            print(json.dumps({"id": entry["id"], "category": category,
                              "tool": tool["function"]["name"], "score": s,
                              "top": [(t["token"], round(t["logprob"], 2)) for t in top[:4]]}),
                  flush=True)


if __name__ == "__main__":
    main()
