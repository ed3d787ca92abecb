#!/usr/bin/env python3
"""Checks that the files of monitoring/ agree with each other and with the views:

  (a) monitoring/postgres_exporter/queries.yaml has postgres_exporter 0.11.1's format: each key
      a query with `query` and `metrics` (and optionally `master`, `cache_seconds`,
      `runonserver`), each metric one column with a `usage` (LABEL, GAUGE or COUNTER) and a
      `description`; a query selects exactly its metrics' columns, in order, from the view
      idgen_metrics_<key without idgen_> (or, for a key idgen_<view's part>_<more>, a second
      query of the same view: idgen_registry_client_state); a COUNTER's name ends in _total
      and only a COUNTER's. The series it emits are <key>_<column> for every column that is
      not a LABEL, and no two queries emit the same one.
  (b) the views are those of sql/metrics.sql: each query reads a view that the script creates,
      and selects its columns (`column`, `column AS name`) or a constant (`1 AS active`); every
      column of every view is read by a query, or is in NOT_EXPORTED with a reason. So the
      queries follow the views when a column is added, renamed or dropped;
  (c) every idgen_ metric that an alert rule's expr (monitoring/prometheus/*.yml but the
      *.test.yml) or a Grafana panel's or variable's query (monitoring/grafana/*.json) names is
      one that queries.yaml emits;
  (d) every emitted metric is used by a rule or a panel, or is in UNUSED_OK with a reason;
  (e) every rule has a `for`, a severity (warning or critical), a summary and a description
      that points at docs/operations/monitoring.md; every rule fires in a case of the unit
      tests (monitoring/prometheus/*.test.yml) and every alert has a case where it does not;
      every panel with queries and every query reads the ${DS_PROMETHEUS} data source.

promtool checks the rules' syntax and runs the unit tests (scripts/monitoring-check.sh runs
both and this). Needs PyYAML (Debian's python3-yaml).

  python3 scripts/check-monitoring.py              check; one line per problem, then cargo's
                                                   "test result:" line; exit 1 on a problem
  python3 scripts/check-monitoring.py --metrics    also print every emitted metric
  python3 scripts/check-monitoring.py --self-test  check the checker on small trees of its own
"""
import json
import re
import sys
import tempfile
from pathlib import Path

try:
    import yaml
except ImportError:
    print("check-monitoring: PyYAML is missing (apt-get install python3-yaml)")
    print("test result: FAILED. 0 passed; 1 failed; 0 ignored")
    sys.exit(1)

ROOT = Path(__file__).resolve().parent.parent
VIEWS_SQL = "sql/metrics.sql"
DOCS_PAGE = "docs/operations/monitoring.md"
DATASOURCE = "${DS_PROMETHEUS}"
USAGES = {"LABEL", "GAUGE", "COUNTER"}
QUERY_KEYS = {"query", "metrics", "master", "cache_seconds", "runonserver"}
SEVERITIES = {"warning", "critical"}

# Gauges whose names end in _total, against Prometheus's convention (only a counter's does),
# each with the reason. Empty: the views name none so.
GAUGES_NAMED_TOTAL = {}

# Columns of the views (view.column) that no query exports, each with the reason. Empty:
# queries.yaml exports every one.
NOT_EXPORTED = {}

# Metrics that queries.yaml emits and no rule or panel uses, each with the reason it is still
# exported. Empty: every metric is on the dashboard.
UNUSED_OK = {}

STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
METRIC = re.compile(r"(?<![\w:$])idgen_[A-Za-z0-9_]*")


def metric_names(expr):
    """The idgen_ metric names a PromQL expression (or a Grafana variable query) uses: the
    identifiers that start with idgen_, outside string literals (label values, regexes)."""
    return set(METRIC.findall(STRING.sub('""', expr)))


def select_columns(sql):
    """(columns, relation, items) of `SELECT a, b AS c, ... FROM relation`: each item's last
    word, and the items as written."""
    m = re.match(r"\s*select\s+(.*?)\s+from\s+([\w.\"]+)\s*;?\s*$", sql, re.I | re.S)
    if not m:
        return None, None, None
    items = [" ".join(item.split()) for item in m.group(1).split(",")]
    return [item.split()[-1].strip('"') for item in items], m.group(2), items


def top_level(text, start):
    """(index, character) of each character of `text` from `start` that stands outside quotes,
    comments and parentheses (the parentheses themselves are skipped)."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            while end != -1 and text[end + 1:end + 2] == c:  # '' or "" inside
                end = text.find(c, end + 2)
            i = len(text) if end == -1 else end + 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end == -1 else end
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0:
            yield i, c
        i += 1


def keyword_at(text, i, word):
    """Whether `word` (case-insensitive) begins at text[i] as a whole word."""
    return (re.match(word + r"\b", text[i:i + len(word) + 1], re.I) is not None
            and not re.match(r"\w", text[i - 1]))


def select_list(text, start):
    """The items of the select list that begins at text[start] (just after SELECT): split at
    the commas outside parentheses, quotes and comments, up to the FROM outside them."""
    items, begin = [], start
    for i, c in top_level(text, start):
        if c == ",":
            items.append(text[begin:i])
            begin = i + 1
        elif keyword_at(text, i, "from"):
            items.append(text[begin:i])
            return [" ".join(re.sub(r"--[^\n]*", "", item).split()) for item in items]
    return None


def main_select(text, start):
    """The index just after the SELECT of the statement's main query, at or after `start`:
    the first SELECT outside parentheses, quotes and comments (after a WITH list's queries)."""
    for i, _ in top_level(text, start):
        if keyword_at(text, i, "select"):
            return i + len("select")
    return None


def view_columns(sql):
    """{view: [columns]} of the CREATE VIEW statements of an SQL script: each select item's
    `AS name`, else its last identifier (c.state: state)."""
    views = {}
    for m in re.finditer(r"\bcreate\s+(?:or\s+replace\s+)?view\s+(?:[\w@\"]+\.)?\"?(\w+)\"?"
                         r"\s+as\s+(?:select|with)\b", sql, re.I):
        start = main_select(sql, m.end() - 6 if m.group(0)[-6:].lower() == "select" else m.end())
        items = None if start is None else select_list(sql, start)
        if items is not None:
            views[m.group(1)] = [re.findall(r"(\w+)\"?$", item)[0].lower() if item else ""
                                 for item in items]
    return views


def selected_source(item):
    """What a query's select item reads: ("column", name) for `name` or `name AS alias`,
    ("constant", None) for `1 AS active` or `'x' AS y`, (None, None) for anything else."""
    m = re.fullmatch(r"(\"?\w+\"?|\d+(?:\.\d+)?|'[^']*')(?:\s+as\s+\"?\w+\"?)?", item, re.I)
    if not m:
        return None, None
    if re.fullmatch(r"\d+(?:\.\d+)?|'[^']*'", m.group(1)):
        return ("constant", None) if re.search(r"\sas\s", item, re.I) else (None, None)
    return "column", m.group(1).strip('"').lower()


def check_queries(path, views):
    """(emitted metric names, problems, queries checked, {view: columns read}) of a
    queries.yaml, against the views' columns ({view: [columns]})."""
    emitted, problems, reads = set(), [], {}
    doc = yaml.safe_load(path.read_text()) or {}
    for key, spec in doc.items():
        where = f"{path.name}: {key}"
        if not isinstance(spec, dict):
            problems.append(f"{where}: not a query")
            continue
        extra = set(spec) - QUERY_KEYS
        if extra:
            problems.append(f"{where}: unknown fields {sorted(extra)}")
        if "master" in spec and not isinstance(spec["master"], bool):
            problems.append(f"{where}: master is not true or false")
        if "cache_seconds" in spec and not (isinstance(spec["cache_seconds"], int)
                                            and spec["cache_seconds"] >= 0):
            problems.append(f"{where}: cache_seconds is not a whole number of seconds")
        columns = []
        for m in spec.get("metrics") or []:
            if not (isinstance(m, dict) and len(m) == 1):
                problems.append(f"{where}: a metric is not one column: {m!r}")
                continue
            (col, attrs), = m.items()
            attrs = attrs or {}
            columns.append(col)
            usage = attrs.get("usage")
            if usage not in USAGES:
                problems.append(f"{where}.{col}: usage {usage!r} (one of {sorted(USAGES)})")
            if not attrs.get("description"):
                problems.append(f"{where}.{col}: no description")
            if (usage != "LABEL" and (usage == "COUNTER") != col.endswith("_total")
                    and f"{key}.{col}" not in GAUGES_NAMED_TOTAL):
                problems.append(f"{where}.{col}: a COUNTER's name ends in _total, and only a COUNTER's")
            if usage in ("GAUGE", "COUNTER"):
                if f"{key}_{col}" in emitted:
                    problems.append(f"{where}.{col}: {key}_{col} is emitted by another query too")
                emitted.add(f"{key}_{col}")
        if not columns:
            problems.append(f"{where}: no metrics")
        selected, relation, items = select_columns(spec.get("query") or "")
        if relation is not None:
            # Qualified, so that no schema on the exporter's search_path can stand in for the
            # view: public, idgen's schema unless it was created WITH SCHEMA.
            schema, _, relation = relation.rpartition(".")
            if schema != "public":
                problems.append(f"{where}: the query reads {relation} without the schema public.")
        view = key.replace("idgen_", "idgen_metrics_", 1)
        if selected is None:
            problems.append(f"{where}: the query is not SELECT <columns> FROM <view>")
        else:
            if selected != columns:
                problems.append(f"{where}: the query selects {selected}, the metrics are {columns}")
            if not (relation == view or relation.startswith("idgen_metrics_")
                    and view.startswith(relation + "_")):
                problems.append(f"{where}: the query reads {relation}, not {view}")
            if relation not in views:
                problems.append(f"{where}: {VIEWS_SQL} creates no view {relation}")
                continue
            for item in items:
                kind, col = selected_source(item)
                if kind is None:
                    problems.append(f"{where}: {item!r} is not a column of {relation}, with or "
                                    "without AS, nor a constant AS a name")
                elif kind == "column" and col not in views[relation]:
                    problems.append(f"{where}: {relation} has no column {col} ({VIEWS_SQL})")
                elif kind == "column":
                    reads.setdefault(relation, set()).add(col)
    return emitted, problems, len(doc), reads


def check_views(root, reads, not_exported):
    """Problems: a view column that no query reads (and not in not_exported)."""
    problems = []
    for view, columns in sorted(views_of(root).items()):
        for col in columns:
            if col not in reads.get(view, set()) and f"{view}.{col}" not in not_exported:
                problems.append(f"{VIEWS_SQL}: {view}.{col} is read by no query of queries.yaml "
                                "(or add it to NOT_EXPORTED with a reason)")
    return problems


def views_of(root):
    path = root / VIEWS_SQL
    return view_columns(path.read_text()) if path.exists() else {}


def rule_files(root):
    return sorted(p for p in (root / "monitoring/prometheus").glob("*.yml")
                  if not p.name.endswith(".test.yml"))


def check_rules(path, emitted):
    """(metrics used, problems, rules checked, {(alert, severity)})."""
    used, problems, rules = set(), [], set()
    n = 0
    for group in (yaml.safe_load(path.read_text()) or {}).get("groups") or []:
        for rule in group.get("rules") or []:
            n += 1
            name = rule.get("alert") or rule.get("record")
            where = f"{path.name}: {group.get('name')}/{name}"
            names = metric_names(str(rule.get("expr", "")))
            used |= names
            for m in sorted(names - emitted):
                problems.append(f"{where}: {m} is not emitted by queries.yaml")
            if "alert" not in rule:
                continue
            severity = (rule.get("labels") or {}).get("severity")
            rules.add((name, severity))
            if "for" not in rule:
                problems.append(f"{where}: no `for` (write `for: 0m` to fire at once)")
            if severity not in SEVERITIES:
                problems.append(f"{where}: severity {severity!r} (one of {sorted(SEVERITIES)})")
            annotations = rule.get("annotations") or {}
            if not annotations.get("summary"):
                problems.append(f"{where}: no summary")
            if DOCS_PAGE not in (annotations.get("description") or ""):
                problems.append(f"{where}: the description does not point at {DOCS_PAGE}")
    return used, problems, n, rules


def check_tests(root, rules):
    """Problems: a rule that no test case fires, an alert that no case expects quiet."""
    fired, quiet = set(), set()
    for path in sorted((root / "monitoring/prometheus").glob("*.test.yml")):
        for test in (yaml.safe_load(path.read_text()) or {}).get("tests") or []:
            for case in test.get("alert_rule_test") or []:
                alerts = case.get("exp_alerts") or []
                if not alerts:
                    quiet.add(case.get("alertname"))
                for a in alerts:
                    fired.add((case.get("alertname"), (a.get("exp_labels") or {}).get("severity")))
    problems = []
    for name, severity in sorted(rules, key=str):
        if (name, severity) not in fired:
            problems.append(f"tests: no case where {name} ({severity}) fires")
    for name in sorted({n for n, _ in rules}):
        if name not in quiet:
            problems.append(f"tests: no case where {name} stays quiet (exp_alerts: [])")
    return problems


def panels_of(panels):
    for p in panels or []:
        yield p
        yield from panels_of(p.get("panels"))


def uses_datasource(ds):
    return isinstance(ds, dict) and ds.get("uid") == DATASOURCE or ds == DATASOURCE


def check_dashboard(path, emitted):
    """(metrics used, problems, panels and variables checked)."""
    used, problems, n = set(), [], 0
    dash = json.loads(path.read_text())
    ids = [p.get("id") for p in panels_of(dash.get("panels"))]
    if len(ids) != len(set(ids)):
        problems.append(f"{path.name}: two panels share an id")
    for p in panels_of(dash.get("panels")):
        targets = p.get("targets") or []
        if not targets:
            continue
        n += 1
        where = f"{path.name}: panel {p.get('title')!r}"
        if not uses_datasource(p.get("datasource")):
            problems.append(f"{where}: its data source is not {DATASOURCE}")
        for t in targets:
            names = metric_names(t.get("expr", ""))
            if not names:
                problems.append(f"{where}: query {t.get('refId')} reads no idgen_ metric")
            if "datasource" in t and not uses_datasource(t["datasource"]):
                problems.append(f"{where}: query {t.get('refId')}'s data source is not {DATASOURCE}")
            used |= names
            for m in sorted(names - emitted):
                problems.append(f"{where}: {m} is not emitted by queries.yaml")
    for v in (dash.get("templating") or {}).get("list") or []:
        if v.get("type") != "query":
            continue
        n += 1
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q or ""
        names = metric_names(q) | metric_names(v.get("definition") or "")
        used |= names
        for m in sorted(names - emitted):
            problems.append(f"{path.name}: variable {v.get('name')}: {m} is not emitted by queries.yaml")
        if not uses_datasource(v.get("datasource")):
            problems.append(f"{path.name}: variable {v.get('name')}: its data source is not {DATASOURCE}")
    return used, problems, n


def check(root, unused_ok=None, not_exported=None):
    """(emitted metrics, problems, items checked) of the monitoring/ of the tree at root."""
    unused_ok = UNUSED_OK if unused_ok is None else unused_ok
    not_exported = NOT_EXPORTED if not_exported is None else not_exported
    views = views_of(root)
    emitted, problems, n, reads = check_queries(
        root / "monitoring/postgres_exporter/queries.yaml", views)
    if not views:
        problems.append(f"{VIEWS_SQL}: no CREATE VIEW found (or no such file)")
    problems += check_views(root, reads, not_exported)
    for c in sorted(set(not_exported) - {f"{v}.{c}" for v, cs in views.items() for c in cs}):
        problems.append(f"NOT_EXPORTED: {c} is not a column of a view of {VIEWS_SQL}")
    n += len(views)
    used, rules = set(), set()
    for path in rule_files(root):
        u, p, k, r = check_rules(path, emitted)
        used, problems, n, rules = used | u, problems + p, n + k, rules | r
    problems += check_tests(root, rules)
    for path in sorted((root / "monitoring/grafana").glob("*.json")):
        u, p, k = check_dashboard(path, emitted)
        used, problems, n = used | u, problems + p, n + k
    for m in sorted(emitted):
        if m not in used and m not in unused_ok:
            problems.append(f"queries.yaml: {m} is used by no rule or panel (or add it to "
                            "UNUSED_OK with a reason)")
    for m in sorted(set(unused_ok) - emitted):
        problems.append(f"UNUSED_OK: {m} is not emitted by queries.yaml")
    return emitted, problems, n + len(emitted)


def self_test():
    queries = {"idgen_x": {
        "query": "SELECT name,\n       level,\n       calls_total\n  FROM public.idgen_metrics_x\n",
        "master": True, "cache_seconds": 30,
        "metrics": [{"name": {"usage": "LABEL", "description": "a name"}},
                    {"level": {"usage": "GAUGE", "description": "a level"}},
                    {"calls_total": {"usage": "COUNTER", "description": "calls"}}]}}
    rules = {"groups": [{"name": "g", "rules": [
        {"alert": "XHigh", "expr": 'idgen_x_level{name!="idgen_x_no"} > 0.9', "for": "5m",
         "labels": {"severity": "warning"},
         "annotations": {"summary": "s", "description": f"d. See {DOCS_PAGE}."}}]}]}
    tests = {"rule_files": ["rules.yml"], "tests": [{"alert_rule_test": [
        {"eval_time": "1m", "alertname": "XHigh", "exp_alerts": []},
        {"eval_time": "9m", "alertname": "XHigh",
         "exp_alerts": [{"exp_labels": {"severity": "warning"}}]}]}]}
    dash = {"templating": {"list": [
                {"type": "datasource", "name": "DS_PROMETHEUS"},
                {"type": "query", "name": "n", "datasource": {"uid": DATASOURCE},
                 "query": {"query": "label_values(idgen_x_level, name)"}}]},
            "panels": [{"type": "row", "id": 1, "panels": []},
                       {"type": "timeseries", "id": 2, "title": "calls",
                        "datasource": {"type": "prometheus", "uid": DATASOURCE},
                        "targets": [{"refId": "A", "expr": "rate(idgen_x_calls_total[$__rate_interval])"}]}]}

    # Its view, written as sql/metrics.sql writes them: qualified names, casts, a subquery with
    # its own FROM and commas, a string with a comma, a comment.
    views_sql = """-- The views.
CREATE VIEW @extschema@.idgen_metrics_x AS
SELECT c.name,
       (SELECT pg_catalog.count(*) FROM t WHERE t.a OPERATOR(pg_catalog.=) ANY ('{a,b}'::text[]))
           AS level,  -- a comment, with a comma
       c.calls AS calls_total
  FROM @extschema@.x_status() c;
"""

    def run(q=queries, r=rules, t=tests, d=dash, unused_ok=None, sql=views_sql,
            not_exported=None):
        with tempfile.TemporaryDirectory() as root:
            root = Path(root)
            if sql is not None:
                (root / VIEWS_SQL).parent.mkdir(parents=True)
                (root / VIEWS_SQL).write_text(sql)
            for rel, doc in [("monitoring/postgres_exporter/queries.yaml", q),
                             ("monitoring/prometheus/rules.yml", r),
                             ("monitoring/prometheus/rules.test.yml", t)]:
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(yaml.safe_dump(doc))
            (root / "monitoring/grafana").mkdir(parents=True)
            (root / "monitoring/grafana/d.json").write_text(json.dumps(d))
            return check(root, unused_ok={} if unused_ok is None else unused_ok,
                         not_exported={} if not_exported is None else not_exported)

    emitted, problems, n = run()
    assert emitted == {"idgen_x_level", "idgen_x_calls_total"} and problems == [] and n == 7, \
        (emitted, problems, n)

    # The view gains a column (and loses one): queries.yaml must follow.
    _, problems, _ = run(sql=views_sql.replace("c.name", "c.name, c.waits AS waits_total")
                         .replace("c.calls AS calls_total", "c.calls AS call_total"))
    assert problems == [
        f"queries.yaml: idgen_x: idgen_metrics_x has no column calls_total ({VIEWS_SQL})",
        f"{VIEWS_SQL}: idgen_metrics_x.waits_total is read by no query of queries.yaml (or add "
        "it to NOT_EXPORTED with a reason)",
        f"{VIEWS_SQL}: idgen_metrics_x.call_total is read by no query of queries.yaml (or add "
        "it to NOT_EXPORTED with a reason)",
    ], problems
    _, problems, _ = run(sql=views_sql.replace("c.name", "c.name, c.waits AS waits_total"),
                         not_exported={"idgen_metrics_x.waits_total": "why",
                                       "idgen_metrics_x.gone": "why"})
    assert problems == [f"NOT_EXPORTED: idgen_metrics_x.gone is not a column of a view of "
                        f"{VIEWS_SQL}"], problems
    _, problems, _ = run(sql=None)
    assert problems[:2] == [f"queries.yaml: idgen_x: {VIEWS_SQL} creates no view idgen_metrics_x",
                            f"{VIEWS_SQL}: no CREATE VIEW found (or no such file)"], problems
    # An expression is not checked against the view: write the column, or a constant AS name.
    computed = {"idgen_x": dict(queries["idgen_x"], query=queries["idgen_x"]["query"]
                                .replace("level,", "level * 2 AS level,"))}
    _, problems, _ = run(q=computed)
    assert problems == [
        "queries.yaml: idgen_x: 'level * 2 AS level' is not a column of idgen_metrics_x, with "
        "or without AS, nor a constant AS a name",
        f"{VIEWS_SQL}: idgen_metrics_x.level is read by no query of queries.yaml (or add it to "
        "NOT_EXPORTED with a reason)",
    ], problems

    spec = queries["idgen_x"]
    bad_q = {"idgen_x": dict(spec, query="SELECT name, calls_total, level FROM public.idgen_metrics_y",
                             metrics=spec["metrics"] + [{"errors": {"usage": "COUNTER"}}])}
    _, problems, _ = run(q=bad_q)
    assert problems == [
        "queries.yaml: idgen_x.errors: no description",
        "queries.yaml: idgen_x.errors: a COUNTER's name ends in _total, and only a COUNTER's",
        "queries.yaml: idgen_x: the query selects ['name', 'calls_total', 'level'], the metrics "
        "are ['name', 'level', 'calls_total', 'errors']",
        "queries.yaml: idgen_x: the query reads idgen_metrics_y, not idgen_metrics_x",
        f"queries.yaml: idgen_x: {VIEWS_SQL} creates no view idgen_metrics_y",
    ] + [f"{VIEWS_SQL}: idgen_metrics_x.{c} is read by no query of queries.yaml (or add it to "
         "NOT_EXPORTED with a reason)" for c in ("name", "level", "calls_total")] + [
        "queries.yaml: idgen_x_errors is used by no rule or panel (or add it to UNUSED_OK with "
        "a reason)",
    ], problems

    # A second query of the view under a longer key (as the registry client's state set) is
    # one; a key that only starts like the view's is not, nor a series two queries emit.
    more = dict(queries,
                idgen_x_name={"query": "SELECT name, 1 AS active FROM public.idgen_metrics_x",
                              "metrics": [{"name": {"usage": "LABEL", "description": "a name"}},
                                          {"active": {"usage": "GAUGE", "description": "1"}}]},
                idgen_xy={"query": "SELECT level FROM public.idgen_metrics_x",
                          "metrics": [{"level": {"usage": "GAUGE", "description": "a level"}}]},
                idgen_x_calls={"query": "SELECT calls_total AS total FROM public.idgen_metrics_x",
                               "metrics": [{"total": {"usage": "GAUGE", "description": "t"}}]})
    emitted, problems, _ = run(q=more, unused_ok={"idgen_x_name_active": "why",
                                                  "idgen_xy_level": "why"})
    assert "idgen_x_name_active" in emitted and problems == [
        "queries.yaml: idgen_x_calls.total: idgen_x_calls_total is emitted by another query too",
        "queries.yaml: idgen_xy: the query reads idgen_metrics_x, not idgen_metrics_xy",
    ], problems

    rule = rules["groups"][0]["rules"][0]
    bad_rule = {k: v for k, v in rule.items() if k != "for"}
    bad_rule.update(expr="idgen_x_levels > 0.9 and on() idgen_x_calls_total",
                    labels={"severity": "page"},
                    annotations={"summary": "s", "description": "no pointer"})
    _, problems, _ = run(r={"groups": [{"name": "g", "rules": [bad_rule]}]})
    assert problems == [
        "rules.yml: g/XHigh: idgen_x_levels is not emitted by queries.yaml",
        "rules.yml: g/XHigh: no `for` (write `for: 0m` to fire at once)",
        "rules.yml: g/XHigh: severity 'page' (one of ['critical', 'warning'])",
        f"rules.yml: g/XHigh: the description does not point at {DOCS_PAGE}",
        "tests: no case where XHigh (page) fires",
    ], problems

    quiet_only = {"tests": [{"alert_rule_test": tests["tests"][0]["alert_rule_test"][:1]}]}
    _, problems, _ = run(t=quiet_only)
    assert problems == ["tests: no case where XHigh (warning) fires"], problems
    firing_only = {"tests": [{"alert_rule_test": tests["tests"][0]["alert_rule_test"][1:]}]}
    _, problems, _ = run(t=firing_only)
    assert problems == ["tests: no case where XHigh stays quiet (exp_alerts: [])"], problems

    bad_dash = json.loads(json.dumps(dash))
    bad_dash["panels"][1]["targets"][0]["expr"] = 'sum(rate(idgen_x_call_total{name="a"}[5m]))'
    bad_dash["panels"][0]["panels"] = [{"id": 2, "title": "nested", "datasource": "other",
                                        "targets": [{"refId": "B", "expr": "up"}]}]
    _, problems, _ = run(d=bad_dash)
    assert problems == [
        "d.json: two panels share an id",
        "d.json: panel 'nested': its data source is not ${DS_PROMETHEUS}",
        "d.json: panel 'nested': query B reads no idgen_ metric",
        "d.json: panel 'calls': idgen_x_call_total is not emitted by queries.yaml",
        "queries.yaml: idgen_x_calls_total is used by no rule or panel (or add it to UNUSED_OK "
        "with a reason)",
    ], problems
    _, problems, _ = run(d=bad_dash, unused_ok={"idgen_x_calls_total": "why",
                                                "idgen_x_gone": "why"})
    assert problems[-1:] == ["UNUSED_OK: idgen_x_gone is not emitted by queries.yaml"], problems

    assert metric_names('max by (state) (idgen_a_b{x="idgen_c"}[5m]) / on(d) idgen_e '
                        'or label_values(idgen_f, g) + $idgen_var') == {"idgen_a_b", "idgen_e", "idgen_f"}
    print("check-monitoring self-test: ok (a clean tree; bad queries, the views' columns, two "
          "queries of a view, rules, tests, dashboard; the allow-lists)")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    emitted, problems, n = check(ROOT)
    if "--metrics" in argv:
        for m in sorted(emitted):
            print(f"emitted: {m}")
    for p in problems:
        print(p)
    print(f"{len(emitted)} metrics emitted by queries.yaml, {n - len(emitted)} queries, views, "
          "rules, panels and variables checked")
    failed = min(len(problems), n)
    print(f"test result: {'ok' if not problems else 'FAILED'}. {n - failed} passed; "
          f"{failed} failed; 0 ignored")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
