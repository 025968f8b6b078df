#!/usr/bin/env python3
"""Tests of scripts/bench-tables.py: the check CI runs, and how a cell is chosen.

    python3 scripts/test_bench_tables.py          (CI runs it before the check itself)

The check's tests copy the repository's BENCHMARKS.md, docs/experiments.md and bench/results/
to a temporary folder and break one thing at a time there; the choice's tests build runs in
memory.
"""
import copy
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.join(HERE, 'bench-tables.py')

sys.dont_write_bytecode = True   # no scripts/__pycache__ left behind by the import below
spec = importlib.util.spec_from_file_location('bench_tables', SCRIPT)
bt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bt)


def run(root, *args):
    """(exit code, output) of the script on the tree at `root`."""
    p = subprocess.run([sys.executable, SCRIPT, '--root', root, *args],
                       capture_output=True, text=True, check=False)
    return p.returncode, p.stdout + p.stderr


def ablation_conf(name, off, passed, written=None):
    """One configuration of an ablation run over 4 tasks; `written`: its completion tokens."""
    result = {'category': 'validation', 'cases': '4 tasks', 'passed': passed, 'total': 4}
    if written is not None:
        result['completion_tokens'] = written
    return {'name': name, 'role': 'tagloop', 'kept': False, 'default': False,
            'policy_off': off, 'results': [result]}


class Check(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        shutil.copy(os.path.join(ROOT, 'BENCHMARKS.md'), self.root)
        os.makedirs(os.path.join(self.root, 'docs'))
        shutil.copy(os.path.join(ROOT, 'docs', 'experiments.md'), os.path.join(self.root, 'docs'))
        shutil.copytree(os.path.join(ROOT, 'bench', 'results'), os.path.join(self.root, 'bench', 'results'))

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def edit_benchmarks(self, change):
        """Rewrite the copy's BENCHMARKS.md as `change` (old text -> new text) says."""
        p = self.path('BENCHMARKS.md')
        with open(p, encoding='utf-8') as f:
            doc = f.read()
        with open(p, 'w', encoding='utf-8') as f:
            f.write(change(doc))

    def edit_run(self, name, change):
        p = self.path('bench', 'results', name)
        with open(p, encoding='utf-8') as f:
            data = json.load(f)
        change(data)
        with open(p, 'w', encoding='utf-8') as f:
            json.dump(data, f, indent=2, ensure_ascii=False)

    def test_the_repository_as_committed_passes(self):
        code, out = run(self.root, '--check')
        self.assertEqual(code, 0, out)

    def write_ablation(self, model, title, started, confs):
        """Writes an ablation run of `confs` (see `ablation_conf`), regenerates BENCHMARKS.md and
        returns it."""
        with open(self.path('bench', 'results', '2026-11-27-qwen05-suite.json'), encoding='utf-8') as f:
            source = json.load(f)['source']
        ablation = {'model': model, 'benchmark': 'ablation', 'title': title,
                    'started': started, 'time': 't', 'commit': None, 'load': 1,
                    'setup': 's', 'source': source, 'command': 'scripts/ablation.sh',
                    'configurations': confs}
        with open(self.path('bench', 'results', f'{started[:10]}-{model}-ablation.json'), 'w',
                  encoding='utf-8') as f:
            json.dump(ablation, f)
        code, out = run(self.root)
        self.assertEqual(code, 0, out)
        with open(self.path('BENCHMARKS.md'), encoding='utf-8') as f:
            return f.read()

    def test_an_ablation_run_gets_its_own_table_and_leaves_the_lead_tables_alone(self):
        before = bt.render_markdown(bt.load_runs(self.path('bench', 'results')), {})
        doc = self.write_ablation('qwen05', 'Ablation of t', '2026-12-05T19:30Z', [
            ablation_conf('defaults', [], 2), ablation_conf('without decide', ['decide'], 3),
            ablation_conf('all policies off', ['all'], 1)])
        self.assertIn('#### Ablation: Qwen2.5-Coder-0.5B-Instruct, Ablation of t', doc)
        self.assertIn('| defaults | 2/4 |', doc)
        self.assertIn('| without decide | 3/4 (+25) |', doc)
        self.assertIn('| all policies off | 1/4 (-25) |', doc)
        # The table cites its run: the figures' file, the experiment and the command.
        mine = doc.split('#### Ablation: Qwen2.5-Coder-0.5B-Instruct, Ablation of t')[1].split('####')[0]
        self.assertIn('Figures: [`bench/results/2026-12-05-qwen05-ablation.json`]', mine)
        self.assertIn('the experiment: [docs/experiments.md](docs/experiments.md#', mine)
        self.assertIn('```sh\nscripts/ablation.sh\n```', mine)
        after = bt.render_markdown(bt.load_runs(self.path('bench', 'results')), {})
        # The lead tables (everything before the first ablation table) are the same.
        self.assertEqual(after.split('#### Ablation')[0],
                         before.split('#### Ablation')[0].split(bt.END)[0])

    def test_an_ablation_shows_the_tokens_written_only_where_every_configuration_gives_them(self):
        def table(confs):
            doc = self.write_ablation('smollm2', 'Guards', '2026-12-07T04:20Z', confs)
            # This run's table only: the repository's own ablations have tables of their own.
            mine = doc.split('#### Ablation: SmolLM2-135M-Instruct, Guards (')[1]
            return mine.split('####')[0].split(bt.END)[0]
        doc = table([ablation_conf('defaults', [], 1, 1000),
                     ablation_conf('without echo', ['echo'], 1, 1500)])
        self.assertIn('| configuration | validation | tokens written, validation |', doc)
        self.assertIn('| defaults | 1/4 | 1,000 |', doc)
        self.assertIn('| without echo | 1/4 (+0) | 1,500 (+50%) |', doc)
        # One configuration without the figure: no column, rather than a column with a hole.
        doc = table([ablation_conf('defaults', [], 1, 1000),
                     ablation_conf('without echo', ['echo'], 1)])
        self.assertNotIn('tokens written', doc)
        self.assertIn('| without echo | 1/4 (+0) |', doc)

    def test_an_ablation_over_several_categories_totals_them_only_where_every_configuration_has_each(self):
        def conf(name, off, passes):
            results = [{'category': cat, 'cases': '50–79', 'passed': p, 'total': 30}
                       for cat, p in passes.items()]
            return {'name': name, 'role': 'tagloop', 'kept': False, 'default': False,
                    'policy_off': off, 'results': results}
        def table(confs):
            doc = self.write_ablation('qwen15', 'Rules', '2026-12-07T10:06Z', confs)
            mine = doc.split('#### Ablation: Qwen2.5-Coder-1.5B-Instruct, Rules (')[1]
            return mine.split('####')[0].split(bt.END)[0]
        doc = table([conf('defaults', [], {'multiple': 24, 'irrelevance': 21}),
                     conf('without guess', ['guess'], {'multiple': 27, 'irrelevance': 12})])
        self.assertIn('| configuration | multiple | irrelevance | all |', doc)
        self.assertIn('| defaults | 24/30 | 21/30 | 45/60 |', doc)
        # 39/60 against 45/60: 10 points fewer.
        self.assertIn('| without guess | 27/30 (+10) | 12/30 (-30) | 39/60 (-10) |', doc)
        # A configuration that lacks a category: no total, rather than sums of different cases.
        doc = table([conf('defaults', [], {'multiple': 24, 'irrelevance': 21}),
                     conf('without guess', ['guess'], {'multiple': 27})])
        self.assertNotIn(' all |', doc)
        self.assertIn('| without guess | 27/30 (+10) | – |', doc)

    def latest_default(self, model):
        """The file of `model`'s latest BFCL run with today's defaults: the lead table's source."""
        runs = [r for r in bt.load_runs(self.path('bench', 'results'))
                if r['model'] == model and r['benchmark'] == 'bfcl'
                and any(c.get('default') for c in r['configurations'])]
        return max(runs, key=lambda r: r['started'])['file']

    def test_a_figure_changed_in_the_json_fails_until_the_tables_are_written_again(self):
        changed = {}
        def fewer(data):
            conf = [c for c in data['configurations'] if c.get('default')][0]
            r = conf['results'][0]
            r['passed'] = r['passed'] - 1 if r['passed'] > 0 else 1
            changed['figure'] = f"{r['passed']}/{r['total']}"
        self.edit_run(self.latest_default('qwen05'), fewer)
        code, out = run(self.root, '--check')
        self.assertEqual(code, 1, out)
        self.assertIn("BENCHMARKS.md's generated part differs", out)
        self.assertIn(changed['figure'], out)
        code, out = run(self.root)                # write
        self.assertEqual(code, 0, out)
        code, out = run(self.root, '--check')
        self.assertEqual(code, 0, out)

    def test_a_figure_typed_into_the_generated_part_fails(self):
        typed = {}
        def retype(doc):
            start = doc.index(bt.START)
            m = re.compile(r'(\d+)/(\d+)').search(doc, start)
            passed, total = int(m.group(1)), int(m.group(2))
            typed['figure'] = f"{passed + 1 if passed < total else passed - 1}/{total}"
            return doc[:m.start()] + typed['figure'] + doc[m.end():]
        self.edit_benchmarks(retype)
        code, out = run(self.root, '--check')
        self.assertEqual(code, 1, out)
        self.assertIn(typed['figure'], out)

    def test_text_outside_the_markers_is_left_alone(self):
        self.edit_benchmarks(lambda doc: doc.replace(
            '## New measurements (to be filed)\n',
            '## New measurements (to be filed)\n\n### A section appended by hand\n'))
        code, out = run(self.root, '--check')
        self.assertEqual(code, 0, out)

    def test_a_stale_plot_fails(self):
        with open(self.path('bench', 'results', 'qwen15.svg'), 'a', encoding='utf-8') as f:
            f.write('<!-- edited -->\n')
        code, out = run(self.root, '--check')
        self.assertEqual(code, 1, out)
        self.assertIn('qwen15.svg is stale', out)

    def test_a_run_whose_experiment_has_no_section_fails(self):
        self.edit_run('2026-11-28-qwen15-suite.json', lambda d: d.update(source='No such experiment'))
        code, out = run(self.root)
        self.assertEqual(code, 1, out)
        self.assertIn('has no heading `No such experiment`', out)

    def test_a_link_to_a_section_that_moved_fails(self):
        self.edit_benchmarks(lambda doc: doc + '\nSee [there](docs/experiments.md#a-section-that-is-gone).\n')
        code, out = run(self.root, '--check')
        self.assertEqual(code, 1, out)
        self.assertIn('#a-section-that-is-gone', out)

    def test_a_run_without_its_command_is_refused(self):
        self.edit_run('2026-11-28-qwen15-suite.json', lambda d: d.pop('command'))
        code, out = run(self.root, '--check')
        self.assertEqual(code, 2, out)
        self.assertIn('no `command`', out)

    def test_more_passed_than_cases_is_refused(self):
        def impossible(data):
            data['configurations'][0]['results'][0]['passed'] = 99
        self.edit_run('2026-11-28-qwen15-suite.json', impossible)
        code, out = run(self.root, '--check')
        self.assertEqual(code, 2, out)

    def test_benchmarks_without_the_markers_is_refused(self):
        self.edit_benchmarks(lambda doc: doc.replace(bt.END, ''))
        code, out = run(self.root, '--check')
        self.assertEqual(code, 2, out)
        self.assertIn('markers', out)


def result(category, passed, total, seconds=None, cases='0–9', **more):
    r = {'category': category, 'cases': cases, 'passed': passed, 'total': total}
    if seconds is not None:
        r['seconds_per_case'] = seconds
    r.update(more)
    return r


def a_run(started, confs, model='qwen05'):
    return {'model': model, 'benchmark': 'bfcl', 'title': 't', 'started': started, 'time': started,
            'load': '1', 'setup': 's', 'source': 'x', 'command': 'c', 'file': started + '.json',
            'configurations': confs}


class Choice(unittest.TestCase):
    def test_todays_default_beats_a_newer_run_of_another_configuration(self):
        old = a_run('2026-11-28T01:00Z', [
            {'name': 'default', 'role': 'tagloop', 'kept': True, 'default': True,
             'results': [result('multiple', 9, 10, 11.5)]}])
        newer = a_run('2026-11-28T02:00Z', [
            {'name': 'variant', 'role': 'tagloop', 'kept': True, 'default': False,
             'results': [result('multiple', 5, 10)]}])
        cell = bt.pick([old, newer], 'qwen05', 'multiple')
        self.assertEqual(cell['tagloop'][2]['passed'], 9)
        self.assertFalse(cell['older'])

    def test_without_a_default_run_the_latest_kept_figure_is_flagged(self):
        def conf(name, kept, passed):
            return {'name': name, 'role': 'tagloop', 'kept': kept,
                    'results': [result('parallel', passed, 10)]}
        runs = [a_run('2026-11-27T01:00Z', [conf('kept', True, 3)]),
                a_run('2026-11-28T01:00Z', [conf('lost', False, 6), conf('kept', True, 4)])]
        cell = bt.pick(runs, 'qwen05', 'parallel')
        self.assertEqual(cell['tagloop'][2]['passed'], 4)   # never the configuration that lost
        self.assertTrue(cell['older'])
        self.assertIsNone(bt.pick(runs, 'qwen05', 'multiple'))
        self.assertIsNone(bt.pick(runs, 'qwen15', 'parallel'))

    def test_the_larger_slice_of_one_run_wins(self):
        r = a_run('2026-11-28T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'default': True,
             'results': [result('simple_python', 7, 10), result('simple_python', 13, 20, cases='0–19')]}])
        self.assertEqual(bt.fraction(bt.pick([r], 'qwen05', 'simple_python')['tagloop'][2]), '13/20')

    def test_the_ratio_is_the_runs_own_or_taken_within_one_run(self):
        native = {'name': 'n', 'role': 'native', 'results': [result('multiple', 0, 10, 10.0)]}
        given = a_run('2026-11-28T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'default': True,
             'results': [result('multiple', 9, 10, 11.5, ratio_to_native=1.17)]}, native])
        self.assertEqual(bt.ratio(bt.pick([given], 'qwen05', 'multiple')), 1.17)
        computed = a_run('2026-11-28T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'default': True, 'results': [result('multiple', 9, 10, 15.0)]},
            copy.deepcopy(native)])
        self.assertEqual(bt.ratio(bt.pick([computed], 'qwen05', 'multiple')), 1.5)

    def test_native_from_another_run_is_flagged_and_has_no_ratio(self):
        mine = a_run('2026-11-28T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'default': True, 'results': [result('multiple', 7, 10, 6.3)]}])
        theirs = a_run('2026-11-27T01:00Z', [
            {'name': 'n', 'role': 'native', 'results': [result('multiple', 0, 10, 12.9)]}])
        cell = bt.pick([mine, theirs], 'qwen05', 'multiple')
        self.assertTrue(cell['other_run'])
        self.assertIsNone(bt.ratio(cell))

    def test_a_dev_split_figure_goes_beside_the_validation_one_never_over_it(self):
        validation = a_run('2026-11-28T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'kept': True, 'default': True,
             'results': [result('parallel', 17, 30, cases='50–79')]}])
        dev = a_run('2026-11-29T01:00Z', [
            {'name': 'd', 'role': 'tagloop', 'kept': True, 'default': True,
             'results': [result('parallel', 22, 50, cases='0–49')]}])
        cell = bt.pick([validation, dev], 'qwen05', 'parallel')
        self.assertEqual(bt.fraction(cell['tagloop'][2]), '17/30')
        self.assertEqual(bt.fraction(bt.dev_pick([validation, dev], 'qwen05', 'parallel')[2]), '22/50')
        self.assertIsNone(bt.dev_pick([validation], 'qwen05', 'parallel'))
        table, _ = bt.model_table([validation, dev], {}, 'qwen05', 'Q', 'detail')
        self.assertIn('| tagloop | dev split (0–49) | native |', table)
        row = next(line for line in table.splitlines() if line.startswith('| parallel |'))
        self.assertIn('| 17/30 | 22/50 |', row)
        self.assertIn('[1] [2]', row)
        # rows the dev split did not reach keep their columns in line
        other = next(line for line in table.splitlines() if line.startswith('| multiple |'))
        self.assertEqual(other.count('|'), row.count('|'))
        # without a dev figure the column is not there at all
        alone, _ = bt.model_table([validation], {}, 'qwen05', 'Q', 'detail')
        self.assertNotIn('dev split', alone)
        # a row measured on dev only shows its dev figure
        only_dev = a_run('2026-11-29T02:00Z', [
            {'name': 'd', 'role': 'tagloop', 'kept': True, 'default': True,
             'results': [result('irrelevance', 41, 50, cases='0–49')]}])
        table, _ = bt.model_table([validation, only_dev], {}, 'qwen05', 'Q', 'detail')
        row = next(line for line in table.splitlines() if line.startswith('| irrelevance |'))
        self.assertIn('| not measured | 41/50 |', row)

    def test_every_line_of_a_table_with_the_dev_column_keeps_its_cells_in_line(self):
        def conf(cases, passed, total):
            return {'name': 'd', 'role': 'tagloop', 'kept': True, 'default': True,
                    'total': {'passed': passed * len(bt.BFCL), 'total': total * len(bt.BFCL)},
                    'results': [result(c, passed, total, cases=cases) for c in bt.BFCL]}
        validation = a_run('2026-11-28T01:00Z', [conf('50–79', 20, 30)])
        dev = a_run('2026-11-29T01:00Z', [conf('0–49', 30, 50)])
        agent = a_run('2026-11-29T03:00Z', [
            {'name': 'd', 'role': 'tagloop', 'kept': True, 'default': True,
             'results': [result('dev', 19, 47, cases='47 tasks')]}])
        agent['benchmark'] = 'suite'
        table, _ = bt.model_table([validation, dev, agent], {}, 'qwen05', 'Q', 'detail')
        rows = [line for line in table.splitlines() if line.startswith('| ')]
        self.assertEqual({line.count('|') for line in rows}, {rows[0].count('|')}, table)
        total = next(line for line in rows if line.startswith('| **all'))
        self.assertIn(f"**{20 * len(bt.BFCL)}/{30 * len(bt.BFCL)}** | **{30 * len(bt.BFCL)}/{50 * len(bt.BFCL)}** |", total)
        self.assertIn('[1] [2]', total)

    def test_anchors_are_githubs(self):
        heading = "The 1.5B's whole suite on a quiet machine (main 295957f, 2026-11-28 03:34–04:02 UTC)"
        self.assertEqual(bt.anchor(heading),
                         'the-15bs-whole-suite-on-a-quiet-machine-main-295957f-2026-11-28-03340402-utc')
        self.assertEqual(bt.anchor('Agent loop (`benches/agent.rs`, `examples/agent_memory.rs`)'),
                         'agent-loop-benchesagentrs-examplesagent_memoryrs')


if __name__ == '__main__':
    unittest.main()
