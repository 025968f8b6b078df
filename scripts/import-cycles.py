#!/usr/bin/env python3
"""Import circles between the files of one module tree (issue 33): which files import each other,
directly or round a longer circle.

    python3 scripts/import-cycles.py [DIR]          (DIR: src/agent by default)
    python3 scripts/import-cycles.py src --layers cli,queue,serve,agent,…

With `--layers` (the first-level modules of DIR, a crate's `src`, top first) it also reports every import that runs
back up, from a module to one listed before it (the architecture's one-way flow: CLI and server
above the agent loop, above its parts, above the leaves), and exits 1 on any.

DIR is any folder inside a crate's `src` (`src`, `src/agent`, `tagloop-protocol/src`); `crate::…`
paths are read from that crate's `src`. CI runs it on `src` and on `tagloop-protocol/src`.

A file imports another when one of its `use` declarations, or a path written out in its code
(`super::messages::create`, `crate::serve::http::admit`), names an item the other defines. Paths
are read as Rust resolves them, for `super::…`, `super::super::…`, `self::…` (in a `mod.rs`) and
`crate::…`; a name a module file re-exports (`pub use child::Name`, `pub(crate) use …`) counts as
the child file that defines it, since a module file that re-exports is the module's map, not a
user of its children. A module file is a `mod.rs`, an `x.rs` beside its folder `x/` (the same
module, spelt the newer way) or the crate root. `mod x;` declarations are not imports. A path
in code counts when it starts at `crate::`, `super::` or `self::` (a bare path names a local or a
child); comments do not count, nor a file's unit tests (from a `#[cfg(test)]` or `#[cfg(all(test, …))]` line before a `mod … {` on), nor
any other item under such a line (a test-only `use` or function), nor
files named `tests.rs`. Prints each circle (a strongly connected component of two files or more) and the
count; exits 1 when there is one.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The crate's `src` folder the files are read under (`crate::…` starts here); set by main() from
# the folder checked, so `tagloop-protocol/src` is read as its own crate.
SRC = os.path.join(ROOT, 'src')
# The line that opens a file's unit tests: `#[cfg(test)]`, or tests gated on a feature too
# (`#[cfg(all(test, feature = "serve"))]`).
UNIT_TESTS = re.compile(r'#\[cfg\((all\(\s*)?test\b')


def module_of(path):
    """`src/agent/context/request.rs` -> ['agent', 'context', 'request']; a mod.rs is its folder."""
    rel = os.path.relpath(path, SRC)
    parts = rel[:-3].split(os.sep)
    if parts[-1] == 'mod':
        parts = parts[:-1]
    return parts


def file_of(module):
    """The file that holds `module` (a list of names under src/), or None."""
    base = os.path.join(SRC, *module)
    for candidate in (base + '.rs', os.path.join(base, 'mod.rs')):
        if os.path.isfile(candidate):
            return candidate
    return None


def is_map(path):
    """Whether a file is a module with children: a `mod.rs`, a `lib.rs`/`main.rs` crate root, or an
    `x.rs` beside a folder `x/` (the newer spelling of `x/mod.rs`)."""
    name = os.path.basename(path)
    if name == 'mod.rs' or (name in ('lib.rs', 'main.rs') and os.path.dirname(path) == SRC):
        return True
    return os.path.isdir(path[:-3])


def code_lines(path):
    """The file's lines that build outside tests: up to its unit tests' module (a `#[cfg(test)]`
    line before a `mod … {`), and without any other item under `#[cfg(test)]` (a test-only `use`,
    a test-only function: skipped to its `;` or its closing brace)."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().split('\n')
    out, i = [], 0
    while i < len(lines):
        stripped = lines[i].strip()
        if not UNIT_TESTS.match(stripped):
            out.append(lines[i])
            i += 1
            continue
        # The item the attribute is on: the next line that is not an attribute or a comment.
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].strip().startswith(('#[', '//'))):
            j += 1
        if j < len(lines) and re.match(r'(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{', lines[j].strip()):
            break
        depth, opened = 0, False
        while j < len(lines):
            code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', lines[j].split('//', 1)[0])
            depth += code.count('{') - code.count('}')
            opened |= '{' in code
            j += 1
            if (opened and depth <= 0) or (not opened and code.rstrip().endswith(';')):
                break
        i = j
    return out


def use_declarations(path):
    """The text of each `use …;` declaration outside the file's tests, and whether it is public."""
    out, current, public = [], None, False
    for line in code_lines(path):
        stripped = line.strip()
        if current is None:
            m = re.match(r'(pub(\([^)]*\))?\s+)?use\s+(.*)', stripped)
            if not m:
                continue
            public, current = m.group(1) is not None, m.group(3)
        else:
            current += ' ' + stripped
        if current.rstrip().endswith(';'):
            out.append((current.rstrip()[:-1], public))
            current = None
    return out


# A path written out in code: `crate::a::b`, `super::super::a`, `self::a` (the names after it are
# kept whole, `::{…}` groups and generics end it).
CODE_PATH = re.compile(r'(?<![\w:])((?:crate|self|super)(?:::super)*(?:::[A-Za-z_]\w*)+)')


def code_paths(path):
    """Each path written out in the file's code (not in `use` declarations, comments or the unit
    tests): `super::messages::create`."""
    out, in_use = [], False
    for line in code_lines(path):
        stripped = line.strip()
        if in_use or re.match(r'(pub(\([^)]*\))?\s+)?use\s', stripped):
            in_use = not stripped.endswith(';')
            continue
        code = line.split('//', 1)[0]
        # Text in string literals is not code.
        code = re.sub(r'"(?:[^"\\]|\\.)*"', '""', code)
        out += CODE_PATH.findall(code)
    return out


def expand(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (`as` renames and `self` kept as paths)."""
    tree = tree.strip()
    depth, brace = 0, None
    for i, ch in enumerate(tree):
        if ch == '{' and depth == 0:
            brace = i
            break
    if brace is None:
        return [re.sub(r'\s+as\s+\w+$', '', tree)]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rindex('}')]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif ch == ',' and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    paths = []
    for p in parts:
        if p.strip():
            for e in expand(p):
                paths.append(prefix + e if e != 'self' else prefix.rstrip(':'))
    return paths


def absolute(path, module):
    """A `use` path as names under the crate root, or None for another crate's."""
    names = path.split('::')
    if names[0] == 'crate':
        return names[1:]
    if names[0] == 'self':
        return list(module) + names[1:]
    if names[0] == 'super':
        base = list(module)
        while names and names[0] == 'super':
            base = base[:-1]
            names = names[1:]
        return base + names
    # A bare path names a child module of this one, or another crate (not followed).
    if file_of(list(module) + names[:1]):
        return list(module) + names
    return None


def reexports(mod_file, module):
    """What a mod.rs re-exports: name -> the absolute path it stands for."""
    out = {}
    for decl, public in use_declarations(mod_file):
        if not public:
            continue
        for p in expand(decl):
            target = absolute(p, module)
            if target:
                out[target[-1]] = target
    return out


def target_file(names, seen=0):
    """The file that defines the item `names` (absolute): the deepest module file on the path,
    through the re-exports of a mod.rs."""
    for cut in range(len(names), 0, -1):
        f = file_of(names[:cut])
        if f is None:
            continue
        rest = names[cut:]
        if rest and is_map(f) and seen < 8:
            again = reexports(f, names[:cut]).get(rest[0])
            if again and again != names[:cut + 1]:
                return target_file(again + rest[1:], seen + 1)
        return f
    return None


def graph(top):
    files = []
    for d, _, names in os.walk(top):
        files += [os.path.join(d, n) for n in names if n.endswith('.rs') and n != 'tests.rs']
    edges = {f: set() for f in files}
    for f in files:
        module, map_file = module_of(f), is_map(f)
        for decl, public in use_declarations(f):
            if map_file and public:
                continue
            for p in expand(decl):
                names = absolute(p, module)
                target = names and target_file(names)
                if target and target != f and target in edges:
                    edges[f].add(target)
        for p in code_paths(f):
            names = absolute(p, module)
            target = names and target_file(names)
            if target and target != f and target in edges:
                edges[f].add(target)
    return edges


def circles(edges):
    """Tarjan's strongly connected components of two files or more."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def crate_src(top):
    """The `src` folder of the crate that holds `top` (the nearest folder named `src` above it)."""
    d = top
    while os.path.basename(d) != 'src':
        parent = os.path.dirname(d)
        if parent == d:
            sys.exit(f'{top} is not inside a crate\'s src folder')
        d = parent
    return d


def upward(edges, top, layers):
    """The imports that run back up: from a file of one of `top`'s first-level modules to a file of
    a module listed before it in `layers` (top first). A module missing from the list is an
    error, so a new one must be placed."""
    def first(f):
        rel = os.path.relpath(f, top).split(os.sep)
        return rel[0][:-3] if rel[0].endswith('.rs') else rel[0]
    roots = ('lib', 'main')
    missing = sorted({first(f) for f in edges} - set(layers) - set(roots))
    if missing:
        sys.exit(f'--layers does not place {", ".join(missing)}: add each where it belongs')
    rank = {name: i for i, name in enumerate(layers)}
    out = []
    for f, targets in sorted(edges.items()):
        if first(f) in roots:
            continue
        for t in sorted(targets):
            if first(t) not in roots and rank[first(t)] < rank[first(f)]:
                out.append((f, t))
    return out


def main():
    global SRC
    args = sys.argv[1:]
    layers = None
    if '--layers' in args:
        i = args.index('--layers')
        if i + 1 >= len(args):
            sys.exit('--layers needs the first-level modules, top first, comma-separated')
        layers = args[i + 1].split(',')
        del args[i:i + 2]
    top = os.path.abspath(os.path.join(ROOT, args[0] if args else 'src/agent'))
    if not os.path.isdir(top):
        sys.exit(f'no such folder: {top}')
    SRC = crate_src(top)
    edges = graph(top)
    found = circles(edges)
    for c in found:
        print('circle: ' + ' <-> '.join(os.path.relpath(f, ROOT) for f in c))
    count = sum(len(v) for v in edges.values())
    print(f'{len(found)} import circle(s) among {len(edges)} files, {count} imports')
    up = upward(edges, top, layers) if layers else []
    for f, t in up:
        print(f'back up: {os.path.relpath(f, ROOT)} -> {os.path.relpath(t, ROOT)}')
    if layers:
        print(f'{len(up)} import(s) running back up the layers {" > ".join(layers)}')
    return 1 if found or up else 0


if __name__ == '__main__':
    sys.exit(main())
