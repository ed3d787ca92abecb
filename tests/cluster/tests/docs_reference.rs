//! The reference pages of the docs site against the code, in both directions: a function, a
//! setting or an SQLSTATE the code has and the page lacks fails, and so does one the page names
//! that the code no longer has. Reads files only; no server.
//!
//! - `docs/reference/functions.md`: the functions are the `CREATE FUNCTION` statements of the
//!   install script of this version (`sql/install/idgen--<version>.sql`, which a fresh
//!   `CREATE EXTENSION` runs), less the ones not for people: those whose `COMMENT ON FUNCTION`
//!   begins with `Internal:` (helpers of views, the event trigger) or `Registry:` (what a node
//!   calls on its registry over its own connection). `Registry (operator):` and
//!   `Registry (superuser):` functions are for people, and are checked. A function is documented
//!   when its name is a word of a table row (`| ... |`) of the page. Every `name(` on the page
//!   whose name begins as idgen's do (`snowflake_`, `segment_`, `serial_`, `sqids_`, `idgen_`)
//!   must be a function the install script creates or lists (`-- idgen::path::name`, among them
//!   the ones with `sql = false`, which other SQL declares).
//! - `docs/reference/settings.md`: the settings are the `name: c"idgen.…"` entries of
//!   `src/guc/table.rs`; each must be a word of a table row of the page, and every `idgen.name`
//!   on the three reference pages must be one of them (`idgen.name(`, a schema-qualified call,
//!   excepted).
//! - `docs/reference/errors.md`: the SQLSTATEs idgen raises are the `ERRCODE_*` constants of
//!   `src/**/*.rs` (outside comments; `ERRCODE_WARNING` and `ERRCODE_INTERNAL_ERROR` excepted: a
//!   warning, and the code no failure of idgen's may carry) and the `ERRCODE = '…'` of the
//!   install script's `RAISE`s, by name or by code; names map to codes through PostgreSQL's
//!   `utils/errcodes.h` (`pg_config --includedir-server` of `IDGEN_PG_BIN`'s installation).
//!   Each must be in the first column of the page's table headed `| SQLSTATE |`; every code of
//!   that column must be one of them, or one of [`RAISED_BY_POSTGRESQL`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use idgen_cluster_tests::pg_bin;

/// SQLSTATEs the error table may list that PostgreSQL or libpq raise on idgen's paths, not idgen.
const RAISED_BY_POSTGRESQL: &[(&str, &str)] = &[
    ("08001", "the registry cannot be reached (libpq, relayed)"),
    (
        "08006",
        "the connection to the registry broke (libpq, relayed)",
    ),
    (
        "42883",
        "the registry database has no idgen (its functions are undefined)",
    ),
    (
        "55P02",
        "SET of an idgen setting that only postgresql.conf or ALTER SYSTEM change",
    ),
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {relative}: {e}"))
}

/// A reference page, from `IDGEN_DOCS_DIR` (another checkout's docs/) when set.
fn page(name: &str) -> (String, String) {
    let relative = format!("reference/{name}");
    let text = match std::env::var_os("IDGEN_DOCS_DIR") {
        Some(dir) => std::fs::read_to_string(Path::new(&dir).join(&relative))
            .unwrap_or_else(|e| panic!("read {relative} under IDGEN_DOCS_DIR: {e}")),
        None => read(&format!("docs/{relative}")),
    };
    (format!("docs/{relative}"), text)
}

fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `text` with no word character (letter, digit, `_`) on either side.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}

/// The words (runs of letters, digits and `_`) of `text` that are followed by `(`.
fn calls(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if is_word_char(bytes[i] as char) && (i == 0 || !is_word_char(bytes[i - 1] as char)) {
            let start = i;
            while i < bytes.len() && is_word_char(bytes[i] as char) {
                i += 1;
            }
            if bytes.get(i) == Some(&b'(') {
                out.insert(text[start..i].to_owned());
            }
        } else {
            i += 1;
        }
    }
    out
}

/// The lines of `text`'s tables (lines starting with `|`), joined.
fn table_rows(text: &str) -> String {
    text.lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The version of the extension the build installs (`version` of the root Cargo.toml).
fn version() -> String {
    read("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("version = \"...\" in Cargo.toml")
        .to_owned()
}

fn install_script() -> (String, String) {
    let name = format!("sql/install/idgen--{}.sql", version());
    let text = read(&name);
    (name, text)
}

/// An SQL name as written (`"snowflake_nextval"`, `@extschema@.segment_status`), bare.
fn sql_name(written: &str) -> String {
    let name = written.trim();
    let name = name.strip_prefix("@extschema@.").unwrap_or(name);
    name.trim_matches('"').to_owned()
}

/// Every function the install script creates.
fn created_functions(script: &str) -> BTreeSet<String> {
    script
        .lines()
        .filter(|l| {
            let words: Vec<&str> = l.split_whitespace().take(4).collect();
            words[..words.len().min(2)] == ["CREATE", "FUNCTION"]
                || words == ["CREATE", "OR", "REPLACE", "FUNCTION"]
        })
        .filter_map(|l| {
            let at = l.find("FUNCTION ")?;
            let rest = &l[at + "FUNCTION ".len()..];
            Some(sql_name(&rest[..rest.find('(')?]))
        })
        .collect()
}

/// Every function of the library that the install script lists by its Rust path
/// (`-- idgen::snowflake::snowflake_nextval`), created or skipped (`#[pg_extern(sql = false)]`,
/// declared elsewhere, as the benchmark's `idgen_call_floor`).
fn listed_functions(script: &str) -> BTreeSet<String> {
    script
        .lines()
        .filter_map(|l| l.strip_prefix("-- idgen::"))
        .filter_map(|path| path.trim().rsplit("::").next())
        .map(str::to_owned)
        .collect()
}

/// The functions whose `COMMENT ON FUNCTION` marks them as not for people.
fn internal_functions(script: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in script.match_indices("COMMENT ON FUNCTION ") {
        let rest = &script[at + "COMMENT ON FUNCTION ".len()..];
        let Some(paren) = rest.find('(') else {
            continue;
        };
        let name = sql_name(&rest[..paren]);
        let Some(quote) = rest.find('\'') else {
            continue;
        };
        let comment = &rest[quote + 1..];
        if comment.starts_with("Internal:") || comment.starts_with("Registry:") {
            out.insert(name);
        }
    }
    out
}

/// The `idgen.*` settings of `src/guc/table.rs`.
fn settings() -> BTreeSet<String> {
    let table = read("src/guc/table.rs");
    let found: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.trim().strip_prefix("name: c\""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_owned)
        .collect();
    assert!(
        found.len() >= 20 && found.iter().all(|s| s.starts_with("idgen.")),
        "src/guc/table.rs: `name: c\"idgen....\"` entries not found as expected: {found:?}"
    );
    found
}

/// `idgen.<name>` mentions of `text` (a name of letters, digits and `_` after `idgen.`).
fn setting_mentions(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("idgen.") {
        if text[..at].chars().next_back().is_some_and(is_word_char) {
            continue;
        }
        let rest = &text[at + "idgen.".len()..];
        let len = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
        // `idgen.snowflake_nextval()` is a call qualified by idgen's schema, not a setting.
        let call = rest[len..].starts_with('(');
        if len > 0 && rest.as_bytes()[0].is_ascii_lowercase() && !call {
            out.insert(format!("idgen.{}", &rest[..len]));
        }
    }
    // The library and control files, not settings.
    out.remove("idgen.so");
    out.remove("idgen.control");
    out
}

/// PostgreSQL's `ERRCODE_*` names with their SQLSTATEs, from `utils/errcodes.h`.
fn errcodes() -> Vec<(String, String)> {
    let pg_config = format!("{}/pg_config", pg_bin());
    let include = std::process::Command::new(&pg_config)
        .arg("--includedir-server")
        .output()
        .unwrap_or_else(|e| panic!("{pg_config}: {e}"));
    let dir = String::from_utf8(include.stdout).unwrap();
    let header = Path::new(dir.trim()).join("utils/errcodes.h");
    let text = std::fs::read_to_string(&header)
        .unwrap_or_else(|e| panic!("{header:?} (PostgreSQL's server headers): {e}"));
    // #define ERRCODE_WARNING MAKE_SQLSTATE('0','1','0','0','0')
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("#define ERRCODE_")?;
            let (name, def) = rest.split_once(char::is_whitespace)?;
            let args = def.trim().strip_prefix("MAKE_SQLSTATE(")?;
            let code: String = args.chars().filter(char::is_ascii_alphanumeric).collect();
            (code.len() == 5).then(|| (name.to_owned(), code))
        })
        .collect()
}

/// The SQLSTATEs idgen raises (see the module's comment), each with where it was found.
fn raised_sqlstates() -> Vec<(String, String)> {
    let codes = errcodes();
    let code_of = |name: &str| -> String {
        codes
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, c)| c.clone())
            .unwrap_or_else(|| panic!("ERRCODE_{name} is not in PostgreSQL's errcodes.h"))
    };
    let mut out = Vec::new();
    for path in idgen_cluster_tests::files_with_extension(&repo_root().join("src"), "rs") {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path
            .strip_prefix(repo_root())
            .unwrap()
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            let code_part = line.split("//").next().unwrap();
            for (at, _) in code_part.match_indices("ERRCODE_") {
                let rest = &code_part[at + "ERRCODE_".len()..];
                let len = rest
                    .find(|c: char| !(c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit()))
                    .unwrap_or(rest.len());
                let name = &rest[..len];
                if name.is_empty() || name == "WARNING" || name == "INTERNAL_ERROR" {
                    continue;
                }
                out.push((code_of(name), format!("{file}:{} ERRCODE_{name}", n + 1)));
            }
        }
    }
    let (script_name, script) = install_script();
    for (n, line) in script.lines().enumerate() {
        let upper = line.to_ascii_uppercase();
        for (at, _) in upper.match_indices("ERRCODE") {
            let rest = line[at + "ERRCODE".len()..].trim_start();
            let Some(rest) = rest.strip_prefix('=') else {
                continue;
            };
            let Some(rest) = rest.trim_start().strip_prefix('\'') else {
                continue;
            };
            let Some(value) = rest.split('\'').next() else {
                continue;
            };
            let is_code = value.len() == 5
                && value
                    .chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase());
            let code = if is_code {
                value.to_owned()
            } else {
                code_of(value)
            };
            out.push((code, format!("{script_name}:{} ERRCODE = '{value}'", n + 1)));
        }
    }
    assert!(out.len() > 20, "too few SQLSTATEs found: {out:?}");
    out
}

/// The SQLSTATEs of the first column of the table headed `| SQLSTATE |` ("57014 / 57P01",
/// "`55000`" and "55000 (XX)" each give their five-character codes).
fn documented_sqlstates(page: &str) -> BTreeSet<String> {
    let table: Vec<&str> = page
        .lines()
        .skip_while(|l| {
            !l.trim_start().starts_with('|')
                || l.split('|').nth(1).map(|c| c.trim().to_ascii_uppercase())
                    != Some("SQLSTATE".to_owned())
        })
        .skip(2)
        .take_while(|l| l.trim_start().starts_with('|'))
        .collect();
    table
        .iter()
        .filter_map(|l| l.split('|').nth(1))
        .flat_map(|cell| {
            cell.split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| {
                    w.len() == 5
                        && w.chars().any(|c| c.is_ascii_digit())
                        && w.chars()
                            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
                })
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_function_for_people_is_in_the_function_reference() {
    let (script_name, script) = install_script();
    let (page_name, page) = page("functions.md");
    let internal = internal_functions(&script);
    let rows = table_rows(&page);
    let all = created_functions(&script);
    assert!(
        all.len() > 30,
        "{script_name}: too few CREATE FUNCTIONs: {all:?}"
    );
    let missing: Vec<&String> = all
        .iter()
        .filter(|f| !internal.contains(*f) && !has_word(&rows, f))
        .collect();
    println!(
        "{} functions, {} internal: {internal:?}",
        all.len(),
        internal.len()
    );
    assert!(
        missing.is_empty(),
        "functions of {script_name} missing from the tables of {page_name}: {missing:?}"
    );
}

#[test]
fn the_function_reference_names_only_functions_that_exist() {
    let (script_name, script) = install_script();
    let (page_name, page) = page("functions.md");
    let mut all = created_functions(&script);
    all.extend(listed_functions(&script));
    let prefixes = ["snowflake_", "segment_", "serial_", "sqids_", "idgen_"];
    let stale: Vec<String> = calls(&page)
        .into_iter()
        .filter(|c| prefixes.iter().any(|p| c.starts_with(p)) && !all.contains(c))
        .collect();
    assert!(
        stale.is_empty(),
        "{page_name} names functions that {script_name} neither creates nor lists: {stale:?}"
    );
}

#[test]
fn every_setting_is_in_the_settings_reference() {
    let (page_name, page) = page("settings.md");
    let rows = table_rows(&page);
    let missing: Vec<String> = settings()
        .into_iter()
        .filter(|s| !has_word(&rows, s))
        .collect();
    assert!(
        missing.is_empty(),
        "settings of src/guc/table.rs missing from the tables of {page_name}: {missing:?}"
    );
}

#[test]
fn the_reference_pages_name_only_settings_that_exist() {
    let settings = settings();
    let mut stale = Vec::new();
    for name in ["settings.md", "functions.md", "errors.md"] {
        let (page_name, page) = page(name);
        for s in setting_mentions(&page) {
            if !settings.contains(&s) {
                stale.push(format!("{page_name}: {s}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "settings that src/guc/table.rs does not define: {stale:?}"
    );
}

#[test]
fn every_sqlstate_idgen_raises_is_in_the_error_reference() {
    let (page_name, page) = page("errors.md");
    let documented = documented_sqlstates(&page);
    assert!(
        !documented.is_empty(),
        "{page_name}: no table headed `| SQLSTATE |`"
    );
    // Each missing code once, with the first place that raises it.
    let mut missing: BTreeMap<String, String> = BTreeMap::new();
    for (code, at) in raised_sqlstates() {
        if !documented.contains(&code) {
            missing.entry(code).or_insert(at);
        }
    }
    assert!(
        missing.is_empty(),
        "SQLSTATEs missing from the table of {page_name}: {missing:?}"
    );
}

#[test]
fn the_error_reference_lists_only_sqlstates_that_are_raised() {
    let (page_name, page) = page("errors.md");
    let raised: BTreeSet<String> = raised_sqlstates().into_iter().map(|(c, _)| c).collect();
    let stale: Vec<String> = documented_sqlstates(&page)
        .into_iter()
        .filter(|c| !raised.contains(c) && !RAISED_BY_POSTGRESQL.iter().any(|(p, _)| p == c))
        .collect();
    assert!(
        stale.is_empty(),
        "{page_name} lists SQLSTATEs that neither idgen raises nor RAISED_BY_POSTGRESQL names: \
         {stale:?}"
    );
}

#[test]
fn the_checks_read_what_they_should() {
    // The function rule: the generators are for people, the registry's node calls are not.
    let (_, script) = install_script();
    let internal = internal_functions(&script);
    let all = created_functions(&script);
    for f in [
        "snowflake_nextval",
        "segment_status",
        "idgen_registry_recover",
    ] {
        assert!(all.contains(f) && !internal.contains(f), "{f}");
    }
    for f in [
        "idgen_registry_hello",
        "idgen_serial_period",
        "idgen_schema_guard",
    ] {
        assert!(all.contains(f) && internal.contains(f), "{f}");
    }
    assert!(has_word("| `snowflake_nextval()` |", "snowflake_nextval"));
    assert!(!has_word(
        "| `snowflake_nextvals(n)` |",
        "snowflake_nextval"
    ));
    assert_eq!(
        calls("`segment_nextval(name)` and nextval(), not segment_x"),
        BTreeSet::from(["segment_nextval".to_owned(), "nextval".to_owned()])
    );
    assert!(listed_functions(&script).contains("idgen_call_floor"));
    assert_eq!(
        setting_mentions(
            "`idgen.worker_id`, idgen.so, `idgen.*`, myidgen.x, idgen.snowflake_nextval()"
        ),
        BTreeSet::from(["idgen.worker_id".to_owned()])
    );
    assert_eq!(
        documented_sqlstates(
            "x\n\n| SQLSTATE | when |\n|---|---|\n| `55000` | a |\n| 57014 / 57P01 | b |\n\n| 22023 | c |"
        ),
        BTreeSet::from(["55000".to_owned(), "57014".to_owned(), "57P01".to_owned()])
    );
    let raised: BTreeSet<String> = raised_sqlstates().into_iter().map(|(c, _)| c).collect();
    for code in [
        "55000", "22023", "42704", "57014", "57P01", "55006", "XX001",
    ] {
        assert!(raised.contains(code), "{code} in {raised:?}");
    }
    assert!(!raised.contains("XX000") && !raised.contains("01000"));
}

/// The lines of `text` that mention README outside a comment: a hint, a message or a setting's
/// description that sends a user to a README section (README keeps only the first page; the
/// sections are in docs/).
fn readme_pointers(text: &str, comment: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains("README") && !l.trim_start().starts_with(comment))
        .map(|(n, l)| format!("{}: {}", n + 1, l.trim()))
        .collect()
}

/// What users read (the install script's hints and messages, the extension's errors, hints
/// and settings' descriptions) names docs pages, never a README section.
#[test]
fn no_message_sends_a_user_to_a_readme_section() {
    let (name, script) = install_script();
    let mut found: Vec<String> = readme_pointers(&script, "--")
        .into_iter()
        .map(|l| format!("{name}:{l}"))
        .collect();
    for path in idgen_cluster_tests::files_with_extension(&repo_root().join("src"), "rs") {
        let text = std::fs::read_to_string(&path).unwrap();
        let rel = path
            .strip_prefix(repo_root())
            .unwrap()
            .display()
            .to_string();
        found.extend(
            readme_pointers(&text, "//")
                .into_iter()
                .map(|l| format!("{rel}:{l}")),
        );
    }
    assert!(
        found.is_empty(),
        "messages that name a README section (point them at docs/):\n{}",
        found.join("\n")
    );
    assert_eq!(
        readme_pointers("-- README \"x\"\nHINT = 'see README \"y\"'", "--"),
        ["2: HINT = 'see README \"y\"'"]
    );
}
