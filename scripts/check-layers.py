#!/usr/bin/env python3
"""Checks the module layering of src/ that DESIGN.md section 5 ("Module map") describes.

Layers, lowest first, by file path:
  0 leaves      every src/*.rs except src/lib.rs
  1 settings    src/guc/**
  2 subsystems  src/snowflake/**, src/segment/**, src/serial/**
  3 registry    src/registry/**
  4 entry       src/lib.rs, src/upgrade.rs (the C symbols of older SQL, which call into the
                subsystems)

Rules:
  (a) a file references only files of a lower layer or of its own layer;
  (b) within the subsystems, one subsystem directory does not reference another, except that
      serial may use segment and snowflake, and segment may use snowflake;
  (c) the file-level graph has no cycle (leaves may use leaves, but acyclically);
  (d) the pure core, crates/idgen-core, depends on no PostgreSQL crate (pgrx*, pq-sys, the
      extension itself): not in its manifest (any dependency table, renamed or not), not
      anywhere in its resolved non-dev dependency graph (`cargo metadata`); and no file of
      crates/idgen-core/src names pgrx or pg_sys or declares foreign functions in code: its
      tests run without PostgreSQL (`cargo test -p idgen-core`).

A reference is `crate::a::b...` or `super::x...` in code (in `use` trees too), resolved to the
file of the longest existing module prefix (src/a/b.rs or src/a/b/mod.rs, else src/a.rs or
src/a/mod.rs, else src/lib.rs). Not edges: a file referring to itself, a file referring to its
own child modules (a parent declaring or re-exporting its children; the crate root's children
are every module), `self::`, `mod x;`. A child referring to its parent is an edge. Test code is
left out: `#[cfg(...test...)]` items, src/**/tests.rs, src/**/tests/*.rs and src/testing.rs.

  python3 scripts/check-layers.py              check; one line per violation, then cargo's
                                               "test result:" line; exit 1 on a violation
  python3 scripts/check-layers.py --graph      also print every edge
  python3 scripts/check-layers.py --self-test  check the checker on small trees of its own
"""
import json
import re
import subprocess
import sys
import tomllib
import tempfile
from pathlib import Path

SUBSYSTEMS = {"snowflake", "segment", "serial"}
ALLOWED_SIDEWAYS = {("serial", "segment"), ("serial", "snowflake"), ("segment", "snowflake")}
LAYER_NAMES = ["leaves", "settings", "subsystems", "registry", "entry"]


def layer(rel):
    """The layer of a file (path relative to the repository, e.g. 'src/guc/check.rs'), or None."""
    parts = rel.split("/")[1:]
    if parts in (["lib.rs"], ["upgrade.rs"]):
        return 4
    if len(parts) == 1:
        return 0
    return {"guc": 1, "registry": 3}.get(parts[0], 2 if parts[0] in SUBSYSTEMS else None)


def is_test_file(rel):
    parts = rel.split("/")
    return rel == "src/testing.rs" or parts[-1] == "tests.rs" or "tests" in parts[1:-1]


def module_of(rel):
    """src/lib.rs -> (), src/a.rs and src/a/mod.rs -> ('a',), src/a/b.rs -> ('a', 'b')."""
    parts = rel[:-3].split("/")[1:]
    if parts in (["lib"], ["mod"]):
        return ()
    return tuple(parts[:-1] if parts[-1] == "mod" else parts)


def blank(text, start, end):
    """Replaces text[start:end] with spaces, keeping newlines so that line numbers hold."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


RAW_STRING = re.compile(r'[bc]?r(#*)"')
CHAR = re.compile(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\\n])'")


def strip_comments_and_strings(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif (m := RAW_STRING.match(src, i)) and not (i and (src[i - 1].isalnum() or src[i - 1] == "_")):
            end = src.find('"' + m.group(1), m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
        elif m := CHAR.match(src, i):
            j = m.end()
        else:
            out.append(c); i += 1; continue
        out.append(re.sub(r"[^\n]", " ", src[i:j]))
        i = j
    return "".join(out)


def strip_test_items(code):
    """Blanks every item under a #[cfg(...)] that names `test` (and not `not(test)`)."""
    for m in reversed(list(re.finditer(r"#\[cfg\(([^\]]*)\)\]", code))):
        if not re.search(r"\btest\b", m.group(1)) or "not(" in m.group(1):
            continue
        i, depth, opened = m.end(), 0, False
        while i < len(code):
            ch = code[i]
            if ch in "([{":
                depth += 1; opened = opened or (ch == "{" and depth == 1)
            elif ch in ")]}":
                depth -= 1
                if depth == 0 and ch == "}" and opened:
                    i += 1; break
            elif ch == ";" and depth == 0:
                i += 1; break
            i += 1
        code = blank(code, m.start(), i)
    return code


def expand_use_tree(body, pos):
    """Expands the body of a `use` into (path, offset) leaves: `crate::{a, b::c}` -> two paths."""
    toks = [(t.group(), t.start() + pos) for t in re.finditer(r"::|[A-Za-z_]\w*|[{},*]", body)]
    paths, k = [], 0

    def tree(prefix, off):
        nonlocal k
        segs = list(prefix)
        while k < len(toks) and toks[k][0] not in (",", "}"):
            tok, at = toks[k]
            k += 1
            if tok == "{":
                while k < len(toks) and toks[k][0] != "}":
                    tree(segs, off)
                    k += toks[k][0] == "," if k < len(toks) else 0
                k += 1
                return
            if tok == "as":
                k += 1  # the new name
            elif tok not in ("::", "*", "self"):
                segs.append(tok)
                off = at
        if segs:
            paths.append(("::".join(segs), off))

    tree([], pos)
    return paths


def references(code):
    """Every (path, line) of a `crate::`/`super::` reference in stripped code."""
    code = re.sub(r"pub\s*\(\s*in\s+[^)]*\)", lambda m: blank(m.group(), 0, len(m.group())), code)
    found = []
    for m in re.finditer(r"\buse\s+([^;]*);", code):
        found += expand_use_tree(m.group(1), m.start(1))
        code = blank(code, m.start(), m.end())
    found += [(m.group(), m.start())
              for m in re.finditer(r"(?<![\w$:])(?:crate|super)(?:::[A-Za-z_]\w*)+", code)]
    return [(p, code.count("\n", 0, off) + 1) for p, off in found
            if p.split("::")[0] in ("crate", "super")]


def resolve(path, here, files_by_module):
    """The file a reference names: the longest existing module prefix of its path."""
    segs = path.split("::")
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    else:
        base = here
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
    while base and base not in files_by_module:
        base = base[:-1]
    for seg in segs:
        if base + (seg,) not in files_by_module:
            break
        base = base + (seg,)
    return files_by_module.get(base)


def build_graph(root):
    """{source: {target: [(path, line), ...]}} over the non-test .rs files under root/src."""
    root = Path(root)
    files = sorted(p.relative_to(root).as_posix() for p in (root / "src").rglob("*.rs"))
    files = [f for f in files if not is_test_file(f)]
    files_by_module = {module_of(f): f for f in files}
    graph = {f: {} for f in files}
    for f in files:
        here = module_of(f)
        code = strip_test_items(strip_comments_and_strings((root / f).read_text()))
        for path, line in references(code):
            target = resolve(path, here, files_by_module)
            if target is None or target == f:
                continue
            if module_of(target)[:len(here)] == here and len(module_of(target)) > len(here):
                continue  # a parent naming its own children
            graph[f].setdefault(target, []).append((path, line))
    return graph


def cycles(graph):
    """Tarjan's strongly connected components with more than one file."""
    index, low, stack, on_stack, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v); on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop(); on_stack.discard(w); scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(sccs)


def shortest_cycle(graph, scc):
    """A shortest cycle through the first file of an SCC (breadth-first), start file repeated."""
    start, members = scc[0], set(scc)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return scc + [start]


def violations(graph):
    out = []
    for f in sorted(graph):
        if layer(f) is None:
            out.append(f"unlayered: {f} (no layer in DESIGN.md section 5 holds src/{f.split('/')[1]}/)")
            continue
        for t, refs in sorted(graph[f].items()):
            if layer(t) is None:
                continue
            kind = None
            if layer(t) > layer(f):
                kind = "upward"
            elif layer(f) == layer(t) == 2:
                a, b = f.split("/")[1], t.split("/")[1]
                if a != b and (a, b) not in ALLOWED_SIDEWAYS:
                    kind = "sideways"
            if kind:
                for path, line in sorted(set(refs), key=lambda r: (r[1], r[0])):
                    out.append(f"{kind}: {f} -> {t} ({path}, line {line})")
    for scc in cycles(graph):
        cyc = shortest_cycle(graph, scc)
        edges = "; ".join(f"{a} -> {b} ({', '.join(f'{p} line {n}' for p, n in graph[a][b])})"
                          for a in scc for b in sorted(graph[a]) if b in scc)
        extra = ""
        if len(scc) > len(cyc) - 1:  # more files are tangled than the one cycle shows
            extra = f"; all {len(scc)} files of this strongly connected set: {', '.join(scc)}"
        out.append(f"cycle: {' -> '.join(cyc)}{extra}; edges: {edges}")
    return out


def core_dependencies(manifest_text):
    """(table, key, package) of every non-dev dependency of a Cargo.toml: [dependencies],
    [build-dependencies], their [dependencies.NAME] forms and [target.'...'.dependencies];
    `package` is the crate a renamed key stands for."""
    doc = tomllib.loads(manifest_text)
    tables = [("dependencies", doc.get("dependencies", {})),
              ("build-dependencies", doc.get("build-dependencies", {}))]
    for cfg, t in doc.get("target", {}).items():
        tables.append((f"target.{cfg}.dependencies", t.get("dependencies", {})))
        tables.append((f"target.{cfg}.build-dependencies", t.get("build-dependencies", {})))
    return [(table, key, (spec.get("package", key) if isinstance(spec, dict) else key))
            for table, deps in tables for key, spec in deps.items()]


def forbidden(package):
    return package == "idgen" or package.startswith(("pgrx", "pq-sys", "pq_sys"))


def core_violations(root, graph=False):
    """Rule (d) on the tree at root: the pure core's dependencies and code name no PostgreSQL.
    With graph=True, also every crate cargo resolves into the core's non-dev dependency graph
    (`cargo metadata`), so that pgrx cannot come in through another crate."""
    root = Path(root)
    out = []
    manifest = root / "crates/idgen-core/Cargo.toml"
    if not manifest.exists():
        return [f"missing: {manifest.relative_to(root)}"]
    for table, key, package in core_dependencies(manifest.read_text()):
        if forbidden(package):
            out.append(f"core dependency: crates/idgen-core/Cargo.toml [{table}] {key} ({package})")
    for f in sorted((root / "crates/idgen-core/src").rglob("*.rs")):
        code = strip_comments_and_strings(f.read_text())
        for n, line in enumerate(code.splitlines(), 1):
            if re.search(r"\b(pgrx|pg_sys)\b", line):
                out.append(f"core code: {f.relative_to(root)} line {n} names pgrx or pg_sys")
            # Foreign functions the core declares itself would link against the server.
            if re.search(r"\bextern\s*(\"[^\"]*\"\s*)?\{|#\s*\[\s*link\b", line):
                out.append(f"core code: {f.relative_to(root)} line {n} declares foreign functions")
    if graph:
        out += core_graph_violations(root)
    return out


def core_graph_violations(root):
    """Every package in idgen-core's resolved non-dev dependency graph, by `cargo metadata`."""
    try:
        meta = json.loads(subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=root, check=True, capture_output=True, text=True).stdout)
    except (OSError, subprocess.CalledProcessError) as e:
        return [f"core graph: cargo metadata failed ({e})"]
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    names = {p["id"]: p["name"] for p in meta["packages"]}
    start = [i for i, n in names.items() if n == "idgen-core"]
    seen, todo, out = set(), list(start), []
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for d in nodes[i]["deps"]:
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                if forbidden(names[d["pkg"]]):
                    out.append(f"core graph: {names[i]} depends on {names[d['pkg']]}")
                todo.append(d["pkg"])
    return out


def self_test():
    def run(tree):
        with tempfile.TemporaryDirectory() as d:
            for rel, text in tree.items():
                (Path(d) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(d) / rel).write_text(text)
            return violations(build_graph(d))

    base = {
        "src/lib.rs": "mod error; mod guc; mod snowflake; mod segment; mod registry;\n"
                      "fn f() { guc::init(); crate::registry::init(); }\n",
        "src/error.rs": "pub enum Error {}\n",
        "src/time.rs": "use crate::error::Error;\n",
        "src/guc/mod.rs": "mod check;\npub use self::check::hook;\nuse crate::{error::Error, time};\n",
        "src/guc/check.rs": "// crate::registry::x in a comment\nconst S: &str = \"crate::registry::y\";\n"
                            "use super::*;\n#[cfg(test)]\nmod tests { use crate::registry::z; }\n",
        "src/snowflake/mod.rs": "mod lease; mod shared;\npub use shared::State;\n",
        "src/snowflake/shared.rs": "use crate::guc;\nuse super::lease::fence;\n",
        "src/snowflake/lease.rs": "pub fn fence() {}\n",
        "src/segment/mod.rs": "mod work;\n",
        "src/segment/work.rs": "use crate::snowflake::{self, lease};\n",
        "src/registry/mod.rs": "fn f() { crate::segment::init(); }\n",
        "src/registry/tests.rs": "use crate::lib_only;\n",
        "src/testing.rs": "use crate::registry;\n",
    }
    assert run(base) == [], run(base)
    upward = dict(base, **{"src/guc/check.rs": base["src/guc/check.rs"] +
                           "fn g() {\n    let c = crate::registry::parse_conninfo(x);\n}\n"})
    assert run(upward) == ["upward: src/guc/check.rs -> src/registry/mod.rs "
                           "(crate::registry::parse_conninfo, line 7)"], run(upward)
    sideways = dict(base, **{"src/snowflake/lease.rs": "use crate::{\n    segment::{init as go},\n};\n"})
    assert run(sideways) == ["sideways: src/snowflake/lease.rs -> src/segment/mod.rs "
                             "(crate::segment::init, line 2)"], run(sideways)
    cyc = dict(base, **{"src/snowflake/lease.rs": "pub fn fence() { super::shared::get(); }\n",
                        "src/error.rs": "use crate::time::now;\n"})
    found = run(cyc)
    assert [v.split(";")[0] for v in found] == [
        "cycle: src/error.rs -> src/time.rs -> src/error.rs",
        "cycle: src/snowflake/lease.rs -> src/snowflake/shared.rs -> src/snowflake/lease.rs",
    ], found
    assert "super::shared::get line 1" in found[1] and "super::lease::fence line 2" in found[1]
    core = {
        "crates/idgen-core/Cargo.toml": "[dependencies]\nthiserror = \"2\"\n"
                                        "[dev-dependencies]\npgrx-tests = \"0.18\"\n",
        "crates/idgen-core/src/lib.rs": "// pgrx in a comment\nconst S: &str = \"pg_sys\";\n",
    }

    def run_core(tree):
        with tempfile.TemporaryDirectory() as d:
            for rel, text in tree.items():
                (Path(d) / rel).parent.mkdir(parents=True, exist_ok=True)
                (Path(d) / rel).write_text(text)
            return core_violations(d)

    assert run_core(core) == [], run_core(core)
    impure = dict(core, **{"crates/idgen-core/Cargo.toml": "[dependencies]\npgrx = \"=0.18.1\"\n",
                           "crates/idgen-core/src/lib.rs": "use pgrx::pg_sys;\n"})
    assert run_core(impure) == [
        "core dependency: crates/idgen-core/Cargo.toml [dependencies] pgrx (pgrx)",
        "core code: crates/idgen-core/src/lib.rs line 1 names pgrx or pg_sys",
    ], run_core(impure)
    hidden = dict(core, **{
        "crates/idgen-core/Cargo.toml": "[dependencies.pgrx]\nversion = \"=0.18.1\"\n"
                                        "[target.'cfg(unix)'.dependencies]\n"
                                        "pg = { package = \"pq-sys\", version = \"0.7\" }\n",
        "crates/idgen-core/src/lib.rs": "extern \"C\" {\n    fn SetLatch(latch: *mut u8);\n}\n"})
    assert run_core(hidden) == [
        "core dependency: crates/idgen-core/Cargo.toml [dependencies] pgrx (pgrx)",
        "core dependency: crates/idgen-core/Cargo.toml [target.cfg(unix).dependencies] pg (pq-sys)",
        "core code: crates/idgen-core/src/lib.rs line 1 declares foreign functions",
    ], run_core(hidden)
    print("check-layers self-test: ok (clean tree, upward, sideways, two cycles, core purity)")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    graph = build_graph(Path(__file__).resolve().parent.parent)
    if "--graph" in argv:
        for f in sorted(graph):
            for t, refs in sorted(graph[f].items()):
                print(f"edge: {f} -> {t} ({', '.join(f'{p} line {n}' for p, n in refs)})")
    found = violations(graph) + core_violations(Path(__file__).resolve().parent.parent, graph=True)
    for v in found:
        print(v)
    if found:
        print(f"{len(found)} layering violations (DESIGN.md section 5)")
        print("test result: FAILED. 0 passed; 1 failed; 0 ignored")
        return 1
    print("test result: ok. 1 passed; 0 failed; 0 ignored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
