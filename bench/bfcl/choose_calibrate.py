"""How well the question's words pick the tool (serve's re-ask, src/policy/choose.rs), on BFCL's data.

No model is asked: for every case with two tools or more, each tool's score is the number of the
last user message's content words that its own words (name, description, parameters' names and
descriptions; guess_calibrate.py's `content` and `tool_words`, the same stemmer and stop words as
src/policy/words.rs) hold. Printed per category: cases where the right tool (the first ground-truth
call's) leads alone, ties for the lead, or is beaten; and, for the text-answer rule, in how many
cases a tool leads alone and its name says a word of the question (for the irrelevance
categories every such case is one where a text answer would be asked again for a call).

    python -m pip install py-rust-stemmers==0.1.8   # as guess_calibrate.py
    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/choose_calibrate.py multiple live_multiple live_irrelevance
    ... --tiebreak   also break ties by the fewest name words the question does not say (not kept)
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from guess_calibrate import content, tool_words  # noqa: E402
from run import NO_CALL, _import_bfcl  # noqa: E402


def question_of(entry):
    turn = entry["question"][0]
    return turn[-1]["content"] if turn else ""


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("category", nargs="+")
    p.add_argument("--tiebreak", action="store_true")
    args = p.parse_args()
    bfcl = _import_bfcl()
    for category in args.category:
        entries = bfcl.load_dataset_entry(category)
        truths = {} if category in NO_CALL else {
            t["id"]: t for t in bfcl.load_ground_truth_entry(category)}
        alone = tied = beaten = several = text_rule = 0
        for e in entries:
            tools = e["function"]
            if len(tools) < 2:
                continue
            several += 1
            asked = content(question_of(e))

            def key(f):
                score = len(asked & tool_words(f))
                if not args.tiebreak:
                    return (score,)
                return (score, -len(content(f["name"].replace(".", "_")) - asked))

            keys = {f["name"]: key(f) for f in tools}
            top = max(keys.values())
            leaders = [n for n, k in keys.items() if k == top]
            ranked = sorted((len(asked & tool_words(f)), f["name"]) for f in tools)
            if ranked[-1][0] > ranked[-2][0] and asked & content(ranked[-1][1].replace(".", "_")):
                text_rule += 1
            if not truths:
                continue
            right = next(iter(truths[e["id"]]["ground_truth"][0]))
            if leaders == [right]:
                alone += 1
            elif right in leaders:
                tied += 1
            else:
                beaten += 1
        line = f"{category}: {several} cases with 2+ tools"
        if truths:
            line += f"; the right tool leads alone {alone}, ties {tied}, is beaten {beaten}"
        line += f"; a tool leads alone and its name says the question's words: {text_rule}"
        print(line)


if __name__ == "__main__":
    main()
