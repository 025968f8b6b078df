"""Calibrate serve's guess at a question's function (issue 32; `src/policy/guess.rs`): for BFCL
cases, ask an OpenAI-compatible server (llama-server) the request serve asks — the question
alone, "Which single Python function would you call…", temperature 0, 16 tokens, a grammar of
one snake_case name — and print per case the guess, the tool it is judged against (the right
function for call categories; for irrelevance, every offered tool: the best any can do) and
whether the turn would be declined (no shared content word).

    python -m pip install py-rust-stemmers==0.1.8   # the Snowball stemmer rust-stemmers has
    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/guess_calibrate.py \\
        --base-url http://127.0.0.1:PORT/v1 --range 10:20 \\
        --category irrelevance,live_irrelevance,simple_python,multiple,live_simple

The content words and stop words are guess.rs's; keep the two lists the same.
"""

import argparse
import copy
import json
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from run import _import_bfcl, parse_range  # noqa: E402

from py_rust_stemmers import SnowballStemmer  # noqa: E402

STEM = SnowballStemmer("english")
STOP = set("""a an the of to in for and or by with from on at is are be as it its this that what which
who how get set calculate calc compute find fetch retrieve determine check make create list search
lookup give show value values number data info information result results given specified provided
function python syntax note""".split())
INSTRUCTIONS = "You name Python functions."


def content(text):
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return {STEM.stem_word(w) for w in re.findall(r"[a-z]+", text.lower())
            if len(w) >= 2 and w not in STOP}


def tool_words(f):
    words = content(f["name"]) | content(f.get("description", ""))
    for name, schema in f.get("parameters", {}).get("properties", {}).items():
        words |= content(name)
        if isinstance(schema, dict):
            words |= content(schema.get("description", ""))
    return words


def guess(base_url, question):
    body = {"messages": [{"role": "system", "content": INSTRUCTIONS},
                         {"role": "user", "content": f"Question: {question.strip()}\n\nWhich single Python "
                          "function would you call to answer this question? Reply with its snake_case name only."}],
            "max_tokens": 16, "temperature": 0, "stop": ["\n"], "grammar": "root ::= [a-z] [a-z0-9_]{2,41}\n"}
    req = urllib.request.Request(base_url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=600))["choices"][0]["message"]["content"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base-url", required=True)
    p.add_argument("--range", default="10:20")
    p.add_argument("--category", default="irrelevance,live_irrelevance,simple_python,multiple,live_simple")
    args = p.parse_args()
    bfcl = _import_bfcl()
    cases = parse_range(args.range)
    for category in args.category.split(","):
        entries = bfcl.load_dataset_entry(category, include_language_specific_hint=True)
        truths = {} if "irrelevance" in category else {
            t["id"]: t for t in bfcl.load_ground_truth_entry(category)}
        for i, entry in enumerate(entries):
            if i not in cases:
                continue
            tools = [t["function"] for t in bfcl.to_tools(copy.deepcopy(entry["function"]))]
            if entry["id"] in truths:
                right = next(iter(truths[entry["id"]]["ground_truth"][0])).replace(".", "_")
                tools = [f for f in tools if f["name"] == right]
            question = entry["question"][0][-1]["content"]
            g = guess(args.base_url, question)
            words = content(g)
            kept = not words or any(words & tool_words(f) for f in tools)
            print(json.dumps({"id": entry["id"], "guess": g, "tools": [f["name"] for f in tools],
                              "declined": not kept, "should_decline": "irrelevance" in category}), flush=True)


if __name__ == "__main__":
    main()
