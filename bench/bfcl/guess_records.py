"""Serve's guess judged on what was recorded (issue 32; `src/policy/guess.rs`): every judgement of
the guess that `tagloop serve --session-dir` transcripts hold, with the BFCL case it was made on
and whether the call it judged was right, then the same records judged again model-free by
variants of the rule.

Where a transcript comes from: a BFCL record (`scripts/bfcl.sh --json`, `run.py`) names it by
`response_id`; else the one record whose answer (calls and text) is the transcript's; else it is
matched to the case whose functions hold the called tools and whose question best holds the
call's values and the guess's words (`match` says which way, and `ambiguous` when another case
fits as well).

What a transcript holds: builds since the `decisions` field record every judgement of the guess,
kept or declined; older builds recorded only the declined ones, as the correction of the turn
they declined ("… the model would call X, which shares no word with Y"): those count among the
declines only.

The judged call: a declined turn's first action (read by `tagloop parse --json`), a kept one's
`tool_calls`. It is `right` when BFCL's AST checker passes it (the declined turn's first call
alone, so for the single-call categories), `right tool` when it calls the ground truth's
function with values the checker refuses, `wrong tool` otherwise, and `irrelevant` in the
irrelevance categories (no call is right there).

    ~/.cache/tagloop-bfcl/bin/python bench/bfcl/guess_records.py [--tagloop BIN] [DIR ...]

Without DIR, every directory under /work and /tmp holding `chatcmpl-*.json` is read (never
written). The stemmer and stop words are guess_calibrate.py's (the same as src/policy/words.rs).
"""

import argparse
import collections
import copy
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from guess_calibrate import STEM, STOP, content, tool_words  # noqa: E402
from run import NO_CALL, _import_bfcl  # noqa: E402

CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
              "live_simple", "live_multiple", "live_parallel", "live_irrelevance"]
OLD_DECLINE = re.compile(r"would call (\S+), which shares no word with (.+)$")


def words_in_order(text):
    """guess_calibrate.content's words, in order and as often as said (for the loop rule)."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return [STEM.stem_word(w) for w in re.findall(r"[a-z]+", text.lower())
            if len(w) >= 2 and w not in STOP]


def loops(guess):
    """src/policy/words.rs's `Reading::Repeats`: a content word said three times or more."""
    counts = collections.Counter(words_in_order(guess))
    return bool(counts) and max(counts.values()) >= 3


def find_dirs():
    out = subprocess.run(
        "find /work /tmp -xdev -name 'chatcmpl-*.json' 2>/dev/null", shell=True,
        capture_output=True, text=True).stdout.split()
    return sorted({os.path.dirname(p) for p in out if "/h-" not in p and "/work/main/" not in p})


def answer_key(calls, content):
    return json.dumps([[c["name"], c["arguments"]] for c in calls]), (content or "")[:500]


def find_records():
    """From every BFCL record file under /work and /tmp: response_id → record, and the answer
    (calls, text) → the case ids that got it (for records older than `response_id`)."""
    out = subprocess.run(
        "grep -rl --include='*.jsonl' '\"outcome\"' /work /tmp 2>/dev/null", shell=True,
        capture_output=True, text=True).stdout.split()
    ids, answers = {}, collections.defaultdict(set)
    for path in out:
        if "/h-" in path or "/work/main/" in path:
            continue
        for line in open(path, errors="replace"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if not isinstance(r, dict) or not r.get("id") or "calls" not in r:
                continue
            if r.get("response_id"):
                ids[r["response_id"]] = r
            answers[answer_key(r["calls"], r.get("content"))].add(r["id"])
    return ids, answers


def transcript_answer(path):
    """The key of the answer a transcript holds (as run.py records it), or None."""
    t = json.load(open(path))
    try:
        msg = t["answer"]["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in msg.get("tool_calls") or []]
    return answer_key(calls, msg.get("content"))


def parse_turn(tagloop, text):
    """The first action of a turn: (name, args) or None."""
    p = subprocess.run([tagloop, "parse", "--json"], input=text, capture_output=True, text=True)
    try:
        action = json.loads(p.stdout).get("action")
    except ValueError:
        return None
    if not action:
        return None
    return action["tool"], {a["name"]: a["value"] for a in action.get("args", [])}


def judgements(path, tagloop):
    """Each judgement of the guess in one transcript, with the calls it judged."""
    t = json.load(open(path))
    out = []
    for j in t.get("decisions") or []:
        if j.get("rule") != "guess" or j.get("guess") is None:
            continue
        if j["declined"]:
            turn = next((x["turn"] for x in t["turns"] if x.get("correction") == j["why"]), None)
            call = parse_turn(tagloop, turn) if turn else None
            calls = [call] if call else []
        else:
            msg = t["answer"]["choices"][0]["message"] if t.get("answer") else {}
            calls = []
            for c in msg.get("tool_calls") or []:
                try:
                    calls.append((c["function"]["name"], json.loads(c["function"]["arguments"])))
                except ValueError:
                    pass
        out.append(dict(guess=j["guess"], tools=j["tools"], declined=j["declined"],
                        why=j["why"], calls=calls, kind="decisions"))
    if "decisions" not in t:
        for x in t["turns"]:
            m = OLD_DECLINE.search(x.get("correction") or "")
            if m:
                call = parse_turn(tagloop, x["turn"])
                out.append(dict(guess=m.group(1), tools=m.group(2).split(", "), declined=True,
                                why=x["correction"], calls=[call] if call else [],
                                kind="declines only"))
    return t["id"], out


def values_of(args):
    for v in args.values():
        if isinstance(v, (list, tuple)):
            yield from values_of(dict(enumerate(v)))
        elif isinstance(v, dict):
            yield from values_of(v)
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            yield str(v).lower()


def question_of(entry):
    turn = entry["question"][0]
    return turn[-1]["content"] if turn else ""


def match(cases, by_tool, judged):
    """The case a judgement was made on, when no record names it: the best fit, or None."""
    tools = set(judged["tools"])
    candidates = [cases[i] for i in set.intersection(*(by_tool.get(t, set()) for t in tools))]
    if not candidates:
        return None, False
    values = [v for _, args in judged["calls"] for v in values_of(args)]
    guess = content(judged["guess"])

    def fit(c):
        q = question_of(c["entry"]).lower()
        return sum(v in q for v in values) + len(guess & content(q))

    ranked = sorted(candidates, key=fit, reverse=True)
    tied = [c for c in ranked if fit(c) == fit(ranked[0])]
    # Cases with the same question and functions in two categories judge the call alike.
    ambiguous = len({(question_of(c["entry"]), c["category"] in NO_CALL) for c in tied}) > 1
    return ranked[0], ambiguous


def classify(bfcl, case, calls):
    if case["category"] in NO_CALL:
        return "irrelevant"
    truth = case["truth"]["ground_truth"]
    right_names = {next(iter(g)).replace(".", "_") for g in truth}
    if not calls:
        return "unread"
    if not {n for n, _ in calls} <= right_names:
        return "wrong tool"
    funcs = copy.deepcopy(case["entry"]["function"])
    for f in funcs:
        f["name"] = f["name"].replace(".", "_")
    gt = [{next(iter(g)).replace(".", "_"): next(iter(g.values()))} for g in truth]
    try:
        checked = bfcl.ast_checker(funcs, [{n: a} for n, a in calls], gt, bfcl.Language.PYTHON,
                                   case["category"], "records")
    except Exception:  # the checker's own failure on an odd value: judged by name
        return "right tool"
    return "right" if checked["valid"] else "right tool"


# --- the rule and its variants, model-free -----------------------------------------------------

def deep_words(schema):
    """Words of a parameter schema below its top level: nested properties, items, enum values."""
    words = set()
    if not isinstance(schema, dict):
        return words
    for v in schema.get("enum", []) or []:
        if isinstance(v, str):
            words |= content(v)
    for name, sub in (schema.get("properties") or {}).items():
        words |= content(name)
        if isinstance(sub, dict):
            words |= content(sub.get("description", "")) | deep_words(sub)
    if isinstance(schema.get("items"), dict):
        words |= content(schema["items"].get("description", "")) | deep_words(schema["items"])
    return words


def leads(case, tool):
    """choose.rs's score: `tool` shares strictly more of the question's words than every other."""
    asked = content(question_of(case["entry"]))
    scores = {f["name"].replace(".", "_"): len(asked & tool_words(f)) for f in case["entry"]["function"]}
    if len(scores) < 2 or tool not in scores:
        return False
    mine = scores.pop(tool)
    return mine > 0 and mine > max(scores.values())


def verdict(variant, case, judged):
    """True: declined."""
    guess_text = judged["guess"]
    if variant != MAIN and loops(guess_text):
        return False
    guess = content(guess_text)
    if not guess or not guess & content(question_of(case["entry"])):
        return False
    funcs = {f["name"].replace(".", "_"): f for f in case["entry"]["function"]}
    called = [funcs[t] for t in judged["tools"] if t in funcs]
    if variant == "name only":
        return all(not guess & content(f["name"].replace(".", "_")) for f in called)
    words = [tool_words(f) for f in called]
    if variant == "+ nested schema":
        words = [w | deep_words(f.get("parameters", {})) for w, f in zip(words, called)]
    if variant == "+ leading tool kept":
        if any(leads(case, t) for t in judged["tools"]):
            return False
    if variant == "+ no guess among several tools" and len(funcs) > 1:
        return False
    return all(not guess & w for w in words)


RECORDED = "as recorded (the build of the day)"
MAIN = "main's rule, recomputed"
VARIANTS = [RECORDED, MAIN, "this branch: a loop is no guess", "name only", "+ nested schema",
            "+ leading tool kept", "+ no guess among several tools"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dirs", nargs="*")
    p.add_argument("--tagloop", default="/work/tagloop-main")
    args = p.parse_args()
    bfcl = _import_bfcl()
    cases, by_tool, by_id = [], collections.defaultdict(set), {}
    for category in CATEGORIES:
        try:
            entries = bfcl.load_dataset_entry(category)
        except Exception:
            continue
        truths = {} if category in NO_CALL else {
            t["id"]: t for t in bfcl.load_ground_truth_entry(category)}
        for e in entries:
            case = {"entry": e, "category": category, "truth": truths.get(e["id"])}
            by_id[e["id"]] = len(cases)
            for f in e["function"]:
                by_tool[f["name"].replace(".", "_")].add(len(cases))
            cases.append(case)
    records, answers = find_records()
    rows = []
    for d in args.dirs or find_dirs():
        for path in sorted(glob.glob(os.path.join(d, "chatcmpl-*.json"))):
            tid, judged = judgements(path, args.tagloop)
            got = answers.get(transcript_answer(path), set()) if judged else set()
            for j in judged:
                rec = records.get(tid)
                if rec and rec["id"] in by_id:
                    case, how, ambiguous = cases[by_id[rec["id"]]], "record", False
                elif len(got) == 1 and next(iter(got)) in by_id:
                    case, how, ambiguous = cases[by_id[next(iter(got))]], "record's answer", False
                else:
                    case, ambiguous = match(cases, by_tool, j)
                    how = "matched"
                if case is None:
                    print(f"# {path}: no case has {j['tools']}", file=sys.stderr)
                    continue
                rows.append(dict(j, dir=d, id=case["entry"]["id"], case=case, how=how,
                                 ambiguous=ambiguous, cls=classify(bfcl, case, j["calls"])))
    print("| dir | case | match | guess | called | verdict | the call |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['dir']} | {r['id']} | {r['how']}{' (ambiguous)' if r['ambiguous'] else ''} "
              f"| `{r['guess']}` | {', '.join(r['tools'])} | "
              f"{'declined' if r['declined'] else 'kept'} ({r['kind']}) | {r['cls']} |")
    print()
    classes = ["right", "right tool", "wrong tool", "irrelevant", "unread"]
    full = [r for r in rows if r["kind"] == "decisions"]
    distinct = list({(r["id"], r["guess"], tuple(r["tools"]), r["kind"]): r for r in rows}.values())
    for title, subset in [("every record", rows), ("distinct (case, guess, called tools)", distinct),
                          ("records with every judgement (kept ones too)", full)]:
        print(f"{title}: {len(subset)} judgements; declined/kept by what the call was")
        print("| rule | " + " | ".join(f"{c} declined" for c in classes) + " | kept: "
              + " / ".join(classes) + " |")
        print("|---|" + "---|" * (len(classes) + 1))
        for variant in VARIANTS:
            dec = collections.Counter()
            kept = collections.Counter()
            for r in subset:
                declined = r["declined"] if variant == RECORDED else verdict(variant, r["case"], r)
                (dec if declined else kept)[r["cls"]] += 1
            print(f"| {variant} | " + " | ".join(str(dec[c]) for c in classes) + " | "
                  + " / ".join(str(kept[c]) for c in classes) + " |")
        print()
    print("records whose verdict main's rule, recomputed, changes (rules of older builds):")
    for r in rows:
        if r["declined"] != verdict(MAIN, r["case"], r):
            print(f"  {r['dir']} {r['id']} `{r['guess']}` {r['tools']} {r['cls']}: recorded "
                  f"{'declined' if r['declined'] else 'kept'}")
    # Sanity: the rule as read here agrees with what serve recorded: main's rule, or this
    # branch's where a build with it wrote the record (older builds aside, whose rule differed).
    branch = VARIANTS[2]
    differ = [r for r in full if r["declined"] not in
              (verdict(MAIN, r["case"], r), verdict(branch, r["case"], r))]
    print(f"recorded verdicts neither main's nor this branch's rule, as read here, gives: {len(differ)}")
    for r in differ:
        print(f"  {r['dir']} {r['id']} `{r['guess']}` {r['tools']} recorded declined={r['declined']}")

if __name__ == "__main__":
    main()
