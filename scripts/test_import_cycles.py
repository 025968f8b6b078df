#!/usr/bin/env python3
"""Tests of scripts/import-cycles.py on small crates written to a temporary folder.

    python3 scripts/test_import_cycles.py          (CI runs it before the check itself)
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'import-cycles.py')


def check(files, folder='src', extra=()):
    """Write `files` (path -> text) under a fresh crate and run the script on its `folder`, with
    `extra` arguments: (exit code, output)."""
    with tempfile.TemporaryDirectory() as crate:
        for path, text in files.items():
            full = os.path.join(crate, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, 'w', encoding='utf-8') as f:
                f.write(text)
        run = subprocess.run([sys.executable, SCRIPT, os.path.join(crate, folder), *extra],
                             capture_output=True, text=True, check=False)
        return run.returncode, run.stdout + run.stderr


class ImportCycles(unittest.TestCase):
    def test_an_import_from_a_lower_layer_to_a_higher_one_runs_back_up(self):
        files = {
            'src/lib.rs': 'mod serve;\nmod agent;\nmod text;\n',
            'src/serve/mod.rs': 'mod http;\n',
            'src/serve/http.rs': 'use crate::agent::run::Run;\npub struct Http;\n',
            'src/agent/mod.rs': 'pub(crate) mod run;\n',
            'src/agent/run.rs': 'use crate::text::clip;\npub struct Run;\n',
            'src/text.rs': 'pub fn clip() {}\n',
        }
        layers = ('--layers', 'serve,agent,text')
        code, out = check(files, extra=layers)
        self.assertEqual(code, 0, out)
        self.assertIn('0 import(s) running back up', out)
        files['src/text.rs'] = 'use crate::serve::http::Http;\npub fn clip() {}\n'
        code, out = check(files, extra=layers)
        self.assertEqual(code, 1, out)
        self.assertIn('back up: ', out)
        self.assertIn('src/text.rs -> ', out)
        # A module the list does not place is an error, not a pass.
        code, out = check(files, extra=('--layers', 'serve,agent'))
        self.assertNotEqual(code, 0, out)
        self.assertIn('does not place text', out)

    def test_two_files_that_import_each_other_are_a_circle(self):
        code, out = check({
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': 'use crate::b::B;\npub struct A;\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        })
        self.assertEqual(code, 1, out)
        self.assertIn('src/a.rs <-> ', out)
        self.assertIn('1 import circle(s)', out)

    def test_a_crate_outside_the_repository_src_is_read_from_its_own_src(self):
        # crate:: paths of tagloop-protocol/src were once looked up in ./src: 0 imports found.
        code, out = check({
            'proto/src/lib.rs': 'mod a;\nmod b;\n',
            'proto/src/a.rs': 'use crate::b::B;\npub struct A;\n',
            'proto/src/b.rs': 'use crate::a::A;\npub struct B;\n',
        }, folder='proto/src')
        self.assertEqual(code, 1, out)
        self.assertIn('2 imports', out)

    def test_a_parent_file_that_uses_a_child_which_uses_it_is_a_circle(self):
        code, out = check({
            'src/lib.rs': 'mod x;\n',
            'src/x.rs': 'mod child;\nuse child::Thing;\npub struct Shared;\n',
            'src/x/child.rs': 'use super::Shared;\npub struct Thing;\n',
        })
        self.assertEqual(code, 1, out)
        self.assertIn('/src/x.rs <-> ', out)
        self.assertIn('/src/x/child.rs', out)

    def test_an_x_rs_that_only_re_exports_its_child_is_its_map_as_a_mod_rs_is(self):
        for parent in ('src/x.rs', 'src/x/mod.rs'):
            code, out = check({
                'src/lib.rs': 'mod x;\n',
                parent: 'mod child;\npub use child::Thing;\npub struct Shared;\n',
                'src/x/child.rs': 'use super::Shared;\npub struct Thing;\n',
                'src/user.rs': 'use crate::x::Thing;\n',
            })
            self.assertEqual(code, 0, parent + ': ' + out)
            # user.rs -> x/child.rs (through the re-export), child.rs -> the parent.
            self.assertIn('2 imports', out)

    def test_a_folder_outside_any_src_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run([sys.executable, SCRIPT, d], capture_output=True, text=True,
                                 check=False)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("not inside a crate's src folder", run.stderr)


    def test_a_path_written_in_code_is_an_import(self):
        # serve/http.rs named `super::messages::create` in its router, without a `use`, while
        # messages/mod.rs used http's items: a circle the check once missed (issue 45).
        code, out = check({
            'src/lib.rs': 'mod http;\nmod messages;\n',
            'src/http.rs': 'pub struct Shared;\nfn router() { let _ = super::messages::create; }\n',
            'src/messages.rs': 'use crate::http::Shared;\npub fn create() {}\n',
        })
        self.assertEqual(code, 1, out)
        self.assertIn('src/http.rs <-> ', out)

    def test_paths_in_comments_strings_and_unit_tests_are_not_imports(self):
        code, out = check({
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': '/// See [`crate::b::B`].\npub struct A; // crate::b::B\n'
                        'fn f() -> &str { "crate::b::B" }\n'
                        '#[cfg(test)]\nmod tests { fn t() { let _ = crate::b::B; } }\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        })
        self.assertEqual(code, 0, out)
        self.assertIn('0 import circle(s)', out)

    def test_a_test_module_declared_early_hides_nothing_after_it(self):
        # `#[cfg(test)] mod tests;` near the top once ended the scan there, and with it every
        # `use` below: tagloop-protocol's action/ had a circle no run reported.
        code, out = check({
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': '#[cfg(test)]\nmod tests;\n\nuse crate::b::B;\npub struct A;\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        })
        self.assertEqual(code, 1, out)
        self.assertIn('1 import circle(s)', out)

    def test_a_test_only_item_is_skipped_and_what_follows_it_is_read(self):
        code, out = check({
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': 'pub struct A;\n#[cfg(test)]\nfn only_in_tests() {\n    let _ = crate::b::B;\n}\n'
                        '#[cfg(test)]\nuse crate::b::B;\n'
                        'fn f() -> u8 { 1 }\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        })
        self.assertEqual(code, 0, out)
        files = {
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': 'pub struct A;\n#[cfg(test)]\nfn only_in_tests() {}\nuse crate::b::B;\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        }
        code, out = check(files)
        self.assertEqual(code, 1, out)

    def test_unit_tests_gated_on_a_feature_are_not_imports_either(self):
        code, out = check({
            'src/lib.rs': 'mod a;\nmod b;\n',
            'src/a.rs': 'pub struct A;\n'
                        '#[cfg(all(test, feature = "serve"))]\nmod tests { use crate::b::B; }\n',
            'src/b.rs': 'use crate::a::A;\npub struct B;\n',
        })
        self.assertEqual(code, 0, out)
        self.assertIn('0 import circle(s)', out)

if __name__ == '__main__':
    unittest.main()
