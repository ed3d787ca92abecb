#!/usr/bin/env python3
"""Checks META.json, the PGXN distribution metadata, in three parts:

  (a) the PGXN Meta Spec 1.0 (https://pgxn.org/meta/spec.txt, as the v1 JSON Schemas of
      pgxn/meta write it): the required keys (name, version, abstract, maintainer, license,
      provides, meta-spec) and the type of every key. name and the keys of provides and of a
      prereq relation are Terms (2 or more characters, no slash, backslash, space or control
      character); versions are SemVer 2.0; license is one of the spec's names, a list of them,
      or an object of name -> URI; maintainer a string or a list of them; each provides entry
      has file and version, and besides only abstract, docfile, docpath and x_ keys;
      meta-spec.version is 1.0.x; release_status stable, testing or unstable; prereqs are
      phases of relations of Term -> version range; resources, tags and no_index their
      shapes; no top-level key but the spec's and x_/X_ ones; no key twice in an object;
  (b) the files that META.json names (provides' file and docfile) exist, as relative paths
      with no `.` or `..` part;
  (c) the versions agree: META.json's version and provides.idgen.version are Cargo.toml's
      [package] version, as is idgen.control's default_version (pgrx writes Cargo.toml's
      version for '@CARGO_VERSION@'), and name is Cargo.toml's package name. A release that
      bumps Cargo.toml without META.json fails here.

Only the standard library: Python's jsonschema cannot compile the schemas' \\p{...} patterns.
Needs no git, so it runs inside an unpacked release archive too (scripts/pgxn-check.sh).

  python3 scripts/check-pgxn.py [ROOT]     check ROOT (default: this repository); one line per
                                           part, each problem under it, then cargo's "test
                                           result:" line; exit 1 on a problem
  python3 scripts/check-pgxn.py --self-test  broken documents, each rejected with its reason
"""
import json
import re
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = "idgen"

LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd", "freebsd",
    "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1", "lgpl_3_0", "mit",
    "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5", "postgresql", "qpl_1_0", "ssleay", "sun",
    "zlib", "open_source", "restricted", "unrestricted", "unknown",
}
REQUIRED = ["name", "version", "abstract", "maintainer", "license", "provides", "meta-spec"]
OPTIONAL = ["description", "generated_by", "tags", "no_index", "prereqs", "release_status",
            "resources"]
RELEASE_STATUS = ["stable", "testing", "unstable"]
PHASES = ["configure", "build", "test", "runtime", "develop"]
RELATIONS = ["requires", "recommends", "suggests", "conflicts"]
SPEC_URLS = ["https://pgxn.org/meta/spec.txt", "http://pgxn.org/meta/spec.txt"]

# \p{Space} and \p{Cntrl} of the schemas: Python's \s (Unicode) and the C0/C1 controls.
TERM = re.compile(r"[^/\\\s\x00-\x1f\x7f-\x9f]{2,}")
TAG = re.compile(r"[^/\\\x00-\x1f\x7f-\x9f]{2,255}")
_SEMVER = (r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
           r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
           r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?")
SEMVER = re.compile(_SEMVER, re.ASCII)
_RANGE_PART = rf"(?:(?:[=!]=|[<>]=?)\s*)?(?:{_SEMVER}|0)"
VERSION_RANGE = re.compile(rf"{_RANGE_PART}(?:,\s*{_RANGE_PART})*", re.ASCII)
META_SPEC_VERSION = re.compile(r"1\.0\.[0-9]+")
URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+")
EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
CUSTOM = re.compile(r"[xX]_.+", re.DOTALL)


class DuplicateKey(ValueError):
    pass


def no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise DuplicateKey(k)
        seen[k] = v
    return seen


class NotJsonConstant(Exception):
    pass


def no_constants(name):
    """Python's json reads NaN, Infinity and -Infinity; JSON (and PGXN's parser) has none."""
    raise NotJsonConstant(name)


def parse(text):
    """(document, problem): the JSON of META.json, or None and why not."""
    try:
        return json.loads(text, object_pairs_hook=no_duplicates,
                          parse_constant=no_constants), None
    except DuplicateKey as e:
        return None, f"the key {str(e)!r} appears twice in one object"
    except NotJsonConstant as e:
        return None, f"not JSON: {e} is not a JSON value"
    except json.JSONDecodeError as e:
        return None, f"not JSON: {e}"


def is_str(v, min_len=1):
    return isinstance(v, str) and len(v) >= min_len


def check_keys(obj, where, allowed, problems, custom=True):
    """Unknown keys of an object: only `allowed` and, where the schema says so, x_/X_ ones."""
    for k in obj:
        if k not in allowed and not (custom and CUSTOM.fullmatch(k)):
            problems.append(f"{where}: unknown key {k!r} (allowed: {', '.join(allowed)}"
                            f"{', x_*' if custom else ''})")


def check_term(v, where, problems):
    if not (isinstance(v, str) and TERM.fullmatch(v)):
        problems.append(f"{where}: {v!r} is not a Term (a string of 2 or more characters "
                        "with no slash, backslash, space or control character)")


def check_version(v, where, problems):
    if not (isinstance(v, str) and SEMVER.fullmatch(v)):
        problems.append(f"{where}: {v!r} is not a SemVer 2.0 version (like 1.2.3)")


def check_text(v, where, problems):
    if not is_str(v):
        problems.append(f"{where}: {v!r} is not a non-empty string")


def check_uri(v, where, problems):
    if not (isinstance(v, str) and URI.fullmatch(v)):
        problems.append(f"{where}: {v!r} is not a URI")


def check_path(v, where, problems):
    """A Path: a relative path in unix conventions, at least 2 characters, no `.` or `..`."""
    if not is_str(v, 2):
        problems.append(f"{where}: {v!r} is not a path (a string of 2 or more characters)")
        return
    parts = (v[2:] if v.startswith("./") else v).split("/")
    if v.startswith("/") or "\\" in v:
        problems.append(f"{where}: {v!r} is not a relative path in unix conventions")
    elif any(p in (".", "..") for p in parts):
        problems.append(f"{where}: {v!r} references the current or a parent directory")


def check_object(v, where, problems, min_keys=0):
    if not isinstance(v, dict):
        problems.append(f"{where}: {type(v).__name__} is not an object")
        return False
    if len(v) < min_keys:
        problems.append(f"{where}: an empty object")
        return False
    return True


def check_list(v, where, problems, check_item):
    """A non-empty list of unique items, each checked by check_item(item, where)."""
    if not isinstance(v, list) or not v:
        problems.append(f"{where}: not a non-empty list")
        return
    for i, item in enumerate(v):
        check_item(item, f"{where}[{i}]")
    if len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
        problems.append(f"{where}: an item appears twice")


def check_license(v, problems):
    where = "license"
    if isinstance(v, str):
        if v not in LICENSES:
            problems.append(f"{where}: {v!r} is not one of the spec's license names "
                            "(postgresql, mit, apache_2_0, ...)")
    elif isinstance(v, list):
        def item(x, w):
            if x not in LICENSES:
                problems.append(f"{w}: {x!r} is not one of the spec's license names")
        check_list(v, where, problems, item)
    elif isinstance(v, dict):
        if not v:
            problems.append(f"{where}: an empty object")
        for name, uri in v.items():
            check_uri(uri, f"{where}.{name}", problems)
    else:
        problems.append(f"{where}: a license name, a list of them or an object of name -> URI, "
                        f"not {type(v).__name__}")


def check_maintainer(v, problems):
    if isinstance(v, list):
        check_list(v, "maintainer", problems,
                   lambda x, w: check_text(x, w, problems))
    elif not is_str(v):
        problems.append(f"maintainer: {v!r} is neither a non-empty string nor a list of them")


def check_provides(v, problems):
    if not check_object(v, "provides", problems, min_keys=1):
        return
    for ext, entry in v.items():
        where = f"provides.{ext}"
        check_term(ext, "provides key", problems)
        if not check_object(entry, where, problems):
            continue
        for k in ("file", "version"):
            if k not in entry:
                problems.append(f"{where}: missing required key {k!r}")
        check_keys(entry, where, ["file", "version", "abstract", "docfile", "docpath"], problems)
        if "file" in entry:
            check_path(entry["file"], f"{where}.file", problems)
        if "docfile" in entry:
            check_path(entry["docfile"], f"{where}.docfile", problems)
        if "version" in entry:
            check_version(entry["version"], f"{where}.version", problems)
        for k in ("abstract", "docpath"):
            if k in entry:
                check_text(entry[k], f"{where}.{k}", problems)


def check_meta_spec(v, problems):
    if not check_object(v, "meta-spec", problems):
        return
    check_keys(v, "meta-spec", ["version", "url"], problems)
    if "version" not in v:
        problems.append("meta-spec: missing required key 'version'")
    elif not (isinstance(v["version"], str) and META_SPEC_VERSION.fullmatch(v["version"])):
        problems.append(f"meta-spec.version: {v['version']!r} is not 1.0.x")
    if "url" in v and v["url"] not in SPEC_URLS:
        problems.append(f"meta-spec.url: {v['url']!r} is not {SPEC_URLS[0]}")


def check_prereqs(v, problems):
    if not check_object(v, "prereqs", problems):
        return
    check_keys(v, "prereqs", PHASES, problems)
    if not any(p in v for p in PHASES):
        problems.append(f"prereqs: no phase ({', '.join(PHASES)})")
    for phase in PHASES:
        if phase not in v:
            continue
        where = f"prereqs.{phase}"
        if not check_object(v[phase], where, problems):
            continue
        check_keys(v[phase], where, RELATIONS, problems)
        if not any(r in v[phase] for r in RELATIONS):
            problems.append(f"{where}: no relation ({', '.join(RELATIONS)})")
        for rel in RELATIONS:
            if rel not in v[phase]:
                continue
            w = f"{where}.{rel}"
            if not check_object(v[phase][rel], w, problems, min_keys=1):
                continue
            for name, rng in v[phase][rel].items():
                check_term(name, f"{w} key", problems)
                ok = (type(rng) is int and rng == 0) or (
                    isinstance(rng, str) and VERSION_RANGE.fullmatch(rng))
                if not ok:
                    problems.append(f"{w}.{name}: {rng!r} is not a version range (like "
                                    "'15.0.0', '>= 1.2.0, < 2.0.0' or 0)")


def check_resources(v, problems):
    if not check_object(v, "resources", problems):
        return
    known = ["homepage", "bugtracker", "repository"]
    check_keys(v, "resources", known, problems)
    if not any(k in v for k in known):
        problems.append(f"resources: none of {', '.join(known)}")
    if "homepage" in v:
        check_uri(v["homepage"], "resources.homepage", problems)
    bt = v.get("bugtracker")
    if bt is not None and check_object(bt, "resources.bugtracker", problems):
        check_keys(bt, "resources.bugtracker", ["web", "mailto"], problems)
        if "web" not in bt and "mailto" not in bt:
            problems.append("resources.bugtracker: neither web nor mailto")
        if "web" in bt:
            check_uri(bt["web"], "resources.bugtracker.web", problems)
        if "mailto" in bt and not (isinstance(bt["mailto"], str) and EMAIL.fullmatch(bt["mailto"])):
            problems.append(f"resources.bugtracker.mailto: {bt['mailto']!r} is not an email address")
    repo = v.get("repository")
    if repo is not None and check_object(repo, "resources.repository", problems):
        check_keys(repo, "resources.repository", ["url", "web", "type"], problems)
        if "web" not in repo and not ("url" in repo and "type" in repo):
            problems.append("resources.repository: neither web nor url with type")
        for k in ("url", "web"):
            if k in repo:
                check_uri(repo[k], f"resources.repository.{k}", problems)
        t = repo.get("type")
        if t is not None and not (isinstance(t, str) and t and all(c.islower() for c in t)):
            problems.append(f"resources.repository.type: {t!r} is not a lower-case word (git)")


def check_no_index(v, problems):
    if not check_object(v, "no_index", problems):
        return
    check_keys(v, "no_index", ["file", "directory"], problems)
    if "file" not in v and "directory" not in v:
        problems.append("no_index: neither file nor directory")
    for k in ("file", "directory"):
        if k in v:
            if isinstance(v[k], list):
                check_list(v[k], f"no_index.{k}", problems,
                           lambda x, w: check_path(x, w, problems))
            else:
                check_path(v[k], f"no_index.{k}", problems)


def check_tags(v, problems):
    def tag(x, w):
        if not (isinstance(x, str) and TAG.fullmatch(x)):
            problems.append(f"{w}: {x!r} is not a tag (2 to 255 characters, no slash, backslash "
                            "or control character)")
    check_list(v, "tags", problems, tag)


def check_spec(doc):
    """Problems of a parsed META.json against the Meta Spec 1.0, as a list of lines."""
    problems = []
    if not isinstance(doc, dict):
        return [f"the document is {type(doc).__name__}, not an object"]
    for k in REQUIRED:
        if k not in doc:
            problems.append(f"missing required key {k!r}")
    check_keys(doc, "the document", REQUIRED + OPTIONAL, problems)
    if "name" in doc:
        check_term(doc["name"], "name", problems)
    if "version" in doc:
        check_version(doc["version"], "version", problems)
    for k in ("abstract", "description", "generated_by"):
        if k in doc:
            check_text(doc[k], k, problems)
    if "maintainer" in doc:
        check_maintainer(doc["maintainer"], problems)
    if "license" in doc:
        check_license(doc["license"], problems)
    if "provides" in doc:
        check_provides(doc["provides"], problems)
    if "meta-spec" in doc:
        check_meta_spec(doc["meta-spec"], problems)
    if "release_status" in doc and doc["release_status"] not in RELEASE_STATUS:
        problems.append(f"release_status: {doc['release_status']!r} is not one of "
                        f"{', '.join(RELEASE_STATUS)}")
    for k, f in (("prereqs", check_prereqs), ("resources", check_resources),
                 ("no_index", check_no_index), ("tags", check_tags)):
        if k in doc:
            f(doc[k], problems)
    return problems


def check_files(doc, root):
    """The files that provides names, relative to root."""
    problems = []
    for ext, entry in (doc.get("provides") or {}).items():
        if not isinstance(entry, dict):
            continue
        for k in ("file", "docfile"):
            rel = entry.get(k)
            if isinstance(rel, str) and not (root / rel).is_file():
                problems.append(f"provides.{ext}.{k}: {rel} is not a file of the distribution")
    return problems


def control_default_version(text):
    m = re.search(r"^\s*default_version\s*=\s*'([^']*)'", text, re.M)
    return m.group(1) if m else None


def check_versions(doc, root):
    """META.json against Cargo.toml and the control file."""
    problems = []
    try:
        package = tomllib.loads((root / "Cargo.toml").read_text())["package"]
        cargo_version, cargo_name = package["version"], package["name"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as e:
        return [f"Cargo.toml: no [package] name and version ({e})"]
    fix = "(update META.json's version and provides.idgen.version with Cargo.toml's)"
    if doc.get("name") != cargo_name:
        problems.append(f"name: {doc.get('name')!r} is not Cargo.toml's package name "
                        f"{cargo_name!r}")
    if doc.get("version") != cargo_version:
        problems.append(f"version: {doc.get('version')!r} is not Cargo.toml's {cargo_version!r} {fix}")
    entry = (doc.get("provides") or {}).get(EXTENSION)
    if not isinstance(entry, dict):
        problems.append(f"provides: no entry {EXTENSION!r}")
    else:
        if entry.get("version") != cargo_version:
            problems.append(f"provides.{EXTENSION}.version: {entry.get('version')!r} is not "
                            f"Cargo.toml's {cargo_version!r} {fix}")
        if entry.get("file") != f"{EXTENSION}.control":
            problems.append(f"provides.{EXTENSION}.file: {entry.get('file')!r} is not "
                            f"{EXTENSION}.control")
    control = root / f"{EXTENSION}.control"
    try:
        default = control_default_version(control.read_text())
    except OSError as e:
        return problems + [f"{control.name}: cannot be read ({e})"]
    if default is None:
        problems.append(f"{control.name}: no default_version")
    elif default not in ("@CARGO_VERSION@", cargo_version):
        problems.append(f"{control.name}: default_version {default!r} is neither "
                        f"'@CARGO_VERSION@' nor Cargo.toml's {cargo_version!r}")
    return problems


def check(root):
    """[(test name, problems)] for the tree at root."""
    path = root / "META.json"
    try:
        doc, problem = parse(path.read_text())
    except OSError as e:
        doc, problem = None, f"cannot be read ({e})"
    results = [("META.json is JSON", [problem] if problem else [])]
    if doc is None:
        return results
    results.append(("META.json follows the PGXN Meta Spec 1.0", check_spec(doc)))
    results.append(("the files META.json names exist", check_files(doc, root)))
    results.append(("versions agree: META.json, Cargo.toml, idgen.control",
                    check_versions(doc, root)))
    return results


def report(results):
    """cargo's lines: one per test, its problems under it, then "test result:". Exit status."""
    failed = 0
    for name, problems in results:
        print(f"test {name} ... {'FAILED' if problems else 'ok'}")
        for p in problems:
            print(f"    META.json: {p}")
        failed += bool(problems)
    passed = len(results) - failed
    print(f"test result: {'ok' if not failed else 'FAILED'}. {passed} passed; {failed} failed; "
          "0 ignored")
    return 1 if failed else 0


def self_test():
    good = {
        "name": "idgen", "version": "1.2.3", "abstract": "ids",
        "maintainer": "A <a@example.org>", "license": "postgresql",
        "provides": {"idgen": {"file": "idgen.control", "version": "1.2.3",
                               "abstract": "ids", "docfile": "README.md", "x_note": 1}},
        "prereqs": {"runtime": {"requires": {"PostgreSQL": "15.0.0", "plpgsql": 0},
                                "recommends": {"pg_cron": ">= 1.4.0, < 2.0.0"}}},
        "resources": {"homepage": "https://example.org/",
                      "bugtracker": {"web": "https://example.org/issues"},
                      "repository": {"url": "git://example.org/idgen.git", "type": "git"}},
        "no_index": {"directory": ["tests", "crates"], "file": "x.sql"},
        "tags": ["pgrx", "id generator"], "release_status": "stable",
        "meta-spec": {"version": "1.0.0", "url": "https://pgxn.org/meta/spec.txt"},
        "X_custom": {"anything": True},
    }

    DROP = object()

    def with_(path, value):
        """A copy of good with the key at path (a.b.c) set to value, or removed for DROP."""
        doc = json.loads(json.dumps(good))
        *parents, last = path.split(".")
        obj = doc
        for p in parents:
            obj = obj[p]
        if value is DROP:
            del obj[last]
        else:
            obj[last] = value
        return doc

    cases = [
        # (case name, document, the one problem it must report)
        ("name_missing", with_("name", DROP), "missing required key 'name'"),
        ("abstract_missing", with_("abstract", DROP), "missing required key 'abstract'"),
        ("meta_spec_missing", with_("meta-spec", DROP), "missing required key 'meta-spec'"),
        ("name_with_slash", with_("name", "id/gen"),
         "name: 'id/gen' is not a Term (a string of 2 or more characters with no slash, "
         "backslash, space or control character)"),
        ("name_with_space", with_("name", "id gen"),
         "name: 'id gen' is not a Term (a string of 2 or more characters with no slash, "
         "backslash, space or control character)"),
        ("name_one_character", with_("name", "i"),
         "name: 'i' is not a Term (a string of 2 or more characters with no slash, "
         "backslash, space or control character)"),
        ("version_not_semver", with_("version", "1.2"),
         "version: '1.2' is not a SemVer 2.0 version (like 1.2.3)"),
        ("version_leading_zero", with_("version", "1.02.3"),
         "version: '1.02.3' is not a SemVer 2.0 version (like 1.2.3)"),
        ("version_a_number", with_("version", 1.2),
         "version: 1.2 is not a SemVer 2.0 version (like 1.2.3)"),
        ("abstract_empty", with_("abstract", ""), "abstract: '' is not a non-empty string"),
        ("maintainer_empty_list", with_("maintainer", []), "maintainer: not a non-empty list"),
        ("maintainer_number", with_("maintainer", 7),
         "maintainer: 7 is neither a non-empty string nor a list of them"),
        ("maintainer_twice", with_("maintainer", ["A", "A"]),
         "maintainer: an item appears twice"),
        ("license_unknown_name", with_("license", "PostgreSQL"),
         "license: 'PostgreSQL' is not one of the spec's license names (postgresql, mit, "
         "apache_2_0, ...)"),
        ("license_list_bad_item", with_("license", ["mit", "wtfpl"]),
         "license[1]: 'wtfpl' is not one of the spec's license names"),
        ("license_object_not_uri", with_("license", {"PostgreSQL": "the licence"}),
         "license.PostgreSQL: 'the licence' is not a URI"),
        ("license_a_number", with_("license", 3),
         "license: a license name, a list of them or an object of name -> URI, not int"),
        ("provides_empty", with_("provides", {}), "provides: an empty object"),
        ("provides_key_with_space", {**good, "provides": {"id gen": good["provides"]["idgen"]}},
         "provides key: 'id gen' is not a Term (a string of 2 or more characters with no "
         "slash, backslash, space or control character)"),
        ("provides_without_file", with_("provides.idgen.file", DROP),
         "provides.idgen: missing required key 'file'"),
        ("provides_without_version", with_("provides.idgen.version", DROP),
         "provides.idgen: missing required key 'version'"),
        ("provides_unknown_key", with_("provides.idgen.homepage", "https://example.org"),
         "provides.idgen: unknown key 'homepage' (allowed: file, version, abstract, docfile, "
         "docpath, x_*)"),
        ("provides_absolute_file", with_("provides.idgen.file", "/etc/idgen.control"),
         "provides.idgen.file: '/etc/idgen.control' is not a relative path in unix conventions"),
        ("provides_parent_docfile", with_("provides.idgen.docfile", "../README.md"),
         "provides.idgen.docfile: '../README.md' references the current or a parent directory"),
        ("provides_bad_version", with_("provides.idgen.version", "v1.2.3"),
         "provides.idgen.version: 'v1.2.3' is not a SemVer 2.0 version (like 1.2.3)"),
        ("meta_spec_version_2", with_("meta-spec.version", "2.0.0"),
         "meta-spec.version: '2.0.0' is not 1.0.x"),
        ("meta_spec_bad_url", with_("meta-spec.url", "https://example.org/spec"),
         "meta-spec.url: 'https://example.org/spec' is not https://pgxn.org/meta/spec.txt"),
        ("meta_spec_unknown_key", with_("meta-spec.name", "x"),
         "meta-spec: unknown key 'name' (allowed: version, url, x_*)"),
        ("unknown_top_level_key", with_("homepage", "https://example.org"),
         "the document: unknown key 'homepage' (allowed: name, version, abstract, maintainer, "
         "license, provides, meta-spec, description, generated_by, tags, no_index, prereqs, "
         "release_status, resources, x_*)"),
        ("custom_key_without_name", with_("x_", 1),
         "the document: unknown key 'x_' (allowed: name, version, abstract, maintainer, "
         "license, provides, meta-spec, description, generated_by, tags, no_index, prereqs, "
         "release_status, resources, x_*)"),
        ("release_status_final", with_("release_status", "final"),
         "release_status: 'final' is not one of stable, testing, unstable"),
        ("prereqs_unknown_phase", with_("prereqs.install", {"requires": {"x": 0}}),
         "prereqs: unknown key 'install' (allowed: configure, build, test, runtime, develop, x_*)"),
        ("prereqs_no_phase", with_("prereqs", {}),
         "prereqs: no phase (configure, build, test, runtime, develop)"),
        ("prereqs_unknown_relation", with_("prereqs.runtime.needs", {"x": 0}),
         "prereqs.runtime: unknown key 'needs' (allowed: requires, recommends, suggests, "
         "conflicts, x_*)"),
        ("prereqs_bad_range", with_("prereqs.runtime.requires.PostgreSQL", "15"),
         "prereqs.runtime.requires.PostgreSQL: '15' is not a version range (like '15.0.0', "
         "'>= 1.2.0, < 2.0.0' or 0)"),
        ("prereqs_key_with_slash", with_("prereqs.runtime.requires", {"pg/cron": 0}),
         "prereqs.runtime.requires key: 'pg/cron' is not a Term (a string of 2 or more "
         "characters with no slash, backslash, space or control character)"),
        ("prereqs_empty_relation", with_("prereqs.runtime.requires", {}),
         "prereqs.runtime.requires: an empty object"),
        ("resources_unknown_key", with_("resources.wiki", "https://example.org/wiki"),
         "resources: unknown key 'wiki' (allowed: homepage, bugtracker, repository, x_*)"),
        ("resources_repository_url_without_type", with_("resources.repository.type", DROP),
         "resources.repository: neither web nor url with type"),
        ("resources_repository_type_upper", with_("resources.repository.type", "Git"),
         "resources.repository.type: 'Git' is not a lower-case word (git)"),
        ("resources_homepage_not_uri", with_("resources.homepage", "example.org"),
         "resources.homepage: 'example.org' is not a URI"),
        ("resources_bugtracker_bad_mailto", with_("resources.bugtracker", {"mailto": "bugs"}),
         "resources.bugtracker.mailto: 'bugs' is not an email address"),
        ("tags_empty", with_("tags", []), "tags: not a non-empty list"),
        ("tag_with_slash", with_("tags", ["a/b"]),
         "tags[0]: 'a/b' is not a tag (2 to 255 characters, no slash, backslash or control "
         "character)"),
        ("no_index_neither", with_("no_index", {"x_a": 1}), "no_index: neither file nor directory"),
        ("not_an_object", ["idgen"], "the document is list, not an object"),
    ]

    results = [("self_test::a_complete_document_passes", check_spec(good) == [],
                repr(check_spec(good)))]
    for name, doc, want in cases:
        got = check_spec(doc)
        results.append((f"self_test::{name}", got == [want], f"want [{want!r}], got {got!r}"))

    doc, problem = parse('{"name": "a", "name": "b"}')
    results.append(("self_test::duplicate_key", doc is None and
                    problem == "the key 'name' appears twice in one object", problem))
    doc, problem = parse('{"x_n": NaN}')
    results.append(("self_test::nan_is_not_json", doc is None and
                    problem == "not JSON: NaN is not a JSON value", problem))
    doc, problem = parse('{"name": ')
    results.append(("self_test::not_json", doc is None and problem.startswith("not JSON: "),
                    problem))

    # A tree: files and versions. The bump of Cargo.toml alone must fail.
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        meta = dict(good, version="1.2.3")
        (root / "META.json").write_text(json.dumps(meta))
        (root / "Cargo.toml").write_text('[package]\nname = "idgen"\nversion = "1.2.3"\n')
        (root / "idgen.control").write_text("default_version = '@CARGO_VERSION@'\n")
        (root / "README.md").write_text("# idgen\n")
        results.append(("self_test::a_consistent_tree_passes",
                        all(not p for _, p in check(root)), repr(check(root))))

        def problems_of(test):
            return dict(check(root))[test]

        (root / "Cargo.toml").write_text('[package]\nname = "idgen"\nversion = "1.3.0"\n')
        want = ["version: '1.2.3' is not Cargo.toml's '1.3.0' (update META.json's version and "
                "provides.idgen.version with Cargo.toml's)",
                "provides.idgen.version: '1.2.3' is not Cargo.toml's '1.3.0' (update "
                "META.json's version and provides.idgen.version with Cargo.toml's)"]
        got = problems_of("versions agree: META.json, Cargo.toml, idgen.control")
        results.append(("self_test::cargo_bumped_alone", got == want, repr(got)))

        (root / "Cargo.toml").write_text('[package]\nname = "idgen"\nversion = "1.2.3"\n')
        (root / "idgen.control").write_text("default_version = '1.2.2'\n")
        got = problems_of("versions agree: META.json, Cargo.toml, idgen.control")
        want = ["idgen.control: default_version '1.2.2' is neither '@CARGO_VERSION@' nor "
                "Cargo.toml's '1.2.3'"]
        results.append(("self_test::control_version_differs", got == want, repr(got)))
        (root / "idgen.control").write_text("default_version = '1.2.3'\n")
        got = problems_of("versions agree: META.json, Cargo.toml, idgen.control")
        results.append(("self_test::control_version_literal", got == [], repr(got)))

        (root / "README.md").unlink()
        got = problems_of("the files META.json names exist")
        want = ["provides.idgen.docfile: README.md is not a file of the distribution"]
        results.append(("self_test::docfile_missing", got == want, repr(got)))

        (root / "META.json").write_text(json.dumps(dict(meta, name="idgen2")))
        got = problems_of("versions agree: META.json, Cargo.toml, idgen.control")
        want = ["name: 'idgen2' is not Cargo.toml's package name 'idgen'"]
        results.append(("self_test::name_not_the_package", got == want, repr(got)))

    failed = 0
    for name, ok, why in results:
        print(f"test {name} ... {'ok' if ok else 'FAILED'}")
        if not ok:
            print(f"    {why}")
            failed += 1
    print(f"test result: {'ok' if not failed else 'FAILED'}. {len(results) - failed} passed; "
          f"{failed} failed; 0 ignored")
    return 1 if failed else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv if not a.startswith("-")]
    root = Path(args[0]).resolve() if args else ROOT
    return report(check(root))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
