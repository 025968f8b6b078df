#!/usr/bin/env python3
"""The model's own odds where serve's turn decides (issue 43 item 4): of calling at all, of the
tool name its call writes, or of a tool against "none" when asked which one fits (apart, or on
the turn's own prompt).

serve's default turn has no thought: its grammar (`root ::= action | final`) begins the turn at
the decision, `<action>` or `<final_answer>`. llama-server's `logprobs`/`top_logprobs` report the
model's own distribution before the grammar narrowed it. Four readings (`--measure`):

- `branch`: at the token after the forced `<`, score = ln P("action") − ln P("final"). A tool
  that fits should score high, a question no offered tool answers low. (It does not: AUC 0.48
  on the 0.5B, docs/experiments.md.)
- `name`: the mean log-probability of the tokens the turn writes between `<action>` and `(`, the
  name the grammar lets it choose among the declared tools: a tool the model would not have
  named itself scores low (serve's `call-odds` policy, deleted).
- `choice`: the same tools (the system prompt's `# Tools` part, names, descriptions and
  parameters) and the question, asked apart from the protocol: "which of these tools would you
  call, or none?". At the reply's first token, score = ln P(tool) − ln P(none), each the
  probability summed over those of the 20 most likely tokens that, trimmed of spaces and
  backticks and lower-cased, begin an offered tool's name (tool) or "none" (none).
- `cached-choice`: the same ask after the question in the turn's own messages (the protocol's
  system prompt and all), so a server's prompt cache holds everything before it; scored as
  `choice` (serve's `choice-odds`, deleted: docs/experiments.md).

No rule reads words.

Input: the turn requests serve sent for each case (bench/bfcl/capture_upstream.py behind
`tagloop serve --grammar on --no-stream`), one file per category; the first turn request of each
question is asked again with the log-probabilities.

    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/branch_calibrate.py --base-url http://127.0.0.1:PORT/v1 \\
        [--measure branch|name|choice|cached-choice] [--limit N] --call simple_python.jsonl,multiple.jsonl,live_simple.jsonl \\
        --none irrelevance.jsonl,live_irrelevance.jsonl --out scores.jsonl

Prints, for the scores, the separation (AUC: the chance a case that should call scores above
one that should not) and, for thresholds, how many of each side a decline below it would keep.
Standard library only.
"""

import argparse
import json
import math
import urllib.request

FLOOR = -30.0


def first_turns(path):
    """The first turn request of each question, in order."""
    seen, out = set(), []
    for line in open(path):
        body = json.loads(line)["body"]
        if not str(body.get("grammar", "")).startswith("root ::= action | final"):
            continue
        question = json.dumps(body["messages"][-1])
        if question in seen:
            continue
        seen.add(question)
        out.append(body)
    return out


def complete(base_url, body, timeout):
    """One whole (not streamed) chat completion: the server's answer as JSON."""
    req = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def score(base_url, body, timeout):
    answer = complete(base_url, dict(body, max_tokens=2, logprobs=True, top_logprobs=20, stream=False), timeout)
    tokens = answer["choices"][0]["logprobs"]["content"]
    # The decision is the token after "<" (the grammar forces "<" first; the first position's
    # own alternatives may hold the word "action" too, as a turn's first word; llama-server
    # names the sampled tokens oddly under a grammar, so the position is counted, not read).
    if len(tokens) > 1:
        top = {t["token"]: t["logprob"] for t in tokens[1]["top_logprobs"]}
        floor = min(top.values(), default=FLOOR)
        return top.get("action", floor) - top.get("final", floor), top
    return None, None


def name_score(base_url, body, timeout):
    """The call's own tool name: the mean log-probability (before the grammar) of the tokens the
    turn wrote between `<action>` and `(`, the name the grammar lets it choose among the tools.
    A tool the model would not have named itself scores low. None when the turn did not call."""
    answer = complete(base_url, dict(body, max_tokens=12, logprobs=True, top_logprobs=1, stream=False), timeout)
    tokens = answer["choices"][0]["logprobs"]["content"]
    text = "".join(t["token"] for t in tokens)
    if "<action>" not in text:
        return None, text
    start, seen, logps = text.index("<action>") + len("<action>"), 0, []
    for t in tokens:
        if seen >= start and "(" not in t["token"]:
            logps.append(t["logprob"])
        elif seen >= start:
            break
        seen += len(t["token"])
    return (sum(logps) / len(logps) if logps else None), text


def tool_names(system):
    """The tools' names and the `# Tools` part of serve's system prompt."""
    part = system[system.index("# Tools"):] if "# Tools" in system else ""
    if "\n# Your role" in part:
        part = part[:part.index("\n# Your role")]
    names = [line[3:].split("(")[0].strip() for line in part.splitlines() if line.startswith("## ")]
    return names, part


def choice_score(base_url, body, timeout):
    """ln P(the reply begins a tool's name) - ln P(it begins "none"), asked apart from the protocol."""
    names, tools = tool_names(body["messages"][0]["content"])
    question = body["messages"][-1]["content"].replace("<question>", "").replace("</question>", "").strip()
    messages = [
        {"role": "system", "content": "You pick the tool, if any, that fits a request.\n\n" + tools},
        {"role": "user", "content": question + "\n\nWhich of these tools would you call for this request? "
                                    "Reply with the tool's name only, or with none if no tool fits."},
    ]
    answer = complete(base_url, {"messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                                 "top_logprobs": 20, "stream": False}, timeout)
    top = {t["token"]: t["logprob"] for t in answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
    return margin(top, names), top


def cached_choice_score(base_url, body, timeout):
    """The choice asked on the turn's own prompt: its messages, the question followed by the ask,
    so that a server's prompt cache holds everything before it from the turn. Scored as `choice`."""
    names, _ = tool_names(body["messages"][0]["content"])
    messages = [dict(m) for m in body["messages"]]
    messages[-1]["content"] += ("\n\nWhich of the tools above would you call for this question? "
                                "Reply with the tool's name only, or with none if no tool fits.")
    answer = complete(base_url, {"messages": messages, "max_tokens": 1, "temperature": 0, "logprobs": True,
                                 "top_logprobs": 20, "stream": False}, timeout)
    top = {t["token"]: t["logprob"] for t in answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
    return margin(top, names), top


def margin(top, names):
    """ln P(a first token that begins a tool's name) - ln P(one that begins "none")."""
    lowered = [n.lower() for n in names]

    def mass(test):
        ps = [math.exp(lp) for tok, lp in top.items() if (w := tok.strip().strip("`").lower()) and test(w)]
        return math.log(sum(ps)) if ps else FLOOR

    return mass(lambda w: any(n.startswith(w) for n in lowered)) - mass(lambda w: "none".startswith(w))


def auc(pos, neg):
    pairs = [(p > n) + 0.5 * (p == n) for p in pos for n in neg]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--call", required=True, help="comma list of captured files whose cases should call")
    ap.add_argument("--none", required=True, help="comma list of captured files whose cases should not")
    ap.add_argument("--out", required=True, help="one JSON line per case with its score")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--limit", type=int, default=None, help="the first N questions of each file")
    ap.add_argument("--measure", choices=["branch", "name", "choice", "cached-choice"], default="branch",
                    help="branch: ln P(action) - ln P(final) after '<'; name: the called name's mean token "
                         "log-probability; choice: ln P(a tool) - ln P(none) asked which tool fits; cached-choice: "
                         "the same, asked on the turn's own prompt")
    args = ap.parse_args()
    measure = {"branch": score, "name": name_score, "choice": choice_score,
               "cached-choice": cached_choice_score}[args.measure]
    scores = {True: [], False: []}
    with open(args.out, "w") as out:
        for should_call, files in ((True, args.call), (False, args.none)):
            for path in files.split(","):
                for i, body in enumerate(first_turns(path)[:args.limit]):
                    s, top = measure(args.base_url, body, args.timeout)
                    out.write(json.dumps({"file": path, "case": i, "should_call": should_call,
                                          "score": s, "top": top}) + "\n")
                    out.flush()
                    if s is not None:
                        scores[should_call].append(s)
    pos, neg = scores[True], scores[False]
    print(f"cases: {len(pos)} should call, {len(neg)} should not; AUC {auc(pos, neg):.3f}")
    for t in sorted({round(x, 1) for x in pos + neg if not math.isinf(x)})[::max(1, len(pos + neg) // 25)]:
        kept = sum(p >= t for p in pos)
        declined = sum(n < t for n in neg)
        print(f"decline below {t:6.1f}: calls kept {kept}/{len(pos)}, non-calls declined {declined}/{len(neg)}")


if __name__ == "__main__":
    main()
