//! Pins that no function or operator name that an idgen SQL script uses can be
//! captured from schema `public` by a database owner who is not a superuser.
//!
//! Stored expressions (column defaults, views, CHECKs, index expressions) are bound when the
//! script runs, to the best-matching candidate along the whole `search_path`; a function of the
//! same name in `public` wins when pg_catalog's candidate needs a coercion and the planted one
//! is an exact match, or when an untyped literal prefers the string category. Function bodies
//! without a pinned `search_path` resolve at every call. So, on one server: in a fresh database
//! owned by `app` (an `app_N`: not a superuser, allowed to CREATE in `public`), `app` plants a
//! decoy for every function and operator name found in `sql/**/*.sql` (derived from the scripts
//! at run time, not a hand list), with argument types an unqualified call would prefer; then a
//! superuser runs `CREATE EXTENSION idgen`, or, for every earlier version, the superuser
//! installs that version *before* the decoys are planted and runs `ALTER EXTENSION idgen UPDATE`
//! after, or installs it *after* and updates (only what runs from the update on counts). Every
//! idgen function is then called and every view read, as a superuser, as a member
//! of `idgen_admin`, as a member of `idgen_registry` and as a plain role. No decoy may run
//! (a sequence no rollback undoes, and a WARNING in the server log), `app` never becomes a
//! superuser, and `pg_depend` shows no reference from an object of the extension (or a default,
//! constraint, rule or index of one) to a function or operator outside pg_catalog that is not
//! the extension's own. The failure message lists every captured binding and every decoy that
//! ran, per scenario.
//!
//! The scenarios run a few at a time ([`SLOTS`]), each in its own database with its own `app`,
//! so that nothing one finds is another's: the decoys count themselves in a sequence of their
//! database, the server log names the database of each line, and a decoy makes its own
//! database's `app` a superuser. Where the decoys come first, the database is a copy of one
//! `app` planted them in once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use idgen_cluster_tests::{as_postgres, Cluster};
use postgres::{Client, SimpleQueryMessage};

/// The argument types a decoy's signature is drawn from.
const TYPES: [&str; 7] = [
    "text",
    "integer",
    "bigint",
    "numeric",
    "double precision",
    "timestamp with time zone",
    "boolean",
];

/// More operand types for the operator decoys (cheap: one decoy per pair).
const MORE_OPERAND_TYPES: [&str; 10] = [
    "interval",
    "smallint",
    "real",
    "name",
    "date",
    "timestamp without time zone",
    "text[]",
    "bigint[]",
    // Catalog comparisons: an oid against a regtype constant has no exact operator in
    // pg_catalog, so an exact one elsewhere would win.
    "oid",
    "regtype",
];

/// How many scenarios run side by side, each on a [`Slot`] of its own: most of a scenario's
/// time is the registry's waits (a longest lease after its start and after a recovery).
const SLOTS: usize = 3;

/// Characters an operator name is made of (PostgreSQL's lexer).
const OP_CHARS: &str = "+-*/<>=~!@#%^&|`?";

// ---------------------------------------------------------------------------------------------
// What the scripts use
// ---------------------------------------------------------------------------------------------

/// The repository's root: `tests/cluster/../..`, at run time (the binary may come from another
/// clone).
fn repo_root() -> PathBuf {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test");
    Path::new(&manifest).join("../..").canonicalize().unwrap()
}

/// Every `*.sql` file under `dir`, subdirectories included, sorted.
fn sql_files(dir: &Path) -> Vec<PathBuf> {
    idgen_cluster_tests::files_with_extension(dir, "sql")
}

/// Names followed by `(` (function calls, in code and in string literals, which may be
/// dynamic SQL), operator symbols (outside string literals and comments) and lower-cased words
/// (for the operators that syntax implies: `IN`, `LIKE`, `BETWEEN`, ...).
#[derive(Default)]
struct Used {
    calls: BTreeSet<String>,
    ops: BTreeSet<String>,
    words: BTreeSet<String>,
}

fn is_ident_start(c: char) -> bool {
    c.is_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The index of the first non-whitespace character at or after `i`.
fn skip_ws(s: &[char], mut i: usize) -> usize {
    while i < s.len() && s[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Splits a run of operator characters the way PostgreSQL's lexer does: a comment start ends
/// it, and a name of several characters cannot end in `+` or `-` unless it also contains one
/// of `~ ! @ # % ^ & | ` ?`.
fn split_operator(run: &str, out: &mut BTreeSet<String>) {
    let mut rest = run;
    while !rest.is_empty() {
        let mut op = rest;
        if let Some(p) = [op.find("--"), op.find("/*")].into_iter().flatten().min() {
            op = &op[..p];
        }
        if op.len() > 1 && !op.chars().any(|c| "~!@#%^&|`?".contains(c)) {
            while op.len() > 1 && (op.ends_with('+') || op.ends_with('-')) {
                op = &op[..op.len() - 1];
            }
        }
        if op.is_empty() {
            break; // a comment start: the caller stops before it
        }
        out.insert(if op == "!=" { "<>" } else { op }.to_owned());
        rest = &rest[op.len()..];
    }
}

impl Used {
    /// Scans one script. Dollar-quoted bodies are code and scanned as such.
    fn scan(&mut self, text: &str, in_string: bool) {
        // `@extschema@` and its kind are substituted by CREATE EXTENSION: not operators.
        let mut src = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(p) = rest.find('@') {
            src.push_str(&rest[..p]);
            let after = &rest[p + 1..];
            let word: String = after.chars().take_while(|c| is_ident_char(*c)).collect();
            if !word.is_empty() && after[word.len()..].starts_with('@') {
                src.push_str(&word);
                rest = &after[word.len() + 1..];
            } else {
                src.push('@');
                rest = after;
            }
        }
        src.push_str(rest);
        let s: Vec<char> = src.chars().collect();
        let mut i = 0;
        let mut line_start = true;
        while i < s.len() {
            let c = s[i];
            if c == '\n' {
                line_start = true;
                i += 1;
                continue;
            }
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            let at_line_start = line_start;
            line_start = false;
            if c == '-' && s.get(i + 1) == Some(&'-') {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            } else if c == '/' && s.get(i + 1) == Some(&'*') {
                i += 2;
                while i < s.len() && !(s[i] == '*' && s.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            } else if c == '\'' || ((c == 'E' || c == 'e') && s.get(i + 1) == Some(&'\'')) {
                let escapes = c != '\'';
                i += if escapes { 2 } else { 1 };
                let mut content = String::new();
                while i < s.len() {
                    if escapes && s[i] == '\\' {
                        content.push(s[i]);
                        if let Some(n) = s.get(i + 1) {
                            content.push(*n);
                        }
                        i += 2;
                    } else if s[i] == '\'' {
                        if s.get(i + 1) == Some(&'\'') {
                            content.push('\'');
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        content.push(s[i]);
                        i += 1;
                    }
                }
                // A string may be dynamic SQL: its calls count, its `%`s and `=`s do not.
                self.scan(&content, true);
            } else if c == '$' {
                // `$1`, or a dollar-quote delimiter `$tag$` (the body is code: go on inside).
                let mut j = i + 1;
                while j < s.len() && (s[j].is_alphanumeric() || s[j] == '_') {
                    j += 1;
                }
                i = if s.get(j) == Some(&'$') { j + 1 } else { j };
            } else if c == '"' {
                let mut name = String::new();
                i += 1;
                while i < s.len() {
                    if s[i] == '"' {
                        if s.get(i + 1) == Some(&'"') {
                            name.push('"');
                            i += 2;
                        } else {
                            i += 1;
                            break;
                        }
                    } else {
                        name.push(s[i]);
                        i += 1;
                    }
                }
                if s.get(skip_ws(&s, i)) == Some(&'(') {
                    self.calls.insert(name);
                }
            } else if is_ident_start(c) {
                let start = i;
                while i < s.len() && is_ident_char(s[i]) {
                    i += 1;
                }
                let word: String = s[start..i].iter().collect::<String>().to_lowercase();
                if s.get(skip_ws(&s, i)) == Some(&'(') {
                    self.calls.insert(word.clone());
                }
                if !in_string {
                    self.words.insert(word);
                }
            } else if c.is_ascii_digit() {
                while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == '.' || s[i] == '_') {
                    i += 1;
                }
            } else if OP_CHARS.contains(c) {
                let start = i;
                while i < s.len() && OP_CHARS.contains(s[i]) {
                    if (s[i] == '-' && s.get(i + 1) == Some(&'-'))
                        || (s[i] == '/' && s.get(i + 1) == Some(&'*'))
                    {
                        break;
                    }
                    i += 1;
                }
                let run: String = s[start..i].iter().collect();
                // `#variable_conflict` and its kind: PL/pgSQL directives, not the `#` operator.
                let directive =
                    run == "#" && at_line_start && s.get(i).is_some_and(|c| is_ident_start(*c));
                if !in_string && !directive {
                    split_operator(&run, &mut self.ops);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Operators that syntax implies without writing them.
    fn implied_ops(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let w = |k: &str| self.words.contains(k);
        if [
            "in", "case", "nullif", "distinct", "using", "any", "all", "some",
        ]
        .iter()
        .any(|k| w(k))
        {
            out.insert("=".to_owned());
            out.insert("<>".to_owned());
        }
        if w("between") {
            out.insert(">=".to_owned());
            out.insert("<=".to_owned());
        }
        if w("like") {
            out.insert("~~".to_owned());
            out.insert("!~~".to_owned());
        }
        if w("ilike") {
            out.insert("~~*".to_owned());
            out.insert("!~~*".to_owned());
        }
        if w("similar") {
            out.insert("~".to_owned());
        }
        out
    }
}

/// What every `sql/**/*.sql` of the repository uses.
fn scripts_use() -> (Vec<PathBuf>, Used) {
    let files = sql_files(&repo_root().join("sql"));
    assert!(!files.is_empty(), "no sql/**/*.sql under {:?}", repo_root());
    let mut used = Used::default();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        used.scan(&text, false);
    }
    let implied = used.implied_ops();
    used.ops.extend(implied);
    (files, used)
}

// ---------------------------------------------------------------------------------------------
// The decoys
// ---------------------------------------------------------------------------------------------

/// Runs each statement of `stmts` in its own subtransaction: with `fetch`, returns the first
/// column of its first row (NULL when it failed); without, `ok` or NULL.
const TRY_EACH: &str = "
CREATE FUNCTION pg_temp.capture_try(stmts text[], want_rows boolean)
RETURNS TABLE (n integer, result text) LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $f$
DECLARE
    i integer := 0;
    s text;
    r text;
BEGIN
    FOREACH s IN ARRAY stmts LOOP
        i := i OPERATOR(pg_catalog.+) 1;
        BEGIN
            IF want_rows THEN
                EXECUTE s INTO r;
            ELSE
                EXECUTE s;
                r := 'ok';
            END IF;
        EXCEPTION WHEN OTHERS THEN
            r := NULL;
        END;
        n := i;
        result := r;
        RETURN NEXT;
    END LOOP;
END $f$";

/// Runs `stmts` through `pg_temp.capture_try` (which `client` must have) in chunks.
fn try_each(client: &mut Client, stmts: &[String], fetch: bool) -> Vec<Option<String>> {
    let mut out = Vec::with_capacity(stmts.len());
    for chunk in stmts.chunks(2000) {
        let rows = client
            .query(
                "SELECT result FROM pg_temp.capture_try($1::pg_catalog.text[], $2::pg_catalog.bool) ORDER BY n",
                &[&chunk, &fetch],
            )
            .unwrap_or_else(|e| panic!("capture_try: {e}"));
        out.extend(rows.iter().map(|r| r.get::<_, Option<String>>(0)));
    }
    out
}

/// A double-quoted identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A single-quoted literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// One overload of pg_catalog's.
struct CatalogProc {
    name: String,
    args: String,
    nargs: usize,
    ndefaults: usize,
    variadic: bool,
    retset: bool,
    volatile: char,
    ret: Option<String>,
}

/// The decoys to plant: DDL known to succeed, in order.
struct Decoys {
    ddl: Vec<String>,
    functions: usize,
    operators: usize,
    names: Vec<String>,
    symbols: Vec<String>,
}

impl Decoys {
    /// One batch that plants every decoy as `owner` (who their bodies make a superuser), with
    /// the sequence they count themselves in.
    fn batch(&self, owner: &str) -> String {
        format!(
            "SET search_path = pg_catalog, pg_temp;\n\
             CREATE SEQUENCE public.decoy_calls;\n\
             GRANT USAGE ON SEQUENCE public.decoy_calls TO PUBLIC;\n{};",
            self.ddl.join(";\n")
        )
        .replace(
            &format!("'ALTER ROLE {PLANTER} SUPERUSER'"),
            &format!("'ALTER ROLE {owner} SUPERUSER'"),
        )
    }
}

fn volatility(v: char) -> &'static str {
    match v {
        'i' => "IMMUTABLE",
        's' => "STABLE",
        _ => "VOLATILE",
    }
}

/// The role a decoy's body makes a superuser, in [`Decoys::ddl`]: [`Decoys::batch`] names the
/// role that plants them instead.
const PLANTER: &str = "capture_planter";

/// The body of a decoy: says so in the server log as WARNING, counts itself in
/// `public.decoy_calls` (a sequence: no rollback undoes it, any role may advance it), makes
/// its planter ([`PLANTER`]) a superuser when it runs as one (the attack pinned here), then
/// answers what pg_catalog's function would (with `public` on the path, so that a sequence
/// named as text is found), NULL if that fails: planted code that keeps idgen working.
fn decoy_body(signature: &str, ret: &str, retset: bool, call: &str) -> String {
    let (answer, fallback) = if retset {
        (
            format!("RETURN QUERY SELECT * FROM {call};\n        RETURN;"),
            "RETURN;",
        )
    } else if ret == "void" {
        (format!("PERFORM {call};\n        RETURN;"), "RETURN;")
    } else {
        (format!("RETURN {call};"), "RETURN NULL;")
    };
    format!(
        "$decoy$
BEGIN
    RAISE WARNING 'decoy % ran as %', {}, current_user;
    BEGIN
        PERFORM pg_catalog.nextval('public.decoy_calls'::pg_catalog.regclass);
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    BEGIN
        IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r
             WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
            EXECUTE 'ALTER ROLE {PLANTER} SUPERUSER';
        END IF;
    EXCEPTION WHEN OTHERS THEN NULL;
    END;
    BEGIN
        {answer}
    EXCEPTION WHEN OTHERS THEN
        {fallback}
    END;
END
$decoy$",
        literal(signature)
    )
}

/// Derives the decoys from the scripts and the catalog of this server, creating them once in a
/// database of `owner`'s own to keep only those that can be created.
fn derive_decoys(c: &Cluster, owner: &str) -> Decoys {
    let (files, used) = scripts_use();
    println!(
        "scripts: {}",
        files
            .iter()
            .map(|f| f.strip_prefix(repo_root()).unwrap().display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    c.connect("postgres")
        .batch_execute(&format!("CREATE DATABASE capture_gen OWNER {owner}"))
        .unwrap();
    let mut gen = c.connect_as("capture_gen", owner);
    gen.batch_execute("SET search_path = pg_catalog, pg_temp")
        .unwrap();
    gen.batch_execute(TRY_EACH).unwrap();

    // pg_catalog's functions of the names the scripts call.
    let calls: Vec<String> = used.calls.iter().cloned().collect();
    let rows = gen
        .query(
            "SELECT p.proname::text, pg_catalog.oidvectortypes(p.proargtypes),
                    p.pronargs::int4, p.pronargdefaults::int4,
                    p.provariadic OPERATOR(pg_catalog.<>) 0::oid, p.proretset,
                    p.provolatile::text,
                    CASE WHEN t.typtype OPERATOR(pg_catalog.<>) 'p'
                           OR t.typname OPERATOR(pg_catalog.=) ANY ('{void,record}'::name[])
                         THEN pg_catalog.format_type(p.prorettype, NULL) END
               FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) p.prorettype
              WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
                AND p.proname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])",
            &[&calls],
        )
        .unwrap();
    let procs: Vec<CatalogProc> = rows
        .iter()
        .map(|r| CatalogProc {
            name: r.get(0),
            args: r.get(1),
            nargs: r.get::<_, i32>(2) as usize,
            ndefaults: r.get::<_, i32>(3) as usize,
            variadic: r.get(4),
            retset: r.get(5),
            volatile: r.get::<_, String>(6).chars().next().unwrap(),
            ret: r.get(7),
        })
        .collect();
    let mut by_name: BTreeMap<&str, Vec<&CatalogProc>> = BTreeMap::new();
    for p in &procs {
        by_name.entry(&p.name).or_default().push(p);
    }
    let exact: BTreeSet<(String, String)> = procs
        .iter()
        .map(|p| (p.name.clone(), p.args.clone()))
        .collect();

    // Candidate signatures: per name, per arity pg_catalog's overloads accept.
    struct Candidate {
        name: String,
        args: Vec<&'static str>,
        retset: bool,
        volatile: char,
        fallback_ret: String,
    }
    let mut candidates = Vec::new();
    for (name, overloads) in &by_name {
        let mut arities = BTreeSet::new();
        for p in overloads {
            if p.variadic {
                arities.extend(1..=4);
            } else {
                arities.extend(p.nargs - p.ndefaults..=p.nargs);
            }
        }
        let volatile = overloads.iter().map(|p| p.volatile).min().unwrap();
        for n in arities.into_iter().filter(|n| *n > 0) {
            let covering: Vec<&&CatalogProc> = overloads
                .iter()
                .filter(|p| p.variadic || (p.nargs - p.ndefaults..=p.nargs).contains(&n))
                .collect();
            let retset = !covering.is_empty() && covering.iter().all(|p| p.retset);
            let mut rets: BTreeMap<&str, usize> = BTreeMap::new();
            for p in &covering {
                if let Some(r) = &p.ret {
                    *rets.entry(r).or_default() += 1;
                }
            }
            let fallback_ret = rets
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(r, _)| r.to_string())
                .unwrap_or_else(|| "text".to_owned());
            for args in signatures(n) {
                if exact.contains(&(name.to_string(), args.join(", "))) {
                    continue; // pg_catalog has it: a decoy would change nothing
                }
                candidates.push(Candidate {
                    name: name.to_string(),
                    args,
                    retset,
                    volatile,
                    fallback_ret: fallback_ret.clone(),
                });
            }
        }
    }
    // What pg_catalog's function returns for these arguments (the return type a decoy should
    // have), found without running it.
    let resolve: Vec<String> = candidates
        .iter()
        .map(|k| {
            let nulls: Vec<String> = k.args.iter().map(|t| format!("NULL::{t}")).collect();
            format!(
                "SELECT pg_catalog.pg_typeof((SELECT pg_catalog.{}({}) WHERE false))::text",
                ident(&k.name),
                nulls.join(", ")
            )
        })
        .collect();
    let resolved = try_each(&mut gen, &resolve, true);

    let mut ddl = Vec::new();
    let mut kinds = Vec::new();
    for (k, ret) in candidates.iter().zip(resolved) {
        let ret = ret
            .filter(|r| r != "unknown" && !r.starts_with("any"))
            .unwrap_or_else(|| k.fallback_ret.clone());
        let signature = format!("public.{}({})", k.name, k.args.join(","));
        let params: Vec<String> = (1..=k.args.len()).map(|i| format!("${i}")).collect();
        let call = format!("pg_catalog.{}({})", ident(&k.name), params.join(", "));
        ddl.push(format!(
            "CREATE FUNCTION public.{}({}) RETURNS {}{} LANGUAGE plpgsql {} \
             SET search_path = public, pg_catalog AS {}",
            ident(&k.name),
            k.args.join(", "),
            if k.retset { "SETOF " } else { "" },
            ret,
            volatility(k.volatile),
            decoy_body(&signature, &ret, k.retset, &call)
        ));
        kinds.push('f');
    }

    // Operators: the symbols the scripts use that pg_catalog has.
    let ops: Vec<String> = used.ops.iter().cloned().collect();
    let rows = gen
        .query(
            "SELECT o.oprname::text, o.oprkind::text,
                    pg_catalog.format_type(o.oprleft, NULL), pg_catalog.format_type(o.oprright, NULL),
                    pg_catalog.format_type(o.oprresult, NULL), p.provolatile::text
               FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) o.oprcode::pg_catalog.oid
              WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
                AND o.oprname OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.name[])",
            &[&ops],
        )
        .unwrap();
    struct CatalogOp {
        name: String,
        kind: String,
        left: String,
        right: String,
        result: String,
        volatile: char,
    }
    let catalog_ops: Vec<CatalogOp> = rows
        .iter()
        .map(|r| CatalogOp {
            name: r.get(0),
            kind: r.get(1),
            left: r.get(2),
            right: r.get(3),
            result: r.get(4),
            volatile: r.get::<_, String>(5).chars().next().unwrap(),
        })
        .collect();
    let symbols: BTreeSet<String> = catalog_ops.iter().map(|o| o.name.clone()).collect();
    let operand_types: Vec<&str> = TYPES
        .iter()
        .chain(MORE_OPERAND_TYPES.iter())
        .copied()
        .collect();
    struct OpCandidate {
        name: String,
        left: Option<&'static str>,
        right: &'static str,
        volatile: char,
        fallback_ret: String,
    }
    let mut op_candidates = Vec::new();
    for sym in &symbols {
        let mine: Vec<&CatalogOp> = catalog_ops.iter().filter(|o| &o.name == sym).collect();
        let volatile = mine.iter().map(|o| o.volatile).min().unwrap();
        for prefix in [false, true] {
            let kind = if prefix { "l" } else { "b" };
            let of_kind: Vec<&&CatalogOp> = mine.iter().filter(|o| o.kind == kind).collect();
            if of_kind.is_empty() {
                continue;
            }
            let mut rets: BTreeMap<&str, usize> = BTreeMap::new();
            for o in &of_kind {
                if !o.result.starts_with("any") {
                    *rets.entry(&o.result).or_default() += 1;
                }
            }
            let fallback_ret = rets
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(r, _)| r.to_string())
                .unwrap_or_else(|| "boolean".to_owned());
            let lefts: Vec<Option<&'static str>> = if prefix {
                vec![None]
            } else {
                operand_types.iter().map(|t| Some(*t)).collect()
            };
            for left in lefts {
                for right in &operand_types {
                    let exists = of_kind
                        .iter()
                        .any(|o| o.right == *right && (prefix || o.left == left.unwrap()));
                    if !exists {
                        op_candidates.push(OpCandidate {
                            name: sym.clone(),
                            left,
                            right,
                            volatile,
                            fallback_ret: fallback_ret.clone(),
                        });
                    }
                }
            }
        }
    }
    let resolve: Vec<String> = op_candidates
        .iter()
        .map(|k| {
            let left = k.left.map(|t| format!("NULL::{t} ")).unwrap_or_default();
            format!(
                "SELECT pg_catalog.pg_typeof((SELECT {left}OPERATOR(pg_catalog.{}) NULL::{} WHERE false))::text",
                k.name, k.right
            )
        })
        .collect();
    let resolved = try_each(&mut gen, &resolve, true);
    for (i, (k, ret)) in op_candidates.iter().zip(resolved).enumerate() {
        let ret = ret
            .filter(|r| r != "unknown" && !r.starts_with("any"))
            .unwrap_or_else(|| k.fallback_ret.clone());
        let func = format!("public.decoy_op_{i}");
        let (signature, params, call, args) = match k.left {
            Some(l) => (
                format!("public.{}({},{})", k.name, l, k.right),
                format!("{l}, {}", k.right),
                format!("($1 OPERATOR(pg_catalog.{}) $2)", k.name),
                format!("LEFTARG = {l}, RIGHTARG = {}", k.right),
            ),
            None => (
                format!("public.{}(NONE,{})", k.name, k.right),
                k.right.to_owned(),
                format!("(OPERATOR(pg_catalog.{}) $1)", k.name),
                format!("RIGHTARG = {}", k.right),
            ),
        };
        ddl.push(format!(
            "CREATE FUNCTION {func}({params}) RETURNS {ret} LANGUAGE plpgsql {} AS {}",
            volatility(k.volatile),
            decoy_body(&signature, &ret, false, &call)
        ));
        kinds.push('p');
        ddl.push(format!(
            "CREATE OPERATOR public.{} ({args}, FUNCTION = {func})",
            k.name
        ));
        kinds.push('o');
    }

    // Keep what can be created (a name may be a keyword, a type may not fit), in order.
    gen.batch_execute(
        "CREATE SEQUENCE public.decoy_calls; GRANT USAGE ON SEQUENCE public.decoy_calls TO PUBLIC",
    )
    .unwrap();
    let created = try_each(&mut gen, &ddl, false);
    let mut kept = Vec::new();
    let (mut functions, mut operators, mut skipped) = (0, 0, 0);
    for ((stmt, ok), kind) in ddl.into_iter().zip(created).zip(kinds) {
        if ok.is_some() {
            match kind {
                'f' => functions += 1,
                'o' => operators += 1,
                _ => {}
            }
            kept.push(stmt);
        } else {
            skipped += 1;
        }
    }
    println!(
        "decoys: {functions} functions of {} names, {operators} operators of {} symbols ({skipped} statements could not run)",
        by_name.len(),
        symbols.len()
    );
    drop(gen);
    c.connect("postgres")
        .batch_execute("DROP DATABASE capture_gen")
        .unwrap();
    Decoys {
        ddl: kept,
        functions,
        operators,
        names: by_name.keys().map(|s| s.to_string()).collect(),
        symbols: symbols.into_iter().collect(),
    }
}

/// The argument lists of a decoy of `n` arguments: every combination of [`TYPES`] up to three
/// arguments; beyond, one type throughout, and every mix of text and integer (up to eight).
fn signatures(n: usize) -> Vec<Vec<&'static str>> {
    if n <= 3 {
        let mut out: Vec<Vec<&'static str>> = vec![vec![]];
        for _ in 0..n {
            out = out
                .into_iter()
                .flat_map(|prefix| {
                    TYPES.iter().map(move |t| {
                        let mut v = prefix.clone();
                        v.push(*t);
                        v
                    })
                })
                .collect();
        }
        return out;
    }
    let mut out: BTreeSet<Vec<&'static str>> = TYPES.iter().map(|t| vec![*t; n]).collect();
    if n <= 8 {
        for mask in 0..(1u32 << n) {
            out.insert(
                (0..n)
                    .map(|i| {
                        if mask & (1 << i) != 0 {
                            "text"
                        } else {
                            "integer"
                        }
                    })
                    .collect(),
            );
        }
    }
    out.into_iter().collect()
}

// ---------------------------------------------------------------------------------------------
// The scenarios
// ---------------------------------------------------------------------------------------------

/// Puts the 0.0.9 install script beside the installed extension (as `upgrade.rs` does).
fn install_old_script() {
    let out = as_postgres("pg_config")
        .arg("--sharedir")
        .output()
        .expect("pg_config --sharedir");
    assert!(out.status.success(), "pg_config --sharedir: {out:?}");
    let sharedir = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let fixture = repo_root().join("tests/upgrade/idgen--0.0.9.sql");
    std::fs::copy(&fixture, format!("{sharedir}/extension/idgen--0.0.9.sql"))
        .expect("copy the 0.0.9 script into the extension directory (tests run as root)");
}

/// A statement's rows as text, or its error.
fn attempt(client: &mut Client, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    match client.simple_query(sql) {
        Ok(msgs) => Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => {
                    Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
                }
                _ => None,
            })
            .collect()),
        Err(e) => Err(e
            .as_db_error()
            .map(|d| format!("{}: {}", d.code().code(), d.message()))
            .unwrap_or_else(|| e.to_string())),
    }
}

/// Runs one statement of the exercise (errors are allowed and counted), noting the names it
/// calls.
fn run(
    client: &mut Client,
    sql: &str,
    covered: &mut BTreeSet<String>,
    errors: &mut Vec<String>,
) -> Option<Vec<Vec<Option<String>>>> {
    let mut used = Used::default();
    used.scan(sql, false);
    covered.extend(used.calls);
    match attempt(client, sql) {
        Ok(rows) => Some(rows),
        Err(e) => {
            errors.push(format!("{}\n          -> {e}", squeeze(sql, 150)));
            None
        }
    }
}

/// A session whose own queries cannot be captured: only pg_catalog (and pg_temp) on its path.
fn checker(c: &Cluster, db: &str) -> Client {
    let mut client = c.connect(db);
    client
        .batch_execute("SET search_path = pg_catalog, pg_temp")
        .unwrap();
    client
}

const SECRET: &str = "s3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3ts3cr3tabcd";

/// Statements that call every idgen function (names prefixed by `p`, so that each role's
/// objects are its own), with the default `search_path`, as a user would.
fn exercise_statements(p: &str, worker: &str) -> Vec<String> {
    let secret = SECRET;
    let forged = "z".repeat(40);
    let mut s: Vec<String> = [
        // Segments.
        format!("SELECT segment_create('{p}seg', start => 1, step => 10, description => 'd')"),
        format!("SELECT segment_create('{p}gseg', 1, 10, 'g', 'global', 1)"),
        format!("SELECT segment_alter('{p}seg', step => 20, description => 'e', cache => 2)"),
        format!("SELECT segment_nextval('{p}seg')"),
        format!("SELECT * FROM segment_nextvals('{p}seg', 3)"),
        format!("SELECT segment_currval('{p}seg')"),
        format!("SELECT segment_setval('{p}seg', 1000)"),
        "SELECT * FROM segment_status()".to_owned(),
        "SELECT * FROM segment_cache_status()".to_owned(),
        "SELECT segment_interleave_ready(1)".to_owned(),
        // Snowflake.
        "SELECT snowflake_nextval()".to_owned(),
        "SELECT * FROM snowflake_nextvals(3)".to_owned(),
        "SELECT snowflake_currval()".to_owned(),
        "SELECT * FROM snowflake_decode(snowflake_nextval())".to_owned(),
        "SELECT snowflake_timestamp(snowflake_nextval())".to_owned(),
        "SELECT snowflake_compose('2024-01-01 00:00:00+00'::timestamptz, 1, 0)".to_owned(),
        "SELECT snowflake_compose('2024-01-01 00:00:00+00'::timestamptz)".to_owned(),
        "SELECT * FROM snowflake_status()".to_owned(),
        "SELECT snowflake_format(snowflake_nextval())".to_owned(),
        "SELECT snowflake_format(snowflake_nextval(), 'ID-')".to_owned(),
        "SELECT snowflake_parse(snowflake_format(snowflake_nextval()))".to_owned(),
        "SELECT snowflake_parse(snowflake_format(snowflake_nextval(), 'ID-'))".to_owned(),
        // Sqids.
        "SELECT sqids_encode(12345)".to_owned(),
        "SELECT sqids_decode(sqids_encode(12345))".to_owned(),
        "SELECT sqids_encode(12345, 'abcdefghijklmnopqrstuvwxyz', 8)".to_owned(),
        "SELECT sqids_decode(sqids_encode(12345, 'abcdefghijklmnopqrstuvwxyz', 8), 'abcdefghijklmnopqrstuvwxyz', 8)".to_owned(),
        // Serials: a plain one, a gapless one with a yearly reset and a zone, a fast one, a global one.
        format!("SELECT serial_create('{p}inv', 'INV-{{seq:06}}')"),
        format!("SELECT serial_create('{p}gap', 'G{{YYYY}}-{{seq:04}}', reset => 'year', time_zone => 'Europe/Berlin', gapless => true, description => 'gapless')"),
        format!("SELECT serial_create('{p}fast', 'F{{seq}}', gapless => false)"),
        format!("SELECT serial_create('{p}glob', 'GL{{seq}}', scope => 'global')"),
        format!("SELECT serial_nextval('{p}inv')"),
        format!("SELECT serial_nextval('{p}gap')"),
        format!("SELECT serial_nextval('{p}fast')"),
        format!("SELECT serial_nextval('{p}glob')"),
        format!("SELECT serial_alter('{p}inv', format => 'INV-{{seq:07}}', description => 'x')"),
        format!("SELECT serial_grant('{p}inv', 'capture_plain')"),
        format!("SELECT serial_revoke('{p}inv', 'capture_plain')"),
        format!("SELECT serial_grant('{p}fast', 'capture_plain')"),
        format!("SELECT serial_grant('{p}gap', 'capture_plain')"),
        // The superuser's gapless serial, granted to the plain role.
        "SELECT serial_nextval('su_gap')".to_owned(),
        "SELECT idgen_serial_period('year', 'UTC')".to_owned(),
        "SELECT idgen_serial_period('day', 'Europe/Berlin')".to_owned(),
        // Adoption of a serial column (the table is the superuser's: see `prepare`).
        "SELECT * FROM idgen_adopt_column('capture_orders', 'id', dry_run => true)".to_owned(),
        format!("SELECT * FROM idgen_adopt_column('capture_orders'::regclass, 'id', generator => 'segment', segment => '{p}seg', dry_run => true)"),
        "SELECT * FROM idgen_adopt_column('capture_orders_ident', 'id', dry_run => true)".to_owned(),
        // The registry, as a node and its operator would call it (the claim and the hello that
        // precede it: see `exercise`): what goes well ...
        format!("SELECT idgen_registry_key('{secret}')"),
        "SELECT * FROM idgen_registry_client_status()".to_owned(),
        format!("SELECT * FROM idgen_registry_renew({worker}, '{p}inc1', '{secret}', 2000, 600, 0::float8)"),
        format!("SELECT * FROM idgen_registry_segment_create('{p}rg', 1::bigint, 10, 'about')"),
        format!("SELECT * FROM idgen_registry_segment_get('{p}rg')"),
        format!("SELECT * FROM idgen_registry_segment_take('{p}rg', 1, '{p}inc1', '{secret}')"),
        format!("SELECT * FROM idgen_registry_serial_take('{p}glob', '', 10::bigint, '{p}inc1', '{secret}', 'never', 'GL{{seq}}')"),
        // ... what is refused: another definition of the serial, a renewal with another
        // secret, a lease above the registry's longest ...
        format!("SELECT * FROM idgen_registry_serial_take('{p}glob', '', 10::bigint, '{p}inc1', '{secret}', 'year', 'GX{{seq}}')"),
        format!("SELECT * FROM idgen_registry_renew({worker}, '{p}inc1', '{forged}', 2000, 600, 0::float8)"),
        format!("SELECT * FROM idgen_registry_renew({worker}, '{p}inc1', '{secret}', 600000, 600, 0::float8)"),
        // ... a recovery the operator opens: the hello shows it, claims and ranges are refused,
        // the node reports, the operator completes it ...
        format!("SELECT idgen_registry_begin_recovery('opened by {p}')"),
        format!("SELECT * FROM idgen_registry_hello('{p}n1', '{p}inc1', 0::bigint, 5432)"),
        claim_statement(p),
        format!("SELECT * FROM idgen_registry_segment_take('{p}rg', 1, '{p}inc1', '{secret}')"),
        format!("SELECT idgen_registry_report_marks('{p}n1', '{p}inc1', {worker}, 100::bigint, ARRAY['{p}rg', E'\\x01serial\\x01{p}glob\\x01']::text[], ARRAY[50, 60]::bigint[], 1000::bigint)"),
        format!("SELECT * FROM idgen_registry_hello('{p}n1', '{p}inc1', 1000::bigint, 5432)"),
        "SELECT * FROM idgen_registry_recovery".to_owned(),
        "SELECT * FROM idgen_registry_recover()".to_owned(),
        // ... one a node's revision opens, completed without it; a report with no recovery.
        format!("SELECT * FROM idgen_registry_hello('{p}n1', '{p}inc1', 999999999::bigint, 5432)"),
        format!("SELECT idgen_registry_report_marks('{p}n1', '{p}inc1', NULL::integer, NULL::bigint, ARRAY[]::text[], ARRAY[]::bigint[], 999999999::bigint)"),
        format!("SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY['{p}n1']::text[])"),
        format!("SELECT idgen_registry_report_marks('{p}n1', '{p}inc1', NULL::integer, NULL::bigint, ARRAY[]::text[], ARRAY[]::bigint[], 0::bigint)"),
        format!("SELECT * FROM idgen_registry_renew({worker}, '{p}inc1', '{secret}', 2000, 600, 0::float8)"),
        format!("SELECT idgen_registry_release({worker}, '{p}inc1', '{secret}', 0::bigint)"),
        // Dropping.
        format!("SELECT serial_drop('{p}fast')"),
        format!("SELECT serial_create('{p}fast', 'F{{seq:09}}')"),
        format!("SELECT serial_drop('{p}fast')"),
        format!("SELECT serial_forget('{p}fast')"),
        format!("SELECT segment_drop('{p}gseg')"),
    ]
    .into_iter()
    .collect();
    s.push(format!("SELECT segment_drop('{p}seg')"));
    s
}

/// The claim a node makes first (its worker id is used by the calls that follow), after its
/// hello ([`hello_statement`]).
fn claim_statement(p: &str) -> String {
    format!(
        "SELECT worker_id FROM idgen_registry_claim('{p}n1', '{p}inc1', '{SECRET}', 'sys', 1, NULL::integer, \
         1704067200000::bigint, 10, 12, 1, 2000, 600, 0::float8, 5432)"
    )
}

/// A node's hello, answering how many seconds the registry's grants still wait (after its
/// start, a new identity or a recovery), written so that nothing in it can be captured.
fn hello_statement(p: &str) -> String {
    format!(
        "SELECT pg_catalog.date_part('epoch', grants_from OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) \
         FROM idgen_registry_hello('{p}n1', '{p}inc1', 0::bigint, 5432)"
    )
}

/// The claim of the releases before 0.9.0 (with `known_tick`), for the data an update carries.
fn legacy_claim_statement(p: &str) -> String {
    format!(
        "SELECT worker_id FROM idgen_registry_claim('{p}n1', '{p}inc1', '{SECRET}', 'sys', 1, NULL::integer, \
         1704067200000::bigint, 10, 12, 1, 60000, 1000, 0::float8, 5432, 0::bigint)"
    )
}

/// The scenarios a finding was made in, `all` when in every one of `total`.
fn in_scenarios(scenarios: &[&str], total: usize) -> String {
    if scenarios.len() == total {
        format!("all {total} scenarios")
    } else {
        scenarios.join("; ")
    }
}

/// What one scenario found.
#[derive(Default)]
struct Findings {
    /// `create`, `from 0.5.0`, `decoys before 0.5.0` (see [`Kind`]).
    short: String,
    failures: Vec<String>,
    bindings: Vec<String>,
    decoy_calls: i64,
    /// `public.decoy_calls` when the scenario's findings start.
    calls_before: i64,
    ran: Vec<Ran>,
    app_superuser: bool,
}

impl Findings {
    fn clean(&self) -> bool {
        self.failures.is_empty()
            && self.bindings.is_empty()
            && self.decoy_calls == 0
            && self.ran.is_empty()
            && !self.app_superuser
    }
}

/// References from the extension's objects (members, and the defaults, constraints, rules,
/// indexes, triggers and owned sequences of member relations, found through their automatic
/// and internal dependencies) to a function or operator outside pg_catalog that is not a
/// member of the extension.
const CAPTURED_BINDINGS: &str = "
WITH RECURSIVE ext AS (SELECT oid FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'idgen'),
members AS (
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, ext
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) ext.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'),
owned (classid, objid) AS (
    SELECT classid, objid FROM members
    UNION
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend d
      JOIN owned o ON d.refclassid OPERATOR(pg_catalog.=) o.classid AND d.refobjid OPERATOR(pg_catalog.=) o.objid
     WHERE d.deptype OPERATOR(pg_catalog.=) ANY ('{a,i}'::\"char\"[])),
foreign_objects AS (
    SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass::oid AS classid, p.oid FROM pg_catalog.pg_proc p
     WHERE p.pronamespace OPERATOR(pg_catalog.<>) 'pg_catalog'::pg_catalog.regnamespace
    UNION ALL
    SELECT 'pg_catalog.pg_operator'::pg_catalog.regclass::oid, o.oid FROM pg_catalog.pg_operator o
     WHERE o.oprnamespace OPERATOR(pg_catalog.<>) 'pg_catalog'::pg_catalog.regnamespace)
SELECT DISTINCT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
       OPERATOR(pg_catalog.||) ' -> '
       OPERATOR(pg_catalog.||) pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0)
  FROM pg_catalog.pg_depend d
  JOIN owned o ON o.classid OPERATOR(pg_catalog.=) d.classid AND o.objid OPERATOR(pg_catalog.=) d.objid
  JOIN foreign_objects f ON f.classid OPERATOR(pg_catalog.=) d.refclassid AND f.oid OPERATOR(pg_catalog.=) d.refobjid
 WHERE NOT EXISTS (SELECT FROM members m
                    WHERE m.classid OPERATOR(pg_catalog.=) d.refclassid
                      AND m.objid OPERATOR(pg_catalog.=) d.refobjid)
 ORDER BY 1";

/// A decoy's run, as the server log tells it.
struct Ran {
    /// `decoy <signature> ran as <role>`.
    what: String,
    /// The frames of the CONTEXT that called the decoy, innermost first.
    chain: Vec<String>,
    /// The statement the client sent.
    statement: String,
}

/// Does a CONTEXT continuation line start a new frame (rather than go on with a statement)?
fn starts_frame(text: &str) -> bool {
    [
        "PL/pgSQL function",
        "SQL statement",
        "SQL function",
        "SQL expression",
        "extension script file",
    ]
    .iter()
    .any(|p| text.starts_with(p))
}

/// Shortens `s` to `n` characters, whitespace collapsed.
fn squeeze(s: &str, n: usize) -> String {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > n {
        format!("{}...", s.chars().take(n).collect::<String>())
    } else {
        s
    }
}

/// The decoy runs in database `db` that a stretch of the server log records (each line names
/// its database: see `log_line_prefix` in the test; a server writes each message, its
/// CONTEXT and STATEMENT lines included, in one piece).
fn decoys_in_log(log: &str, db: &str) -> Vec<Ran> {
    let lines: Vec<&str> = log.lines().collect();
    let warning = format!("db={db}: WARNING:  ");
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find(&warning) else {
            continue;
        };
        let what = line[at + warning.len()..].to_owned();
        if !what.starts_with("decoy ") {
            continue;
        }
        let mut frames: Vec<String> = Vec::new();
        let mut statement: Option<String> = None;
        for next in &lines[i + 1..] {
            if let Some(p) = next.find("STATEMENT:  ") {
                statement = Some(next[p + 12..].to_owned());
            } else if let Some(p) = next.find("CONTEXT:  ") {
                frames.push(next[p + 10..].to_owned());
            } else if let Some(rest) = next.strip_prefix('\t') {
                match &mut statement {
                    Some(st) => {
                        st.push(' ');
                        st.push_str(rest);
                    }
                    None if starts_frame(rest) || frames.is_empty() => frames.push(rest.to_owned()),
                    None => {
                        let last = frames.last_mut().unwrap();
                        last.push(' ');
                        last.push_str(rest);
                    }
                }
            } else {
                break;
            }
        }
        out.push(Ran {
            what,
            // The first frame is the decoy's own RAISE.
            chain: frames.iter().skip(1).map(|f| squeeze(f, 160)).collect(),
            statement: squeeze(&statement.unwrap_or_default(), 160),
        });
    }
    out
}

struct Scenario<'a> {
    /// Print the statements that failed (once is enough: the scenarios run the same ones).
    verbose: bool,
    c: &'a Cluster,
    decoys: &'a Decoys,
    db: String,
    /// The database's owner, who plants the decoys: a role of its own per [`Slot`], so that
    /// what a decoy does to it is this scenario's.
    owner: &'a str,
    /// A database where `owner` planted every decoy (see [`plant_template`]).
    template: &'a str,
}

/// How idgen comes to its current version in a scenario.
enum Kind {
    /// Decoys, then `CREATE EXTENSION idgen`.
    Create,
    /// `CREATE EXTENSION idgen VERSION` this one, decoys, `ALTER EXTENSION idgen UPDATE`.
    Update(String),
    /// Decoys, `CREATE EXTENSION idgen VERSION` this one, `ALTER EXTENSION idgen UPDATE`; the
    /// findings count from the update on. (PostgreSQL builds the old version from 0.0.9 and
    /// the update scripts of this checkout, so this is not an install made by the old
    /// release's own scripts.)
    UpdateCaptured(String),
}

/// Data for the update scripts to carry: a segment, a serial, a lease and a regression (with
/// the functions of the version installed; 0.9.0 turns an open regression into an open
/// recovery).
fn seed(client: &mut Client) {
    for sql in [
        "SELECT segment_create('seed_seg', start => 1, step => 10)".to_owned(),
        "SELECT segment_nextval('seed_seg')".to_owned(),
        "SELECT serial_create('seed_inv', 'INV-{seq:06}')".to_owned(),
        "SELECT serial_nextval('seed_inv')".to_owned(),
        legacy_claim_statement("seed_"),
        "SELECT idgen_registry_report_regression(1, NULL::text, 1::bigint, 2::bigint, 'seed_n1', 'seed_inc1')".to_owned(),
    ] {
        let _ = attempt(client, &sql);
    }
}

/// Plants the decoys as `owner` in `db` (which `owner` owns), in one batch.
fn plant(c: &Cluster, decoys: &Decoys, db: &str, owner: &str) -> Result<(), String> {
    c.connect_as(db, owner)
        .batch_execute(&decoys.batch(owner))
        .map_err(|e| format!("planting the decoys failed: {e}"))
}

/// Panics unless `db` holds at least as many functions in `public` as there are decoys.
fn check_planted(c: &Cluster, decoys: &Decoys, db: &str) {
    let planted: i64 = checker(c, db)
        .query_one(
            "SELECT count(*) FROM pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) 'public'::regnamespace",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        planted as usize >= decoys.functions,
        "{db}: {planted} functions in public, {} decoys planned",
        decoys.functions
    );
}

/// Creates database `template`, owned by `owner`, with every decoy planted by `owner`: the
/// scenarios that plant the decoys before idgen is installed start from a copy of it (`CREATE
/// DATABASE ... TEMPLATE` copies the catalogs as they are, the decoys' owner included), which
/// takes a fraction of the time planting takes.
fn plant_template(c: &Cluster, decoys: &Decoys, template: &str, owner: &str) {
    let started = Instant::now();
    c.connect("postgres")
        .batch_execute(&format!("CREATE DATABASE {template} OWNER {owner}"))
        .unwrap();
    plant(c, decoys, template, owner).unwrap_or_else(|e| panic!("{template}: {e}"));
    check_planted(c, decoys, template);
    println!(
        "  {template}: decoys planted by {owner} in {:?}",
        started.elapsed()
    );
}

/// What a scenario runs with: its owner role and the template of that role's decoys. The
/// scenarios run on a few slots side by side, one at a time on each.
struct Slot {
    owner: String,
    template: String,
}

/// How long each phase of a scenario took, printed at its end.
struct Laps {
    last: Instant,
    laps: Vec<String>,
}

impl Laps {
    fn new() -> Laps {
        Laps {
            last: Instant::now(),
            laps: Vec::new(),
        }
    }

    fn lap(&mut self, phase: &str) {
        let now = Instant::now();
        self.laps
            .push(format!("{phase} {:.1}s", (now - self.last).as_secs_f64()));
        self.last = now;
    }
}

impl Scenario<'_> {
    fn run(&self, kind: &Kind, current: &str) -> Findings {
        let started = Instant::now();
        let mut laps = Laps::new();
        let mut f = Findings {
            short: match kind {
                Kind::Create => "create".to_owned(),
                Kind::Update(v) => format!("from {v}"),
                Kind::UpdateCaptured(v) => format!("decoys before {v}"),
            },
            ..Findings::default()
        };
        let mut log_from = self.c.log().len();
        // Where the decoys come before idgen: a copy of the owner's template, decoys planted.
        let create = match kind {
            Kind::Update(_) => format!("CREATE DATABASE {} OWNER {}", self.db, self.owner),
            Kind::Create | Kind::UpdateCaptured(_) => format!(
                "CREATE DATABASE {} TEMPLATE {} OWNER {}",
                self.db, self.template, self.owner
            ),
        };
        self.c.connect("postgres").batch_execute(&create).unwrap();
        if !matches!(kind, Kind::Update(_)) {
            check_planted(self.c, self.decoys, &self.db);
        }
        laps.lap("database");
        let mut su = self.c.connect(&self.db);
        let step = match kind {
            Kind::Create => "CREATE EXTENSION idgen",
            Kind::Update(v) => {
                su.batch_execute(&format!("CREATE EXTENSION idgen VERSION '{v}'"))
                    .unwrap_or_else(|e| panic!("CREATE EXTENSION idgen VERSION '{v}': {e}"));
                seed(&mut su);
                laps.lap("install");
                match plant(self.c, self.decoys, &self.db, self.owner) {
                    Ok(()) => check_planted(self.c, self.decoys, &self.db),
                    Err(e) => f.failures.push(e),
                }
                laps.lap("plant");
                "ALTER EXTENSION idgen UPDATE"
            }
            Kind::UpdateCaptured(v) => {
                // Captured now, decoys run: the findings start with the update.
                if let Err(e) = attempt(&mut su, &format!("CREATE EXTENSION idgen VERSION '{v}'")) {
                    f.failures
                        .push(format!("CREATE EXTENSION idgen VERSION '{v}' failed: {e}"));
                    self.collect(&mut f, log_from);
                    return f;
                }
                seed(&mut su);
                self.c
                    .connect("postgres")
                    .batch_execute(&format!("ALTER ROLE {} NOSUPERUSER", self.owner))
                    .unwrap();
                f.calls_before = self.decoy_calls();
                log_from = self.c.log().len();
                laps.lap("install");
                "ALTER EXTENSION idgen UPDATE"
            }
        };
        match attempt(&mut su, step) {
            Ok(_) => {
                laps.lap(step);
                let version: String = checker(self.c, &self.db)
                    .query_one(
                        "SELECT extversion FROM pg_extension WHERE extname OPERATOR(pg_catalog.=) 'idgen'",
                        &[],
                    )
                    .unwrap()
                    .get(0);
                if version != current {
                    f.failures.push(format!("{step} ended at {version}"));
                }
                self.exercise_all();
                laps.lap("exercise");
            }
            Err(e) => f.failures.push(format!("{step} failed: {e}")),
        }
        self.collect(&mut f, log_from);
        laps.lap("collect");
        println!(
            "  {} ({}) in {:.1}s: {}",
            self.db,
            f.short,
            started.elapsed().as_secs_f64(),
            laps.laps.join(", ")
        );
        f
    }

    /// How often the decoys ran in this database so far.
    fn decoy_calls(&self) -> i64 {
        checker(self.c, &self.db)
            .query_one(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.decoy_calls",
                &[],
            )
            .map(|r| r.get(0))
            .unwrap_or(0)
    }

    /// Objects the calls need that are not idgen's: a table with a serial column and one with
    /// an identity column, and the roles' memberships.
    fn prepare(&self) {
        let mut su = self.c.connect(&self.db);
        for sql in [
            "CREATE TABLE public.capture_orders (id bigserial PRIMARY KEY, note text)",
            "CREATE TABLE public.capture_orders_ident (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY)",
            "GRANT idgen_admin TO capture_admin",
            "GRANT idgen_registry TO capture_node",
        ] {
            if let Err(e) = attempt(&mut su, sql) {
                println!("  {}: {sql}: {e}", self.db);
            }
        }
    }

    /// Calls every idgen function and reads every view as `role` (`None`: the superuser).
    fn exercise(&self, role: Option<&str>, tag: &str, covered: &mut BTreeSet<String>) {
        let mut client = match role {
            Some(r) => self.c.connect_as(&self.db, r),
            None => self.c.connect(&self.db),
        };
        client
            .batch_execute("SET statement_timeout = '30s'; SET lock_timeout = '10s'")
            .unwrap();
        let mut errors = Vec::new();
        // A node's first hello records the registry's identity; a recovery left open (by the
        // update, from a regression of 0.8) is reported to and completed; after the registry's
        // wait (a longest lease after its start or a recovery) the node claims. Roles that may
        // not say hello skip the wait (their claims are refused anyway).
        let mut wait = None;
        for sql in [
            hello_statement(tag),
            format!("SELECT idgen_registry_report_marks('{tag}n1', '{tag}inc1', NULL::integer, NULL::bigint, ARRAY[]::text[], ARRAY[]::bigint[], 0::bigint)"),
            "SELECT * FROM idgen_registry_recover()".to_owned(),
            hello_statement(tag),
        ] {
            wait = run(&mut client, &sql, covered, &mut errors)
                .and_then(|rows| rows.into_iter().next())
                .and_then(|row| row.into_iter().next().flatten())
                .and_then(|s| s.parse::<f64>().ok());
        }
        // A longer wait (a registry that answered a lease of a minute before its update) would
        // still refuse the claim after any sleep worth taking: then the claim goes on at once.
        if let Some(secs) = wait.filter(|s| *s > 0.0 && *s <= 10.0) {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs + 0.05));
        }
        let worker = run(&mut client, &claim_statement(tag), covered, &mut errors)
            .and_then(|rows| rows.into_iter().next())
            .and_then(|row| row.into_iter().next().flatten())
            .unwrap_or_else(|| "1".to_owned());
        for sql in exercise_statements(tag, &worker) {
            run(&mut client, &sql, covered, &mut errors);
        }
        // Every view of the extension.
        let mut check = checker(self.c, &self.db);
        let views: Vec<String> = check
            .query(
                "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_depend d
                     ON d.classid OPERATOR(pg_catalog.=) 'pg_class'::regclass AND d.objid OPERATOR(pg_catalog.=) c.oid
                  AND d.deptype OPERATOR(pg_catalog.=) 'e'
                  AND d.refobjid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_extension WHERE extname OPERATOR(pg_catalog.=) 'idgen')
                  WHERE c.relkind OPERATOR(pg_catalog.=) ANY ('{v,m}'::\"char\"[]) ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        for v in views {
            run(
                &mut client,
                &format!("SELECT * FROM {v}"),
                covered,
                &mut errors,
            );
        }
        // Any function of the extension the statements above do not name: once, with NULLs.
        let functions: Vec<(String, String)> = check
            .query(
                "SELECT p.proname::text, pg_catalog.array_to_string(ARRAY(
                        SELECT 'NULL::' OPERATOR(pg_catalog.||) pg_catalog.format_type(a.t, NULL)
                          FROM pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, n) ORDER BY a.n), ', ')
                   FROM pg_proc p JOIN pg_depend d
                     ON d.classid OPERATOR(pg_catalog.=) 'pg_proc'::regclass AND d.objid OPERATOR(pg_catalog.=) p.oid
                  AND d.deptype OPERATOR(pg_catalog.=) 'e'
                  AND d.refobjid OPERATOR(pg_catalog.=) (SELECT oid FROM pg_extension WHERE extname OPERATOR(pg_catalog.=) 'idgen')
                  ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let mut generic = Vec::new();
        for (name, args) in functions {
            if !covered.contains(&name) {
                generic.push(name.clone());
                let sql = format!("SELECT * FROM {}({args})", ident(&name));
                run(&mut client, &sql, covered, &mut errors);
            }
        }
        if !generic.is_empty() {
            println!(
                "    {}: called with NULLs only: {}",
                self.db,
                generic.join(", ")
            );
        }
        // A call refused for want of a background worker slot (53400: the allocator could not
        // start) never ran the path it was to exercise; failures are allowed, that one is not.
        let starved: Vec<&String> = errors
            .iter()
            .filter(|e| e.contains("-> 53400: could not start"))
            .collect();
        assert!(
            starved.is_empty(),
            "{}: calls refused for want of a worker slot, raise max_worker_processes: {starved:?}",
            self.db
        );
        println!(
            "    {} as {}: {} statements failed (allowed)",
            self.db,
            role.unwrap_or("postgres"),
            errors.len()
        );
        if self.verbose {
            for e in &errors {
                println!("        {e}");
            }
        }
    }

    /// Exercises as every role.
    fn exercise_all(&self) {
        self.prepare();
        let mut covered = BTreeSet::new();
        for (role, tag) in [
            (None, "su_"),
            (Some("capture_admin"), "adm_"),
            (Some("capture_node"), "node_"),
            (Some("capture_plain"), "pl_"),
        ] {
            self.exercise(role, tag, &mut covered);
        }
        // Rows in the tables, once more (defaults and CHECKs fire on INSERT and UPDATE).
        let mut su = self.c.connect(&self.db);
        for sql in [
            "BEGIN; INSERT INTO idgen_serial (name, format) VALUES ('capture_direct', 'D{seq}'); ROLLBACK",
            "BEGIN; UPDATE idgen_registry_regression SET resolved_at = resolved_at; ROLLBACK",
            // Rows as a dump restores them (the legacy regression table's CHECK among them).
            "BEGIN; INSERT INTO idgen_registry_regression (segment, registry_value, node_value, reported_by) VALUES ('capture', 1, 2, 'a dump'); ROLLBACK",
            "BEGIN; INSERT INTO idgen_registry_node VALUES ('capture-n', 'i', 'r', NULL, pg_catalog.now(), pg_catalog.now()); ROLLBACK",
            "BEGIN; INSERT INTO idgen_registry_recovery_report (node_name, recovery_since, reported_at, reported_by, incarnation, names, marks, revision) VALUES ('capture-n', pg_catalog.now(), pg_catalog.now(), 'r', 'i', '{a}', '{1}', 1); ROLLBACK",
        ] {
            let _ = attempt(&mut su, sql);
        }
        let _ = attempt(&mut su, "ROLLBACK");
    }

    fn collect(&self, f: &mut Findings, log_from: usize) {
        let mut check = checker(self.c, &self.db);
        f.bindings = check
            .query(CAPTURED_BINDINGS, &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        f.decoy_calls = self.decoy_calls() - f.calls_before;
        f.app_superuser = check
            .query_one(
                "SELECT rolsuper FROM pg_roles WHERE rolname OPERATOR(pg_catalog.=) $1",
                &[&self.owner],
            )
            .unwrap()
            .get(0);
        let log = self.c.log();
        f.ran = decoys_in_log(log.get(log_from..).unwrap_or(""), &self.db);
    }
}

#[test]
fn no_name_an_idgen_script_uses_can_be_captured_from_public() {
    let started = Instant::now();
    install_old_script();
    let c = Cluster::start(
        "capture",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 1",
            "max_locks_per_transaction = 256",
            // An allocator worker for each database that uses segments: one per scenario (with
            // fewer, the segment functions of the later scenarios stop at 53400 and never run).
            "max_worker_processes = 64",
            // A registry that grants (DURABLE), so that the registry's functions run through.
            "fsync = on",
            "idgen.registry_single_server = on",
            "idgen.registry_max_lease = 2s",
            // The decoys' WARNINGs with the statement that set them off, and the database they
            // ran in (the scenarios run side by side, each in a database of its own).
            "log_min_error_statement = warning",
            "log_line_prefix = '%m [%p] db=%d: '",
        ],
    );
    let slots: Vec<Slot> = (0..SLOTS)
        .map(|k| Slot {
            owner: format!("app_{k}"),
            template: format!("capture_tpl_{k}"),
        })
        .collect();
    let mut admin = checker(&c, "postgres");
    for role in slots.iter().map(|s| s.owner.as_str()).chain([
        "capture_admin",
        "capture_node",
        "capture_plain",
    ]) {
        admin
            .batch_execute(&format!("CREATE ROLE {role} LOGIN"))
            .unwrap();
    }
    let current: String = admin
        .query_one(
            "SELECT default_version FROM pg_available_extensions WHERE name OPERATOR(pg_catalog.=) 'idgen'",
            &[],
        )
        .unwrap()
        .get(0);
    let mut earlier: Vec<String> = admin
        .query(
            "SELECT version FROM pg_available_extension_versions
              WHERE name OPERATOR(pg_catalog.=) 'idgen' AND version OPERATOR(pg_catalog.<>) $1",
            &[&current],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    earlier.sort_by_key(|v| {
        v.split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    println!("current version {current}; earlier versions {earlier:?}");
    assert!(
        earlier.len() >= 7 && earlier.contains(&"0.0.9".to_owned()),
        "the earlier versions: {earlier:?}"
    );

    let decoys = derive_decoys(&c, &slots[0].owner);
    println!(
        "derived in {:?}: names {:?}\nsymbols {:?}",
        started.elapsed(),
        decoys.names,
        decoys.symbols
    );
    assert!(
        decoys.functions + decoys.operators >= 2000,
        "only {} function and {} operator decoys: the derivation from the scripts is broken",
        decoys.functions,
        decoys.operators
    );

    // (a) Decoys first, then CREATE EXTENSION; (b) every earlier version installed before the
    // decoys, updated after; (c) every earlier version installed after the decoys (captured,
    // as every install of today's scripts into a database like this is), updated: the update
    // must leave nothing bound to them, and nothing may run them from the update on.
    let mut kinds = vec![Kind::Create];
    kinds.extend(earlier.iter().map(|v| Kind::Update(v.clone())));
    kinds.extend(earlier.iter().map(|v| Kind::UpdateCaptured(v.clone())));
    std::thread::scope(|s| {
        for slot in &slots {
            let (c, decoys) = (&c, &decoys);
            s.spawn(move || plant_template(c, decoys, &slot.template, &slot.owner));
        }
    });
    let scenario = |i: usize, kind: &Kind, slot: &Slot| {
        let f = Scenario {
            verbose: i == 0,
            c: &c,
            decoys: &decoys,
            db: format!("capture_{i}"),
            owner: &slot.owner,
            template: &slot.template,
        }
        .run(kind, &current);
        // Undo what a decoy did, for the slot's next scenario.
        c.connect("postgres")
            .batch_execute(&format!("ALTER ROLE {} NOSUPERUSER", slot.owner))
            .unwrap();
        f
    };
    // The first alone: its CREATE EXTENSION creates the roles idgen_admin and idgen_registry,
    // which the installs after it find (two creating them at once would collide). Then the
    // others, one per slot at a time: each in its own database, with its own owner (the role a
    // decoy makes a superuser), its decoy runs told apart by the database in the log.
    let mut found: Vec<Option<Findings>> = kinds.iter().map(|_| None).collect();
    found[0] = Some(scenario(0, &kinds[0], &slots[0]));
    let found = Mutex::new(found);
    let next = AtomicUsize::new(1);
    std::thread::scope(|s| {
        for slot in &slots {
            let (kinds, found, next, scenario) = (&kinds, &found, &next, &scenario);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(kind) = kinds.get(i) else { break };
                let f = scenario(i, kind, slot);
                found.lock().unwrap()[i] = Some(f);
            });
        }
    });
    let all: Vec<Findings> = found
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|f| f.expect("every scenario ran"))
        .collect();

    // A process without a client (a background worker such as the segment allocator, which
    // runs as the bootstrap superuser; autovacuum) logs `db=: `: a decoy it ran is in no
    // scenario's lines, so those are looked for over the whole run. And every database's decoy
    // counter once more, now: a worker may have run a decoy after its scenario collected.
    let stray = decoys_in_log(&c.log(), "");
    let mut late = Vec::new();
    for (i, f) in all.iter().enumerate() {
        let now: i64 = checker(&c, &format!("capture_{i}"))
            .query_one(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.decoy_calls",
                &[],
            )
            .map(|r| r.get(0))
            .unwrap_or(0);
        if now != f.calls_before + f.decoy_calls {
            late.push(format!(
                "{}: decoy_calls {now} at the end, {} when it collected",
                f.short,
                f.calls_before + f.decoy_calls
            ));
        }
    }

    // One list of the bindings and one of the decoys that ran, each with the scenarios it was
    // found in: the work list of whoever fixes the scripts.
    let mut report = format!(
        "\nscenarios (current version {current}): create = decoys, then CREATE EXTENSION idgen; \
         from V = CREATE EXTENSION idgen VERSION 'V', decoys, ALTER EXTENSION idgen UPDATE; \
         decoys before V = decoys, CREATE EXTENSION idgen VERSION 'V', ALTER EXTENSION idgen \
         UPDATE (counted from the update on)\n"
    );
    let mut bindings: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in &all {
        for b in &f.bindings {
            bindings.entry(b).or_default().push(&f.short);
        }
    }
    if !bindings.is_empty() {
        report.push_str(&format!(
            "\n{} idgen objects bound to a function or operator outside pg_catalog (object -> referenced):\n",
            bindings.len()
        ));
        for (b, scenarios) in &bindings {
            report.push_str(&format!(
                "  {b}\n      in: {}\n",
                in_scenarios(scenarios, all.len())
            ));
        }
    }
    #[derive(Default)]
    struct Seen<'a> {
        times: usize,
        scenarios: BTreeSet<&'a str>,
        statements: BTreeSet<&'a str>,
    }
    let mut ran: BTreeMap<(&str, &[String]), Seen> = BTreeMap::new();
    for f in &all {
        for r in &f.ran {
            let seen = ran.entry((&r.what, &r.chain)).or_default();
            seen.times += 1;
            seen.scenarios.insert(&f.short);
            seen.statements.insert(&r.statement);
        }
    }
    if !ran.is_empty() {
        report.push_str("\ndecoys that ran (server log), with who called them:\n");
        for ((what, chain), seen) in &ran {
            report.push_str(&format!("  {what} ({} times)\n", seen.times));
            for (i, frame) in chain.iter().enumerate() {
                let lead = if i == 0 { "from:" } else { "  <-" };
                report.push_str(&format!("      {lead} {frame}\n"));
            }
            for st in seen.statements.iter().take(3) {
                report.push_str(&format!("      statement: {st}\n"));
            }
            if seen.statements.len() > 3 {
                report.push_str(&format!(
                    "      ... and {} more statements\n",
                    seen.statements.len() - 3
                ));
            }
            let scenarios: Vec<&str> = seen.scenarios.iter().copied().collect();
            report.push_str(&format!(
                "      in: {}\n",
                in_scenarios(&scenarios, all.len())
            ));
        }
    }
    report.push_str("\nper scenario:\n");
    for f in &all {
        report.push_str(&format!(
            "  {}: {}; decoy_calls advanced {} times; {} decoy WARNINGs; {} bindings; app superuser: {}\n",
            f.short,
            if f.clean() { "clean" } else { "CAPTURED" },
            f.decoy_calls,
            f.ran.len(),
            f.bindings.len(),
            f.app_superuser
        ));
        for e in &f.failures {
            report.push_str(&format!("      failure: {e}\n"));
        }
    }
    println!(
        "{} decoys planted per database ({} functions, {} operators); {} scenarios in {:?}",
        decoys.functions + decoys.operators,
        decoys.functions,
        decoys.operators,
        all.len(),
        started.elapsed()
    );
    for r in &stray {
        report.push_str(&format!(
            "\ndecoy run by a process without a client (no database in its log line): {} from {:?}\n",
            r.what, r.chain
        ));
    }
    for l in &late {
        report.push_str(&format!("\ndecoy run after its scenario collected: {l}\n"));
    }
    assert!(
        all.iter().all(Findings::clean) && stray.is_empty() && late.is_empty(),
        "names the idgen scripts use were captured from public:{report}"
    );
}

/// A decoy's WARNING from a process without a client connection (`%d` is empty for background
/// workers and autovacuum) is found by the whole-run search, not by any scenario's.
#[test]
fn a_decoy_run_by_a_background_worker_is_found_though_its_line_names_no_database() {
    let log = "2026-11-28 04:00:00.000 UTC [42] db=: WARNING:  decoy public.length(integer) ran as postgres\n\
               2026-11-28 04:00:00.000 UTC [42] db=: CONTEXT:  PL/pgSQL function public.length(integer) line 3 at RAISE\n\
               2026-11-28 04:00:00.001 UTC [43] db=capture_3: LOG:  something else\n";
    let stray = decoys_in_log(log, "");
    assert_eq!(stray.len(), 1, "{log}");
    assert!(stray[0].what.starts_with("decoy public.length"));
    assert!(decoys_in_log(log, "capture_3").is_empty());
}
