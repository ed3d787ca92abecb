//! Runs the SQL examples of the docs site (`docs/**/*.md`) and compares what they print with the
//! output the page shows, as timescaledb-toolkit's sql-doctester does for its docs.
//!
//! The format (CONTRIBUTING.md and docs/contributing/tests.md):
//! - a fenced block (```` ``` ```` or `~~~`, indented or not) whose info string is `sql` is run;
//!   the next fenced block of the page, when its info string is `output`, is what `psql -X -q`
//!   prints for it: aligned tables with their `(N rows)` footer, and errors, notices and their
//!   `DETAIL:` / `HINT:` lines as psql prints them with `VERBOSITY default`. Trailing whitespace
//!   of each line, and blank lines at the end of a block, are ignored.
//! - `sql ignore-output`: run, its output not compared (ids that depend on the clock); an output
//!   block after it is shown to readers and not compared. `sql no-run`: not run (statements
//!   for a second server, say). Blocks of other languages (`ini`, `sh`, `python`) are never run.
//! - a `sql` block without an output block after it fails, showing what it printed: every
//!   compared block has one, empty for statements that print nothing (DDL under `-q`).
//!
//! One server for all pages: idgen in `shared_preload_libraries`, `idgen.worker_id = 1`,
//! `timezone = 'UTC'`, defaults otherwise. Each page runs in a fresh database, in one psql
//! session (so `currval` and session settings carry from block to block), after the test ran
//! `CREATE EXTENSION idgen` there. Every difference of every page is reported, as
//! `docs/page.md:LINE: ...`, before the test fails.
//!
//! `IDGEN_DOCS_DIR` runs the pages of another folder (a docs/ of another checkout).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idgen_cluster_tests::{pg_bin, Cluster};

/// The longest one page's psql session may run.
const PAGE_TIMEOUT: Duration = Duration::from_secs(300);

/// The settings the pages are written for.
const SETTINGS: &[&str] = &[
    "shared_preload_libraries = 'idgen'",
    "idgen.worker_id = 1",
    "timezone = 'UTC'",
];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One fenced block of a page.
#[derive(Debug, Clone, PartialEq)]
struct Fence {
    /// Line of the opening fence, from 1.
    line: usize,
    /// The info string's words (split on blanks and commas), the first one lowercased.
    info: Vec<String>,
    /// The lines between the fences, less the opening fence's indentation.
    body: String,
}

/// What a `sql` block asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Run, and compare with the output block (none: must print nothing).
    Compare,
    /// Run, output not compared.
    IgnoreOutput,
    /// Not run.
    NoRun,
}

/// A `sql` block and the output block that follows it.
#[derive(Debug, Clone, PartialEq)]
struct Example {
    line: usize,
    sql: String,
    mode: Mode,
    /// The output block: its line and text.
    expected: Option<(usize, String)>,
}

/// A fence opened and not closed yet.
struct OpenFence<'a> {
    /// Line of the opening fence, from 1.
    line: usize,
    indent: usize,
    /// The fence's character (`` ` `` or `~`) and how many of it.
    fence: char,
    len: usize,
    info: Vec<String>,
    lines: Vec<&'a str>,
}

/// The fenced blocks of a markdown text, in order; an unclosed fence is a problem.
fn fences(text: &str) -> Result<Vec<Fence>, (usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<OpenFence> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        let fence_char = rest.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence_char.map_or(0, |c| rest.chars().take_while(|x| *x == c).count());
        match open.take() {
            None => {
                if let (Some(fence), true) = (fence_char, run >= 3) {
                    let info_text = &rest[run..];
                    if fence == '`' && info_text.contains('`') {
                        continue; // inline code, not a fence
                    }
                    let mut info: Vec<String> = info_text
                        .split(|ch: char| ch.is_whitespace() || ch == ',')
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned)
                        .collect();
                    if let Some(first) = info.first_mut() {
                        *first = first.to_lowercase();
                    }
                    open = Some(OpenFence {
                        line: i + 1,
                        indent,
                        fence,
                        len: run,
                        info,
                        lines: Vec::new(),
                    });
                }
            }
            Some(mut f) => {
                let closes =
                    fence_char == Some(f.fence) && run >= f.len && rest[run..].trim().is_empty();
                if closes {
                    let mut body = String::new();
                    for l in &f.lines {
                        let strip = l.len() - l.trim_start_matches(' ').len();
                        body.push_str(&l[strip.min(f.indent)..]);
                        body.push('\n');
                    }
                    out.push(Fence {
                        line: f.line,
                        info: f.info,
                        body,
                    });
                } else {
                    f.lines.push(line);
                    open = Some(f);
                }
            }
        }
    }
    match open {
        Some(f) => Err((f.line, "a fenced block that is never closed".into())),
        None => Ok(out),
    }
}

/// The examples of a page, or its problems (`LINE: what`): a `sql` block with a flag other than
/// `ignore-output` or `no-run`, an `output` block after no `sql` block, a block to run whose
/// last statement has no `;` (psql would run it with the next block).
fn examples(text: &str) -> (Vec<Example>, Vec<(usize, String)>) {
    let fences = match fences(text) {
        Ok(f) => f,
        Err(p) => return (Vec::new(), vec![p]),
    };
    let mut out: Vec<Example> = Vec::new();
    let mut problems = Vec::new();
    let mut previous_sql = false;
    for f in fences {
        let lang = f.info.first().map(String::as_str).unwrap_or("");
        match lang {
            "sql" => {
                let mut mode = Mode::Compare;
                for flag in &f.info[1..] {
                    match flag.as_str() {
                        "ignore-output" if mode == Mode::Compare => mode = Mode::IgnoreOutput,
                        "no-run" if mode == Mode::Compare => mode = Mode::NoRun,
                        // mkdocs-material's attributes (title="...", hl_lines="2 3").
                        attribute if attribute.contains('=') || attribute.contains('"') => {}
                        other => problems.push((
                            f.line,
                            format!(
                                "unknown flag `{other}` on a sql block (ignore-output or no-run)"
                            ),
                        )),
                    }
                }
                if mode != Mode::NoRun && !ends_its_statement(&f.body) {
                    problems.push((
                        f.line,
                        "the block's last statement has no `;`: psql would run it with the next block"
                            .into(),
                    ));
                }
                out.push(Example {
                    line: f.line,
                    sql: f.body,
                    mode,
                    expected: None,
                });
                previous_sql = true;
            }
            "output" => {
                match out.last_mut() {
                    Some(e) if previous_sql => e.expected = Some((f.line, f.body)),
                    _ => problems.push((f.line, "an output block after no sql block".into())),
                }
                previous_sql = false;
            }
            _ => previous_sql = false,
        }
    }
    (out, problems)
}

/// Whether the last line of `sql` that is not blank or a `--` comment ends a statement (`;`,
/// before a trailing `-- comment`) or is a psql meta-command (`\gx`, `\d t`).
fn ends_its_statement(sql: &str) -> bool {
    match sql
        .lines()
        .map(|l| without_comment(l).trim())
        .rfind(|l| !l.is_empty())
    {
        None => true,
        Some(last) => last.ends_with(';') || last.contains('\\'),
    }
}

/// `line` without a trailing `-- comment` (a `--` outside single quotes).
fn without_comment(line: &str) -> &str {
    let mut quoted = false;
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'\'' => quoted = !quoted,
            b'-' if !quoted && bytes.get(i + 1) == Some(&b'-') => return &line[..i],
            _ => {}
        }
    }
    line
}

/// The lines that are compared: trailing whitespace and trailing blank lines dropped.
fn normalized(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines
}

/// A line diff of `expected` and `actual` (`-` expected only, `+` printed only, ` ` both).
fn diff(expected: &[String], actual: &[String]) -> String {
    let (n, m) = (expected.len(), actual.len());
    // Longest common subsequence, from the ends.
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if expected[i] == actual[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut out = String::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && expected[i] == actual[j] {
            let _ = writeln!(out, "     {}", expected[i]);
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "   - {}", expected[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "   + {}", actual[j]);
            j += 1;
        }
    }
    out
}

/// The marker psql echoes after block `n` (0: after `CREATE EXTENSION`).
fn marker(n: usize) -> String {
    format!("@@idgen-docs-block {n}@@")
}

/// Runs `script` in one `psql -X -q` session on database `db`, stdin fed with the script,
/// stderr merged into stdout in the order psql writes them. Returns the output, and whether the
/// session was stopped after [`PAGE_TIMEOUT`].
fn psql(cluster: &Cluster, db: &str, script: String) -> (String, bool) {
    let bin = pg_bin();
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let mut cmd = Command::new(format!("{bin}/psql"));
    cmd.args(["-X", "-q", "-d", &cluster.conninfo(db)])
        .stdin(Stdio::piped())
        .stdout(writer.try_clone().expect("pipe"))
        .stderr(writer)
        // psql's own messages (`(1 row)`) untranslated, the server's session as configured.
        .env("LC_ALL", "C")
        .env("PGCLIENTENCODING", "UTF8");
    for var in [
        "PGOPTIONS",
        "PGTZ",
        "PGDATESTYLE",
        "PGSERVICE",
        "PGSERVICEFILE",
        "PGSYSCONFDIR",
        "PSQLRC",
        "PSQL_PAGER",
        "PAGER",
    ] {
        cmd.env_remove(var);
    }
    // The libpq of that installation, as the harness's programs use it.
    let libdir = Path::new(&bin).join("../lib");
    if libdir.join("libpq.so.5").exists() {
        cmd.env("LD_LIBRARY_PATH", &libdir);
    }
    let mut child = cmd.spawn().expect("run psql");
    drop(cmd); // closes this process's ends of the pipe's writer
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(script.as_bytes());
    });
    let collector = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = reader.read_to_end(&mut out);
        out
    });
    let started = Instant::now();
    let mut timed_out = false;
    while child.try_wait().expect("wait for psql").is_none() {
        if started.elapsed() > PAGE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = feeder.join();
    let out = collector.join().unwrap();
    (String::from_utf8_lossy(&out).into_owned(), timed_out)
}

/// What one page's run found.
#[derive(Default)]
struct PageRun {
    /// `page:LINE: what`, one entry per problem.
    problems: Vec<String>,
    /// Blocks run, and blocks whose output was compared.
    run: usize,
    compared: usize,
}

/// Runs the examples of the page `text` (named `page` in the reports) in a fresh database `db`.
fn run_page(cluster: &Cluster, db: &str, page: &str, text: &str) -> PageRun {
    let mut result = PageRun::default();
    let (examples, problems) = examples(text);
    result.problems.extend(
        problems
            .into_iter()
            .map(|(line, p)| format!("{page}:{line}: {p}")),
    );
    let to_run: Vec<&Example> = examples.iter().filter(|e| e.mode != Mode::NoRun).collect();
    if to_run.is_empty() {
        return result;
    }
    cluster
        .connect("postgres")
        .batch_execute(&format!("CREATE DATABASE \"{db}\""))
        .unwrap_or_else(|e| panic!("CREATE DATABASE {db}: {e}"));
    let mut script = String::from("\\set VERBOSITY default\nCREATE EXTENSION idgen;\n");
    let _ = writeln!(script, "\\echo {}", marker(0));
    for (n, e) in to_run.iter().enumerate() {
        script.push_str(&e.sql);
        let _ = writeln!(script, "\n\\echo {}", marker(n + 1));
    }
    let (output, timed_out) = psql(cluster, db, script);
    // A page that used segments leaves its database's allocator running until it idles out,
    // holding a background worker slot: the drop makes it leave at once, so that the pages
    // together never need more slots than the server has (FORCE: psql may have been stopped).
    cluster
        .connect("postgres")
        .batch_execute(&format!("DROP DATABASE \"{db}\" WITH (FORCE)"))
        .unwrap_or_else(|e| panic!("DROP DATABASE {db}: {e}"));

    // The output between marker n and marker n + 1 is block n + 1's.
    let mut sections: Vec<Vec<&str>> = vec![Vec::new()];
    let mut markers = 0;
    for line in output.lines() {
        if line == marker(markers) {
            markers += 1;
            sections.push(Vec::new());
        } else {
            sections.last_mut().unwrap().push(line);
        }
    }
    let before = sections.first().map(|s| s.join("\n")).unwrap_or_default();
    if markers == 0 || !before.trim().is_empty() {
        result.problems.push(format!(
            "{page}: CREATE EXTENSION idgen in a fresh database printed (or psql failed):\n{before}"
        ));
        return result;
    }
    for (n, e) in to_run.iter().enumerate() {
        if n + 1 >= markers {
            let why = if timed_out {
                format!("psql did not finish within {PAGE_TIMEOUT:?}")
            } else {
                "psql ended before it".to_owned()
            };
            let rest = sections.last().map(|s| s.join("\n")).unwrap_or_default();
            result.problems.push(format!(
                "{page}:{}: the sql block did not run ({why}); psql's last output:\n{rest}",
                e.line
            ));
            break;
        }
        result.run += 1;
        let actual: Vec<String> = normalized(&sections[n + 1].join("\n"));
        match (&e.expected, e.mode) {
            (_, Mode::IgnoreOutput) => {}
            (Some((line, expected)), _) => {
                result.compared += 1;
                let expected = normalized(expected);
                if expected != actual {
                    result.problems.push(format!(
                        "{page}:{line}: the output of the sql block at line {} differs \
                         (- on the page, + printed):\n{}",
                        e.line,
                        diff(&expected, &actual)
                    ));
                }
            }
            (None, _) => {
                result.problems.push(format!(
                    "{page}:{}: no output block follows the sql block (add one, empty if it \
                     prints nothing, or mark the block `sql ignore-output`); it printed:\n{}",
                    e.line,
                    diff(&[], &actual)
                ));
            }
        }
    }
    result
}

/// Every `.md` file under `dir`, sorted.
fn pages(dir: &Path) -> Vec<PathBuf> {
    idgen_cluster_tests::files_with_extension(dir, "md")
}

/// Runs every page of `dir` on `cluster`; returns the problems, and prints what ran.
fn run_pages(cluster: &Cluster, dir: &Path, name_from: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let (mut run, mut compared, mut with_sql) = (0, 0, 0);
    let all = pages(dir);
    assert!(!all.is_empty(), "no .md page under {dir:?}");
    for (i, path) in all.iter().enumerate() {
        let name = path
            .strip_prefix(name_from)
            .unwrap_or(path)
            .display()
            .to_string();
        let text = std::fs::read_to_string(path).unwrap();
        let page = run_page(cluster, &format!("docs_page_{i}"), &name, &text);
        if page.run > 0 {
            with_sql += 1;
        }
        println!(
            "{name}: {} sql blocks run, {} outputs compared, {} problems",
            page.run,
            page.compared,
            page.problems.len()
        );
        run += page.run;
        compared += page.compared;
        problems.extend(page.problems);
    }
    println!(
        "{} pages ({with_sql} with sql blocks), {run} sql blocks run, {compared} outputs compared",
        all.len()
    );
    problems
}

fn start_server() -> Cluster {
    Cluster::start("docs", SETTINGS)
}

#[test]
fn every_sql_example_in_the_docs_prints_its_output() {
    let root = repo_root();
    let dir = std::env::var_os("IDGEN_DOCS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("docs"));
    let name_from = dir.parent().unwrap().to_path_buf();
    let cluster = start_server();
    let problems = run_pages(&cluster, &dir, &name_from);
    assert!(
        problems.is_empty(),
        "{} problems in the docs' SQL examples:\n\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The registry connection strings a page prints for a real fleet: every value of an
/// `idgen.registry = '...'` line in a fenced block, and every inline code span (outside fenced
/// blocks, a line break in it read as a space) that names the docs' registry database,
/// `dbname=ids`. Each with the line it starts on.
fn registry_strings(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let mut fence: Option<String> = None;
    // The text outside fenced blocks, each line with its number, to read spans across lines.
    let mut prose: Vec<(usize, &str)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let rest = line.trim_start();
        let marker: String = rest
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        match &fence {
            Some(open) => {
                if rest.starts_with(open.as_str())
                    && rest.trim_end() == rest[..marker.len()].trim_end()
                {
                    fence = None;
                    continue;
                }
                if let Some(at) = rest.find("idgen.registry") {
                    let after = rest[at + "idgen.registry".len()..].trim_start();
                    if let Some(value) = after
                        .strip_prefix('=')
                        .map(str::trim_start)
                        .and_then(|v| v.strip_prefix('\''))
                        .and_then(|v| v.split_once('\''))
                        .map(|(v, _)| v)
                    {
                        found.push((i + 1, value.to_owned()));
                    }
                }
            }
            None if marker.len() >= 3 => fence = Some(marker),
            None => prose.push((i + 1, line)),
        }
    }
    // Spans: split the prose at backticks; every second piece is code.
    let mut in_span = false;
    let mut span = String::new();
    let mut span_line = 0;
    for (number, line) in prose {
        for (k, piece) in line.split('`').enumerate() {
            if k > 0 {
                if in_span && span.contains("dbname=ids") {
                    found.push((
                        span_line,
                        span.split_whitespace().collect::<Vec<_>>().join(" "),
                    ));
                }
                in_span = !in_span;
                span.clear();
                span_line = number;
            }
            if in_span {
                span.push_str(piece);
            }
        }
        if in_span {
            span.push(' ');
        }
    }
    found
}

/// Every registry connection string the docs print for a real fleet passes the checks a node
/// makes at start (`idgen.registry` with `idgen.worker_id = auto`): a registry on another
/// machine needs `sslmode=require` or stronger, every host its address; a server given a
/// string that fails them does not start, and its log says why. Each string starts a server
/// of its own (the registry it names is never reached: the node only has to start).
#[test]
fn every_registry_string_in_the_docs_passes_the_start_checks() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for path in pages(&root.join("docs")) {
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (line, conninfo) in registry_strings(&text) {
            checked += 1;
            let c = Cluster::init("docs_registry", &[]);
            c.append_settings(&[
                "shared_preload_libraries = 'idgen'",
                "idgen.worker_id = auto",
                &format!("idgen.registry = '{}'", conninfo.replace('\'', "''")),
            ]);
            let out = c.pg_ctl_start();
            let refused: Vec<String> = c
                .log()
                .lines()
                .filter(|l| l.contains("FATAL") || l.contains("DETAIL"))
                .map(str::to_owned)
                .collect();
            println!(
                "{name}:{line}: {conninfo}: {}",
                if out.status.success() {
                    "starts"
                } else {
                    "refused"
                }
            );
            if !out.status.success() {
                problems.push(format!(
                    "{name}:{line}: {conninfo}: the node does not start: {refused:?}"
                ));
            }
        }
    }
    assert!(
        checked >= 3,
        "only {checked} registry strings found in the docs"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// No page includes part of a file by line numbers (`--8<-- "file:40:40"`): an edit of the file
/// above those lines would silently include other lines, and the strict build would not see
/// it. A part of a file is included by a section (`--8<-- "file:name"`, between `--8<--
/// [start:name]` and `--8<-- [end:name]` in the file), which the strict build fails on when it
/// is missing.
#[test]
fn no_page_includes_part_of_a_file_by_line_numbers() {
    let root = repo_root();
    let mut by_lines = Vec::new();
    for path in pages(&root.join("docs")) {
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let Some(target) = line
                .trim_start()
                .strip_prefix("--8<-- \"")
                .and_then(|t| t.split_once('"'))
                .map(|(t, _)| t)
            else {
                continue;
            };
            if let Some((_, selection)) = target.split_once(':') {
                if selection.starts_with(|c: char| c.is_ascii_digit()) {
                    by_lines.push(format!("{name}:{}: {target}", i + 1));
                }
            }
        }
    }
    assert!(
        by_lines.is_empty(),
        "included by line numbers:\n{}",
        by_lines.join("\n")
    );
}

/// The tester fails on a page whose output block no longer matches, naming the page and line
/// and showing the difference; and on a sql block without an output block.
#[test]
fn a_changed_output_fails_naming_the_page_and_line() {
    let root = repo_root();
    let page = root.join("tests/docs/changed-output.md");
    let text = std::fs::read_to_string(&page).unwrap();
    let cluster = start_server();
    let run = run_page(
        &cluster,
        "changed_output",
        "tests/docs/changed-output.md",
        &text,
    );
    let report = run.problems.join("\n");
    println!("{report}");
    assert_eq!(run.run, 5, "{report}");
    assert_eq!(run.problems.len(), 2, "{report}");
    assert!(
        run.problems[0].starts_with(
            "tests/docs/changed-output.md:24: the output of the sql block at line 20 differs"
        ) && run.problems[0].contains("   - (3 rows)")
            && run.problems[0].contains("   + (2 rows)")
            && run.problems[0].contains("   -  3")
            && !run.problems[0].contains("   +  1"),
        "{report}"
    );
    assert!(
        run.problems[1]
            .starts_with("tests/docs/changed-output.md:45: no output block follows the sql block")
            && run.problems[1].contains("   + ERROR:  segment \"nope\" does not exist"),
        "{report}"
    );
}

#[test]
fn fences_of_both_kinds_and_any_indentation_pair_sql_with_output() {
    let page = "\
# Page

```sql
SELECT 1;
```

Some prose.

~~~output
 one
~~~

!!! note
    ```sql ignore-output
    SELECT now();
    ```

````markdown
```sql
SELECT 'not run: inside a four-backtick block';
```
````

```sql no-run
SELECT 'on another server'
```

```ini
idgen.worker_id = 1
```

```output
orphan
```

```sql ignore_output
SELECT 2
```
";
    let (examples, problems) = examples(page);
    assert_eq!(
        examples,
        vec![
            Example {
                line: 3,
                sql: "SELECT 1;\n".into(),
                mode: Mode::Compare,
                expected: Some((9, " one\n".into())),
            },
            Example {
                line: 14,
                sql: "SELECT now();\n".into(),
                mode: Mode::IgnoreOutput,
                expected: None,
            },
            Example {
                line: 24,
                sql: "SELECT 'on another server'\n".into(),
                mode: Mode::NoRun,
                expected: None,
            },
            Example {
                line: 36,
                sql: "SELECT 2\n".into(),
                mode: Mode::Compare,
                expected: None,
            },
        ]
    );
    assert_eq!(
        problems,
        vec![
            (32, "an output block after no sql block".to_owned()),
            (
                36,
                "unknown flag `ignore_output` on a sql block (ignore-output or no-run)".to_owned()
            ),
            (
                36,
                "the block's last statement has no `;`: psql would run it with the next block"
                    .to_owned()
            ),
        ]
    );
    assert!(ends_its_statement("SELECT 1;   -- one\n-- done\n"));
    assert!(ends_its_statement("SELECT '--';\n"));
    assert!(!ends_its_statement("SELECT 1 -- no semicolon;\n"));
    assert!(ends_its_statement("SELECT 1 \\gx\n"));
    assert_eq!(
        fences("```sql\nSELECT 1;\n"),
        Err((1, "a fenced block that is never closed".to_owned()))
    );
}

#[test]
fn outputs_compare_without_trailing_whitespace_and_blank_lines() {
    assert_eq!(
        normalized(" a \n---\n 1  \n(1 row)\n\n\n"),
        normalized(" a\n---\n 1\n(1 row)\n")
    );
    assert_ne!(normalized("\n a\n"), normalized(" a\n"));
    let d = diff(
        &normalized(" x\n 1\n 2\n(2 rows)\n"),
        &normalized(" x\n 1\n(1 row)\n"),
    );
    assert_eq!(
        d,
        "      x\n      1\n   -  2\n   - (2 rows)\n   + (1 row)\n"
    );
}
