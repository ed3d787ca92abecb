#!/usr/bin/env python3
"""Checks that every test DESIGN.md's invariant table names exists.

The table's last column ("test") names tests in these forms:
  `file::test_fn`      a cluster test, tests/cluster/tests/<file>.rs, or a #[test]/#[pg_test]
                       in module <file> of src/ or crates/*/src/ (`segment::setval_drops_the_block`)
  `file::*`            every test of that cluster test file (or module): the file must exist
  `a::b`               a module (`serial::format`, `idgen_core::registry`): its file must exist
  `name` in `a::b`     a test fn named in a module ("the property test `x` in `segment::range`")
  `path/to/file.rs`    a test file (`crates/idgen-core/tests/registry_model.rs`)
  `name.sql`           a pg_regress golden file, tests/pg_regress/sql/<name>.sql
Prints one line per name that does not resolve, then a cargo-style "test result:" line (what
scripts/test.sh counts); exits 1 if any name is missing.
  python3 scripts/check-design-tests.py [DESIGN.md]
  python3 scripts/check-design-tests.py --self-test   checks the checker on a made-up table
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "tests/cluster/tests"
REGRESS = ROOT / "tests/pg_regress/sql"


def test_column(design):
    """The last cell of each row of the tables whose header's last column is "test"."""
    cells, in_table = [], False
    for n, line in enumerate(design.splitlines(), 1):
        if not line.startswith("|"):
            in_table = False
            continue
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if not in_table:
            in_table = parts[-1] == "test"
            continue
        if set(parts[-1]) <= set("-: "):
            continue
        cells.append((n, parts[-1]))
    return cells


def module_files(path):
    """The source files of module `a::b` (or `idgen_core::a`), in src/ or crates/*/src/."""
    parts = path.split("::")
    roots = [ROOT / "src"] + sorted(ROOT.glob("crates/*/src"))
    if parts[0] == "idgen_core":
        parts, roots = parts[1:], [ROOT / "crates/idgen-core/src"]
    elif parts[0] == "crate":
        parts = parts[1:]
    found = []
    for root in roots:
        base = root.joinpath(*parts)
        if base.with_suffix(".rs").is_file():
            found.append(base.with_suffix(".rs"))
        if base.is_dir():
            found.extend(sorted(base.rglob("*.rs")))
    return found


def has_fn(files, name):
    pattern = re.compile(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?(?:async\s+)?fn\s+" + re.escape(name) + r"\s*[(<]", re.M)
    return any(pattern.search(f.read_text(errors="replace")) for f in files)


def check_ref(ref):
    """None if `ref` resolves, else why not."""
    if ref.endswith(".sql"):
        name = Path(ref).name
        return None if (REGRESS / name).is_file() else f"no pg_regress file tests/pg_regress/sql/{name}"
    if ref.endswith(".rs"):
        return None if (ROOT / ref).is_file() or (CLUSTER / ref).is_file() else f"no file {ref}"
    head, _, last = ref.rpartition("::")
    cluster = CLUSTER / f"{head}.rs"
    if last == "*":
        if cluster.is_file() or module_files(head):
            return None
        return f"no test file tests/cluster/tests/{head}.rs"
    if cluster.is_file() and has_fn([cluster], last):
        return None
    if has_fn(module_files(head), last):
        return None
    if module_files(ref):
        return None  # a module named as a whole
    if cluster.is_file():
        return f"no test fn {last} in tests/cluster/tests/{head}.rs"
    if "::" in head:
        return f"no test fn {last} in module {head}"
    return f"no test fn {last} in module {head} (nor a file tests/cluster/tests/{head}.rs)"


def refs_of(cell):
    """The names a cell gives, as (reference, context) pairs."""
    out = []
    for m in re.finditer(r"`([A-Za-z0-9_:*./-]+)`(?:\s+in\s+`([a-z0-9_:]+)`)?", cell):
        name, module = m.group(1), m.group(2)
        if module and "::" not in name and not name.endswith((".rs", ".sql")):
            out.append(f"{module}::{name}")
        elif "::" in name or name.endswith((".rs", ".sql")):
            out.append(name)
        # Anything else (`scripts/bench.sh`, a suffix such as `_when_it_leaves_the_cache`) is
        # prose, not a test name.
    return out


def missing_in(text, name):
    """Each name of `text`'s test column that does not resolve, and how many were checked."""
    checked, missing = 0, []
    for line, cell in test_column(text):
        for ref in refs_of(cell):
            checked += 1
            why = check_ref(ref)
            if why:
                missing.append(f"{name}:{line}: `{ref}`: {why}")
    return checked, missing


def self_test():
    """The checker against a made-up table over this tree's real tests."""
    table = "\n".join([
        "| guarantee | mechanism | test |",
        "|---|---|---|",
        "| a | b | `segment::rolled_back_draws_are_never_handed_out_again`, `adopt::*` |",
        "| a | b | `segment::setval_drops_the_block` (pg_test), `serial::format`, `snowflake.sql`, "
        "`idgen_core::registry` |",
        "| a | b | the property test `no_such_fn_anywhere` in `segment::range`, `nope::*` |",
        "| a | b | `segment::rolled_back_draws_are_handed_out_again`, `tests/none.rs`, `none.sql` |",
        "",
        "| other | table |",
        "|---|---|",
        "| `segment::not_a_test_column` | x |",
    ])
    checked, missing = missing_in(table, "T")
    refs = [m.split("`")[1] for m in missing]
    assert checked == 11, (checked, missing)
    assert refs == ["segment::range::no_such_fn_anywhere", "nope::*",
                    "segment::rolled_back_draws_are_handed_out_again", "tests/none.rs",
                    "none.sql"], missing
    print("check-design-tests self-test: ok (6 resolved, 5 missing found, other tables ignored)")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    design = Path(argv[0]) if argv else ROOT / "DESIGN.md"
    checked, missing = missing_in(design.read_text(), design.name)
    for m in missing:
        print(m)
    if missing:
        print(f"{len(missing)} of {checked} tests named in {design.name} do not exist")
        print("test result: FAILED. 0 passed; 1 failed; 0 ignored")
        return 1
    print(f"all {checked} tests named in {design.name} exist")
    print("test result: ok. 1 passed; 0 failed; 0 ignored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
