#!/usr/bin/env python3
"""BENCHMARKS.md's lead tables and plots, generated from the measured runs in bench/results/.

    python3 scripts/bench-tables.py            write BENCHMARKS.md's generated part and bench/results/*.svg
    python3 scripts/bench-tables.py --check    exit 1 when either differs from what the JSON gives (CI)

One JSON file per measured run (bench/results/README.md gives the fields). For each lab model
the table has one row per BFCL category and the agent's rows (the lab suite, the side-by-side
with smolagents); each cell is chosen, never typed:

* tagloop: the latest run of a configuration marked `"default": true` (today's defaults) that has
  the row; only when none has it, the latest configuration marked `"kept": true`, flagged †.
  Within one run the larger slice of the row wins (simple_python 0-19 over 0-9).
* native: the `"role": "native"` configuration of the same run (llama.cpp's own `--jinja` tool
  calling; for the side-by-side, smolagents' ToolCallingAgent over it); when that run has none,
  the latest native figure of any run, flagged ‡, and then no seconds ratio.
* published: bench/results/published.json (figures from ../shared/notes/decide.md).
* seconds ratio: the run's own `ratio_to_native` when the text gave one, else tagloop's seconds
  over native's when both come from the same run and the same cases.

Stdlib only, so that CI runs it without a venv. The SVG is written by hand below.
"""

import argparse
import difflib
import glob
import html
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START = "<!-- generated: bench-tables (scripts/bench-tables.py; edit bench/results/*.json, not this part) -->"
END = "<!-- end generated -->"

# The lab's models, in the order the tables show them.
MODELS = [
    ("smollm2", "SmolLM2-135M-Instruct", "Q4_1, over chat"),
    ("gemma", "gemma-3-270m (base)", "Q4_K_M, over /completions: `serve --api completions`"),
    ("qwen05", "Qwen2.5-Coder-0.5B-Instruct", "Q4_K_M, over chat"),
    ("qwen15", "Qwen2.5-Coder-1.5B-Instruct", "Q4_K_M, over chat"),
]
BFCL = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
        "live_simple", "live_multiple", "live_irrelevance"]
AGENT = {"suite": "agent: the lab suite", "dev": "agent: the dev split",
         "validation": "agent: the validation split", "sidebyside": "agent: beside smolagents"}
# The agent's rows no native configuration runs (tagloop's own suites).
OWN_SUITES = ("suite", "dev", "validation")
DEV_CASES = "0–49"   # BFCL's dev split (docs/development.md); 50–79 is validation
ROWS = BFCL + list(AGENT)


class BadResult(Exception):
    """A results file that does not hold what the tables need."""


def load_runs(folder):
    """Every run file of `folder` (all but published.json), checked for the fields the tables read."""
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)
        if name == "published.json":
            continue
        with open(path, encoding="utf-8") as f:
            try:
                run = json.load(f)
            except json.JSONDecodeError as e:
                raise BadResult(f"{name}: not JSON ({e})") from None
        for field in ("model", "benchmark", "title", "started", "time", "load", "setup",
                      "source", "command", "configurations"):
            if field not in run:
                raise BadResult(f"{name}: no `{field}`")
        if run["model"] not in {m for m, _, _ in MODELS}:
            raise BadResult(f"{name}: unknown model `{run['model']}`")
        if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ", run["started"]):
            raise BadResult(f"{name}: `started` is not YYYY-MM-DDTHH:MMZ")
        for conf in run["configurations"]:
            for field in ("name", "role", "results"):
                if field not in conf:
                    raise BadResult(f"{name}: a configuration has no `{field}`")
            for r in conf["results"]:
                for field in ("category", "cases", "passed", "total"):
                    if field not in r:
                        raise BadResult(f"{name}: a result of `{conf['name']}` has no `{field}`")
                if r["category"] not in ROWS and not (run["benchmark"] == "ablation"
                                                      and r["category"] == "validation"):
                    raise BadResult(f"{name}: unknown category `{r['category']}`")
                if not 0 <= r["passed"] <= r["total"]:
                    raise BadResult(f"{name}: {r['category']} passed {r['passed']} of {r['total']}")
        run["file"] = name
        runs.append(run)
    return runs


def load_published(folder):
    path = os.path.join(folder, "published.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("models", {})


def entries(runs, model, row, want):
    """(run, configuration, result) for `row` of `model` whose configuration passes `want`."""
    found = []
    for run in runs:
        if run["model"] != model or run["benchmark"] == "ablation":
            continue
        for conf in run["configurations"]:
            if not want(conf):
                continue
            for r in conf["results"]:
                if r["category"] == row:
                    found.append((run, conf, r))
    # the latest run first; within a run, the larger slice
    found.sort(key=lambda e: (e[0]["started"], e[2]["total"]), reverse=True)
    return found


def dev_pick(runs, model, row):
    """(run, configuration, result) of the latest default run's dev-split figure (BFCL cases
    0–49) for `row`, or None."""
    dev = [e for e in entries(runs, model, row, lambda c: c["role"] == "tagloop" and c.get("default"))
           if e[2]["cases"] == DEV_CASES]
    return dev[0] if dev else None


def pick(runs, model, row):
    """The row's cells: {tagloop, native, older, other_run} or None when nothing measured it.
    `tagloop` is never a dev-split figure (cases 0–49): those are `dev_pick`'s, shown beside it."""
    def tagloop(want):
        return [e for e in entries(runs, model, row, lambda c: c["role"] == "tagloop" and want(c))
                if e[2]["cases"] != DEV_CASES]
    mine = tagloop(lambda c: c.get("default"))
    older = False
    if not mine:
        mine = tagloop(lambda c: c.get("kept"))
        older = True
    if not mine:
        return None
    run, conf, res = mine[0]
    same = [(ru, c, r) for ru, c, r in entries(runs, model, row, lambda c: c["role"] == "native")
            if ru is run]
    native, other_run = (same[0], False) if same else (None, False)
    if native is None:
        anywhere = entries(runs, model, row, lambda c: c["role"] == "native")
        if anywhere:
            native, other_run = anywhere[0], True
    return {"tagloop": (run, conf, res), "native": native, "older": older, "other_run": other_run}


def seconds(res):
    """(value, unit) of a result's time, or None."""
    if "seconds_per_case" in res:
        return res["seconds_per_case"], "case"
    if "wall_seconds" in res:
        return res["wall_seconds"], "all"
    return None


def ratio(cell):
    _, _, mine = cell["tagloop"]
    if "ratio_to_native" in mine:
        return mine["ratio_to_native"]
    if cell["native"] is None or cell["other_run"]:
        return None
    theirs = cell["native"][2]
    a, b = seconds(mine), seconds(theirs)
    if a is None or b is None or a[1] != b[1] or mine["cases"] != theirs["cases"] or not b[0]:
        return None
    return round(a[0] / b[0], 2)


def num(x):
    """A figure as the JSON holds it, thousands grouped (1,648; 7.5; 1.0 stays 1.0)."""
    return f"{x:,}"


def fraction(res):
    return f"{res['passed']}/{res['total']}"


def anchor(heading):
    """GitHub's anchor for a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def experiment_headings(path):
    if not os.path.exists(path):
        return set()
    heads, fence = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            elif not fence and re.match(r"#{2,4} ", line):
                heads.add(line.split(" ", 1)[1].strip())
    return heads


def model_table(runs, published, key, name, detail):
    """The markdown of one model's section, and the rows the plot draws."""
    cells = {row: pick(runs, key, row) for row in ROWS}
    pub = published.get(key, {})
    used = []  # runs in the order the table first cites them
    confs = {}  # file -> names of the configurations cited

    def cite(run, conf):
        if run not in used:
            used.append(run)
        confs.setdefault(run["file"], [])
        if conf["name"] not in confs[run["file"]]:
            confs[run["file"]].append(conf["name"])
        return f"[{used.index(run) + 1}]"

    # The dev split's column (BFCL cases 0–49) appears once a run of today's defaults gave one:
    # beside the validation figure, the gap a rule fitted to dev would open.
    devs = {row: dev_pick(runs, key, row) for row in BFCL}
    has_dev = any(devs.values())
    dev_head, dev_rule = (f" dev split ({DEV_CASES}) |", "---:|") if has_dev else ("", "")
    lines = [f"### {name}", "", f"{detail}.", "",
             f"![{name}: right answers per row, tagloop against native](bench/results/{key}.svg)", "",
             f"| row | cases | tagloop |{dev_head} native | published | seconds, tagloop / native "
             "| seconds ratio | run |",
             f"|---|---|---:|{dev_rule}---:|---:|---:|---:|---|"]
    plot = []
    for row in ROWS:
        cell = cells[row]
        label = AGENT.get(row, row)
        if cell is None:
            if row in BFCL:
                dev_only, dev_cites = " |" if has_dev else "", ""
                if devs[row] is not None:
                    drun, dconf, dres = devs[row]
                    dev_only, dev_cites = f" {fraction(dres)} |", cite(drun, dconf)
                lines.append(f"| {label} | | not measured |{dev_only} | {pub_cell(pub, row)} "
                             f"| | | {dev_cites} |")
            continue
        run, conf, mine = cell["tagloop"]
        mark = " †" if cell["older"] else ""
        if mine.get("http_errors"):
            mark += f" ({mine['http_errors']} HTTP error{'s' if mine['http_errors'] > 1 else ''})"
        cites = cite(run, conf)
        dev_text = ""
        if devs.get(row) is not None:
            drun, dconf, dres = devs[row]
            dev_text = fraction(dres)
            dev_cite = cite(drun, dconf)
            if dev_cite not in cites.split():
                cites += " " + dev_cite
        dev_cell = f" {dev_text} |" if has_dev else ""
        if cell["native"] is not None:
            nrun, nconf, theirs = cell["native"]
            nmark = " ‡" if cell["other_run"] else ""
            ntext = fraction(theirs) + nmark
            other = cite(nrun, nconf)
            if cell["other_run"]:
                cites += " " + other
        else:
            theirs, ntext = None, "—" if row in OWN_SUITES else "not run"
        a = seconds(mine)
        b = seconds(theirs) if theirs else None
        if a is None:
            stext = ""
        else:
            unit = " s" if a[1] == "case" else " s in all"
            stext = num(a[0]) + (f" / {num(b[0])}" if b and b[1] == a[1] else "") + unit
        r = ratio(cell)
        rtext = f"{r:.2f}×" if r is not None else ""
        cases = mine["cases"]
        if theirs is not None and theirs["cases"] != cases:
            cases += f" (native {theirs['cases']})"
        lines.append(f"| {label} | {cases} | {fraction(mine)}{mark} |{dev_cell} {ntext} | {pub_cell(pub, row)} "
                     f"| {stext} | {rtext} | {cites} |")
        plot.append((label, row, mine, theirs, cell["older"], cell["other_run"],
                     pub.get("percent", {}).get(row)))
    total = total_row(cells, cite, devs if has_dev else None)
    if total:
        lines.append(total)
    lines.append("")
    if pub:
        lines.append(f"Published: {pub['model']}, {pub['mode']} mode, {pub['source']}; "
                     f"{pub.get('category_note', '')}.".replace("; .", "."))
    else:
        lines.append("Published: no BFCL figure for this model in the docs or ../shared/notes/decide.md.")
    if any(c and c["older"] for c in cells.values()):
        lines += ["", "† no run of today's defaults has this row: the latest kept configuration's figure "
                      "(its run says which)."]
    if any(c and c["other_run"] for c in cells.values()):
        lines += ["", "‡ native from another run than tagloop's (the second run cited): no seconds ratio."]
    lines += ["", "<details><summary>The runs cited, with their commands</summary>", ""]
    for i, run in enumerate(used, 1):
        cited = "; ".join(confs[run["file"]])
        commit = f", commit {run['commit']}" if run.get("commit") else ""
        data = f"bench/results/{run['file']}"
        lines.append(f"{i}. **{run['time']}**{commit}, load {run['load']}: {run['title']} "
                     f"(cited: {cited}). {run['setup']}. Figures: [`{data}`]({data}); the experiment: "
                     f"[docs/experiments.md](docs/experiments.md#{anchor(run['source'])}).")
        command = ["   " + line if line else "" for line in run["command"].split("\n")]
        lines += ["", "   ```sh"] + command + ["   ```", ""]
    lines += ["</details>", ""]
    return "\n".join(lines).rstrip() + "\n", plot


def total_parts(cells):
    """(tagloop's total, native's total or None) when one configuration of one run gave every
    BFCL row and the run its total; else None."""
    bfcl = [cells[r] for r in BFCL]
    if any(c is None or c["older"] for c in bfcl):
        return None
    if len({id(c["tagloop"][1]) for c in bfcl}) != 1:
        return None
    conf = bfcl[0]["tagloop"][1]
    t = conf.get("total")
    # A configuration that holds dev-split results too has a total over both: not shown.
    if not t or any(r["cases"] == DEV_CASES for r in conf["results"]):
        return None
    native = bfcl[0]["native"]
    if native and not bfcl[0]["other_run"] and native[1].get("total"):
        return t, native[1]["total"]
    return t, None


def total_row(cells, cite, devs):
    """The BFCL total row of a model's table, or None. `devs`: the dev-split figures when the
    table has their column; their total is shown, like validation's, only when one
    configuration of one run gave every BFCL row and its total."""
    parts = total_parts(cells)
    if not parts:
        return None
    t, nt = parts
    run, conf, _ = cells[BFCL[0]]["tagloop"]
    ntext = fraction(nt) if nt else ""
    stext = ""
    if nt and "seconds_sum_of_means" in t and "seconds_sum_of_means" in nt:
        stext = f"{num(t['seconds_sum_of_means'])} / {num(nt['seconds_sum_of_means'])} s (sums of the means)"
    rtext = f"{t['ratio_to_native']:.2f}×" if "ratio_to_native" in t else ""
    cites = cite(run, conf)
    dev = ""
    if devs is not None:
        dev = " |"
        rows = [devs[r] for r in BFCL]
        if all(rows) and len({id(d[1]) for d in rows}) == 1 and rows[0][1].get("total"):
            dev = f" **{fraction(rows[0][1]['total'])}** |"
            cites += " " + cite(rows[0][0], rows[0][1])
    return (f"| **all {len(BFCL)} BFCL rows** | | **{fraction(t)}** |{dev} {ntext} | | {stext} "
            f"| {rtext} | {cites} |")


def pub_cell(pub, row):
    p = pub.get("percent", {}).get(row)
    return f"{num(p)} %" if p is not None else ""


def summary(runs):
    """One line per model: the BFCL total when one run gave every row, and the agent's rows."""
    lines = ["| model | BFCL, 8 categories: tagloop against native | seconds ratio | the lab suite | "
             "the agent's splits: dev / validation | "
             "beside smolagents: tagloop against ToolCallingAgent |",
             "|---|---|---|---|---|---|"]
    for key, name, _ in MODELS:
        cells = {row: pick(runs, key, row) for row in ROWS}
        bfcl, rtext = "rows from several runs: its table", ""
        parts = total_parts(cells)
        if parts:
            t, native_total = parts
            bfcl = f"**{fraction(t)}** against {fraction(native_total) if native_total else 'not run'}"
            rtext = f"{t['ratio_to_native']:.2f}×" if "ratio_to_native" in t else ""
        agent = {}
        for row in AGENT:
            c = cells[row]
            if c is None:
                agent[row] = "not measured"
                continue
            mine = c["tagloop"][2]
            text = fraction(mine) + (" †" if c["older"] else "")
            if "×" in mine["cases"]:
                text += f" ({mine['cases']}, pooled)"
            if c["native"] is not None:
                text += f" against {fraction(c['native'][2])}" + (" ‡" if c["other_run"] else "")
            agent[row] = text
        splits = f"{agent['dev']} / {agent['validation']}"
        lines.append(f"| [{name}](#{anchor(name)}) | {bfcl} | {rtext} | {agent['suite']} | {splits} "
                     f"| {agent['sidebyside']} |")
    return "\n".join(lines) + "\n"


def ablation_tables(runs):
    """One table per ablation run (scripts/ablation.sh), latest first: each configuration's
    right answers per category and its difference from the run's defaults, in points."""
    out = []
    names = {m: n for m, n, _ in MODELS}
    for run in sorted((r for r in runs if r["benchmark"] == "ablation"),
                      key=lambda r: r["started"], reverse=True):
        confs = run["configurations"]
        cats = []
        for c in confs:
            for r in c["results"]:
                if r["category"] not in cats:
                    cats.append(r["category"])
        base = next((c for c in confs if not c.get("policy_off")), None)
        def share(conf, cat):
            r = next((r for r in conf["results"] if r["category"] == cat), None)
            return (r, 100.0 * r["passed"] / r["total"]) if r and r["total"] else (r, None)
        # The tokens the model wrote, where every configuration gives them for a category: what a
        # guard against runaway turns saves, beside what it wins.
        written = [cat for cat in cats if all(
            "completion_tokens" in (share(c, cat)[0] or {}) for c in confs)]
        # The configurations' totals, where every one has every category (paired sums).
        whole = len(cats) > 1 and all(share(c, cat)[0] for c in confs for cat in cats)
        def total(conf):
            rs = [share(conf, cat)[0] for cat in cats]
            return sum(r["passed"] for r in rs), sum(r["total"] for r in rs)
        lines = [f"#### Ablation: {names[run['model']]}, {run['title']} ({run['started']})", "",
                 "| configuration | " + " | ".join(cats) + (" | all" if whole else "")
                 + "".join(f" | tokens written, {cat}" for cat in written) + " |",
                 "|---|" + "---|" * (len(cats) + int(whole) + len(written))]
        for c in confs:
            cells = []
            for cat in cats:
                r, pct = share(c, cat)
                if r is None:
                    cells.append("–")
                    continue
                cell = f"{r['passed']}/{r['total']}"
                _, b = share(base, cat) if base and c is not base else (None, None)
                if pct is not None and b is not None:
                    cell += f" ({pct - b:+.0f})"
                cells.append(cell)
            if whole:
                p, t = total(c)
                cell = f"{p}/{t}"
                if base and c is not base:
                    bp, bt = total(base)
                    cell += f" ({100.0 * p / t - 100.0 * bp / bt:+.0f})"
                cells.append(cell)
            for cat in written:
                mine = share(c, cat)[0]["completion_tokens"]
                cell = f"{mine:,}"
                if base and c is not base:
                    theirs = share(base, cat)[0]["completion_tokens"]
                    if theirs:
                        cell += f" ({100.0 * (mine - theirs) / theirs:+.0f}%)"
                cells.append(cell)
            lines.append(f"| {c['name']} | " + " | ".join(cells) + " |")
        # Where the table comes from, as the lead tables cite their runs: the run, its figures,
        # the experiment that reads them, and the command.
        commit = f", commit {run['commit']}" if run.get("commit") else ""
        data = f"bench/results/{run['file']}"
        lines += ["", "<details><summary>The run, with its command</summary>", "",
                  f"**{run['time']}**{commit}, load {run['load']}. {run['setup']}. Figures: "
                  f"[`{data}`]({data}); the experiment: "
                  f"[docs/experiments.md](docs/experiments.md#{anchor(run['source'])}).", "",
                  "```sh", *run["command"].split("\n"), "```", "", "</details>"]
        out.append("\n".join(lines) + "\n")
    return out


def render_markdown(runs, published):
    parts = [START, "", summary(runs)]
    for key, name, detail in MODELS:
        text, _ = model_table(runs, published, key, name, detail)
        parts.append(text)
    parts.extend(ablation_tables(runs))
    parts.append(END)
    return "\n".join(parts)


# --- the plot -------------------------------------------------------------------------------

def render_svg(name, plot):
    """Right answers per row as horizontal bars: tagloop, native, and the published figure."""
    left, width, row_h, top = 190, 360, 34, 86
    notes_lines = 1 + any(p[4] for p in plot) + any(p[5] for p in plot)
    height = top + row_h * len(plot) + 26 + 14 * notes_lines
    total_w = left + width + 110
    legend = 58
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height}" '
           f'viewBox="0 0 {total_w} {height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">',
           f'<rect width="{total_w}" height="{height}" fill="#ffffff"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{html.escape(name)}</text>',
           '<text x="10" y="40" fill="#4a5568">right answers per BFCL category (through tagloop serve) '
           'and per agent task set</text>',
           f'<rect x="10" y="{legend}" width="14" height="10" fill="#2b6cb0"/>',
           f'<text x="29" y="{legend + 9}">tagloop</text>',
           f'<rect x="95" y="{legend}" width="14" height="10" fill="#a0aec0"/>',
           f'<text x="114" y="{legend + 9}">native (llama.cpp --jinja; agent: ToolCallingAgent)</text>',
           f'<rect x="425" y="{legend - 4}" width="3" height="18" fill="#c05621"/>',
           f'<text x="433" y="{legend + 9}">published'
           f'{"" if any(p[6] is not None for p in plot) else " (none known)"}</text>']
    for pct in (0, 25, 50, 75, 100):
        x = left + width * pct / 100
        out.append(f'<line x1="{x:.0f}" y1="{top - 8}" x2="{x:.0f}" y2="{top + row_h * len(plot)}" '
                   f'stroke="#e2e8f0"/>')
        out.append(f'<text x="{x:.0f}" y="{top + row_h * len(plot) + 16}" text-anchor="middle" '
                   f'fill="#4a5568">{pct}%</text>')
    for i, (label, row, mine, theirs, older, other_run, pub) in enumerate(plot):
        y = top + i * row_h
        out.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end">{html.escape(label)}</text>')
        bar(out, y + 2, mine, "#2b6cb0" if not older else "#90cdf4", left, width, " †" if older else "")
        if theirs is not None:
            bar(out, y + 15, theirs, "#a0aec0", left, width, " ‡" if other_run else "")
        else:
            what = "no native run of the suite" if row in OWN_SUITES else "native not run"
            out.append(f'<text x="{left + 4}" y="{y + 24}" fill="#718096" font-size="11">{what}</text>')
        if pub is not None:
            x = left + width * pub / 100
            out.append(f'<rect x="{x - 1.5:.1f}" y="{y}" width="3" height="27" fill="#c05621"/>')
    notes = []
    if any(p[4] for p in plot):
        notes.append("† an older configuration (no run of today's defaults)")
    if any(p[5] for p in plot):
        notes.append("‡ native from another run")
    notes.append("figures, slices and runs: BENCHMARKS.md")
    for j, note in enumerate(notes):
        out.append(f'<text x="10" y="{height - 8 - 14 * (len(notes) - 1 - j)}" fill="#4a5568" '
                   f'font-size="11">{html.escape(note)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def bar(out, y, res, colour, left, width, mark):
    w = width * res["passed"] / res["total"] if res["total"] else 0
    out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="11" fill="{colour}"/>')
    out.append(f'<text x="{left + w + 4:.1f}" y="{y + 10}" font-size="11">{fraction(res)}{mark}</text>')


# --- writing and checking -------------------------------------------------------------------

def outputs(runs, published, results):
    """BENCHMARKS.md's generated part, and {path: text} of the plots in `results`."""
    files = {}
    for key, name, detail in MODELS:
        _, plot = model_table(runs, published, key, name, detail)
        files[os.path.join(results, f"{key}.svg")] = render_svg(name, plot)
    return render_markdown(runs, published), files


def splice(doc, part):
    a, b = doc.find(START), doc.find(END)
    if a < 0 or b < a:
        raise BadResult(f"BENCHMARKS.md has no {START} … {END} markers")
    return doc[:a] + part + doc[b + len(END):]


def broken_sources(runs, headings):
    return [f"{r['file']}: docs/experiments.md has no heading `{r['source']}`"
            for r in runs if r["source"] not in headings]


def broken_links(doc, headings):
    """Links from BENCHMARKS.md into docs/experiments.md whose anchor no heading there gives."""
    anchors = {anchor(h) for h in headings}
    return [f"BENCHMARKS.md links to docs/experiments.md#{a}, which no heading gives"
            for a in re.findall(r"\]\(docs/experiments\.md#([^)\s]+)\)", doc) if a not in anchors]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when BENCHMARKS.md or a plot differs from the JSON")
    ap.add_argument("--root", default=ROOT, help="the repository (default: this script's)")
    args = ap.parse_args(argv)
    results = os.path.join(args.root, "bench", "results")
    benchmarks = os.path.join(args.root, "BENCHMARKS.md")
    try:
        runs = load_runs(results)
        part, files = outputs(runs, load_published(results), results)
        with open(benchmarks, encoding="utf-8") as f:
            doc = f.read()
        new_doc = splice(doc, part)
    except BadResult as e:
        print(f"bench-tables: {e}", file=sys.stderr)
        return 2
    headings = experiment_headings(os.path.join(args.root, "docs", "experiments.md"))
    problems = broken_sources(runs, headings) + broken_links(new_doc, headings)
    if args.check:
        if new_doc != doc:
            diff = difflib.unified_diff(doc.splitlines(), new_doc.splitlines(), "BENCHMARKS.md",
                                        "from bench/results", lineterm="", n=1)
            problems.append("BENCHMARKS.md's generated part differs from bench/results/*.json "
                            "(run scripts/bench-tables.py):\n" + "\n".join(list(diff)[:40]))
        for path, text in files.items():
            old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
            if old != text:
                problems.append(f"{os.path.relpath(path, args.root)} is stale (run scripts/bench-tables.py)")
        for p in problems:
            print(f"bench-tables: {p}", file=sys.stderr)
        if not problems:
            print(f"bench-tables: BENCHMARKS.md and {len(files)} plots match {len(runs)} runs")
        return 1 if problems else 0
    with open(benchmarks, "w", encoding="utf-8") as f:
        f.write(new_doc)
    for path, text in files.items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    for p in problems:
        print(f"bench-tables: {p}", file=sys.stderr)
    print(f"bench-tables: wrote BENCHMARKS.md's tables and {len(files)} plots from {len(runs)} runs")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
