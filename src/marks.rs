//! What a server of a registry keeps of the registry's answers (DESIGN.md §6 "Revision and
//! recovery"), below the subsystems that take ranges and the registry client that reports them:
//! the highest revision any answer carried (shared memory), and the marks file.
//!
//! The marks file: this server's durable record of the global ranges it took, one line per
//! global segment or global serial counter with the highest mark (the last number of the last
//! range) it took of it, in `idgen_registry.marks` in the data directory. The allocator records
//! a range here (durably: temporary file, fsync, rename, fsync of the directory) after the
//! registry answered it and before any of its numbers is used; the registry client reports the
//! file in a recovery (DESIGN.md §6 "Recovery"), so that a server that restarted since it took a
//! range (its shared memory is new) still reports it, for every database and every name.
//!
//! The shared part also keeps the registry's last contact: when the latest call it answered as
//! an open registry was sent (a hello with no recovery open, or one this node has reported in;
//! not a take, which knows nothing of a recovery that made the cached ranges void). A global range, segment or serial counter, is served only while that contact is
//! younger than the lease (DESIGN.md §6 "Cached global ranges"), so a node cut off from the
//! registry stops at a known time, as its Snowflake ids do at the end of their lease.
//!
//! It counts the calls this server sends to the registry and their failures, for monitoring.
//!
//! It also keeps the highest registry revision a take was answered with, and the node name it
//! was answered to: a restarted server of that name shows it at its first hello, so a registry
//! that lost those takes is found although the server's memory of revisions is new (a copy of
//! the data directory under another node name does not: that revision is another node's).
//!
//! Format, text: a first line `idgen registry marks 1`, a line `revision <n> <node name as
//! hex>`, then `<mark> <name as hex>` per name (hex: a serial counter's name holds control
//! characters). A file that does not parse is an error, never an empty report.

use std::cell::UnsafeCell;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};

use crate::failure::FixedText;
use crate::lwlock::NamedLWLock;
use crate::shmem::{Part, ShmemStruct};

/// The shared part: the highest revision seen, and the node name the registry client claims
/// with (set at its start), which the marks file records.
#[repr(C)]
#[derive(Default)]
struct MarksShared {
    /// The highest revision any answer of the registry carried to this server (the client's
    /// and the allocators'); shown to the registry at each hello: one above what the registry
    /// answered this node proves it lost commits.
    seen_revision: AtomicI64,
    /// When the call of the registry's latest answer that counts as contact was sent (the
    /// boot-time clock, ms, so that a wall clock stepped back or forward changes nothing);
    /// 0 before the first.
    contact_ms: AtomicI64,
    /// The registry's last completed recovery as its last hello said (`recovered_at`, ms since
    /// the Unix epoch; 0 for none): a hello that shows another one, without this node's
    /// report used in it, drops the cached global ranges first.
    recovered_at_ms: AtomicI64,
    /// The registry's longest lease (ms), as its last hello said; 0 before the first.
    registry_max_lease_ms: AtomicI64,
    /// The merge of the databases' catalogs into the file (`registry::catalog_marks`): 0 not
    /// started, when it started ([`contact_clock_ms`]) while it runs, -1 once done, -2 failed.
    catalog_merge: AtomicI64,
    /// The database the merge's last database worker merged (its oid), set by that worker
    /// once it is done: the launcher's check that it did.
    catalog_merged_db: AtomicI64,
    /// Calls this server sent to the registry since it started (the client's and the
    /// allocators'), and how many of them failed (an error, a timeout, no connection): for
    /// monitoring, `idgen_registry_client_status()`.
    calls: AtomicI64,
    failures: AtomicI64,
    /// Under [`LOCK`].
    node_name: UnsafeCell<FixedText<64>>,
}

// SAFETY: `seen_revision` is atomic; `node_name` is touched only under the LWLock.
unsafe impl Sync for MarksShared {}

static SHARED: ShmemStruct<MarksShared> = ShmemStruct::new(c"idgen_registry_marks");
/// Serializes the writers of the marks file, and guards the node name.
static LOCK: NamedLWLock = NamedLWLock::new(c"idgen_registry_marks");

/// The share of shared memory, registered by `registry::init` on a server with a registry.
pub(crate) const PART: Part = Part {
    request: || {
        SHARED.request();
        LOCK.request();
    },
    attach: || {
        // SAFETY: MarksShared is an atomic and plain bytes, for which all-zero is valid (its
        // Default); nothing else to initialize.
        unsafe { SHARED.attach(|_| {}) };
        LOCK.attach();
    },
};

/// Notes a revision an answer of the registry carried. Without a registry, nothing.
pub(crate) fn note_revision(revision: i64) {
    if SHARED.attached() {
        SHARED
            .get()
            .seen_revision
            .fetch_max(revision, Ordering::AcqRel);
    }
}

/// The highest revision noted since the server started.
pub(crate) fn seen_revision() -> i64 {
    if SHARED.attached() {
        SHARED.get().seen_revision.load(Ordering::Acquire)
    } else {
        0
    }
}

/// The clock contacts are dated by: the boot-time clock, ms ([`crate::time::boottime_ms`]):
/// unaffected by steps of the wall clock, and counting a suspended machine's sleep.
pub(crate) fn contact_clock_ms() -> i64 {
    crate::time::boottime_ms()
}

/// Notes a contact with the registry: a call sent at `asked_at_ms` ([`contact_clock_ms`]) that
/// an open registry answered. Sent, not answered: an answer delayed in the network proves
/// nothing about the time after the registry made it.
pub(crate) fn note_contact(asked_at_ms: i64) {
    if SHARED.attached() {
        SHARED
            .get()
            .contact_ms
            .fetch_max(asked_at_ms, Ordering::AcqRel);
    }
}

/// The registry's last completed recovery as last seen (ms since the Unix epoch, 0 for none).
pub(crate) fn recovered_at_seen() -> i64 {
    if SHARED.attached() {
        SHARED.get().recovered_at_ms.load(Ordering::Acquire)
    } else {
        0
    }
}

/// Notes the registry's last completed recovery ([`recovered_at_seen`]).
pub(crate) fn note_recovered_at(ms: i64) {
    if SHARED.attached() {
        SHARED.get().recovered_at_ms.store(ms, Ordering::Release);
    }
}

/// Notes the registry's longest lease (ms), from a hello.
pub(crate) fn note_registry_max_lease(ms: i64) {
    if SHARED.attached() {
        SHARED
            .get()
            .registry_max_lease_ms
            .store(ms, Ordering::Release);
    }
}

/// The last contact with the registry ([`contact_clock_ms`]; 0 for none since the server
/// started) and the registry's longest lease as last told (ms; 0 when not told yet).
pub(crate) fn contact() -> (i64, i64) {
    if SHARED.attached() {
        let s = SHARED.get();
        (
            s.contact_ms.load(Ordering::Acquire),
            s.registry_max_lease_ms.load(Ordering::Acquire),
        )
    } else {
        (0, 0)
    }
}

/// Counts one call to the registry and whether it failed (the client's and the allocators').
pub(crate) fn note_call(ok: bool) {
    if SHARED.attached() {
        let s = SHARED.get();
        s.calls.fetch_add(1, Ordering::Relaxed);
        if !ok {
            s.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Calls to the registry since the server started, and the failed ones ([`note_call`]).
pub(crate) fn calls() -> (i64, i64) {
    if SHARED.attached() {
        let s = SHARED.get();
        (
            s.calls.load(Ordering::Relaxed),
            s.failures.load(Ordering::Relaxed),
        )
    } else {
        (0, 0)
    }
}

/// Sets the node name the marks file records (the registry client, at its start).
pub(crate) fn set_node_name(name: &str) {
    let _guard = LOCK.exclusive();
    // SAFETY: node_name is touched only under LOCK, held here.
    unsafe { *SHARED.get().node_name.get() = FixedText::new(name) };
}

/// The file's name in the data directory.
pub(crate) const FILE_NAME: &str = "idgen_registry.marks";

const HEADER: &str = "idgen registry marks 1";

/// What the file records: each name's mark, and the highest revision a take was answered with.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) marks: BTreeMap<String, i64>,
    pub(crate) revision: i64,
    /// The node name the revision was answered to.
    pub(crate) node: String,
}

/// `bytes` as hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The text whose hex is `hex`.
fn unhex(hex: &str) -> Option<String> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|j| u8::from_str_radix(hex.get(j..j + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// The record in `text`.
pub(crate) fn decode(text: &str) -> Result<Recorded, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(format!("its first line is not \"{HEADER}\""));
    }
    let (revision, node) = lines
        .next()
        .and_then(|l| l.strip_prefix("revision "))
        .and_then(|r| {
            let (n, node) = r.split_once(' ').unwrap_or((r, ""));
            Some((n.parse::<i64>().ok()?, unhex(node)?))
        })
        .ok_or("its second line is not \"revision <n> <hex node name>\"")?;
    let mut marks = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let bad = || format!("line {} is not \"<mark> <hex name>\"", i + 3);
        let (mark, name) = line.split_once(' ').ok_or_else(bad)?;
        let mark: i64 = mark.parse().map_err(|_| bad())?;
        let name = unhex(name).filter(|n| !n.is_empty()).ok_or_else(bad)?;
        let m = marks.entry(name).or_insert(mark);
        *m = (*m).max(mark);
    }
    Ok(Recorded {
        marks,
        revision,
        node,
    })
}

/// The file's text for `recorded`.
pub(crate) fn encode(recorded: &Recorded) -> String {
    let mut text = format!(
        "{HEADER}\nrevision {} {}\n",
        recorded.revision,
        hex(recorded.node.as_bytes())
    );
    for (name, mark) in &recorded.marks {
        text.push_str(&format!("{mark} {}\n", hex(name.as_bytes())));
    }
    text
}

/// The record in the file at `path` (empty when it does not exist).
pub(crate) fn read_at(path: &Path) -> Result<Recorded, String> {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("\"{}\" is not text", path.display()))?;
            decode(&text).map_err(|why| format!("\"{}\" is corrupt: {why}", path.display()))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Recorded::default()),
        Err(e) => Err(format!("could not read \"{}\": {e}", path.display())),
    }
}

/// Raises `name`'s mark in the file at `path` to `mark` (never lowers it), and the revision of
/// node `node` to `revision` (a revision recorded for another node name is replaced), durably.
pub(crate) fn record_at(
    path: &Path,
    node: &str,
    name: &str,
    mark: i64,
    revision: i64,
) -> Result<(), String> {
    let mut recorded = read_at(path)?;
    if recorded.node != node {
        recorded.node = node.to_owned();
        recorded.revision = 0;
    }
    let known = recorded.marks.get(name).copied();
    if known.is_some_and(|m| m >= mark) && recorded.revision >= revision {
        return Ok(());
    }
    let m = recorded.marks.entry(name.to_owned()).or_insert(mark);
    *m = (*m).max(mark);
    recorded.revision = recorded.revision.max(revision);
    write_at(path, &encode(&recorded))
        .map_err(|e| format!("could not write \"{}\": {e}", path.display()))
}

fn write_at(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("marks.tmp");
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)?;
    File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

/// The file of this server.
fn path() -> PathBuf {
    crate::backend::data_dir().join(FILE_NAME)
}

/// Records that this server took a range of `name` (a global segment's name, or a global serial
/// counter's, `chr(1) || 'serial' || chr(1) || serial || chr(1) || period`) up to `mark`, in an
/// answer of revision `revision`: before any number of it is used. Under the LWLock
/// `idgen_registry_marks`. Errors: 58030 (the file could not be read or written; the range is
/// not used).
pub(crate) fn record(name: &str, mark: i64, revision: i64) -> Result<(), crate::error::Error> {
    let _guard = LOCK.exclusive();
    // SAFETY: node_name is touched only under LOCK, held here.
    let node = unsafe { (*SHARED.get().node_name.get()).as_str().to_owned() };
    record_at(&path(), &node, name, mark, revision).map_err(|why| {
        crate::failure::Failure::new(
            "58030",
            &format!("could not record the range of \"{name}\" taken from the registry: {why}"),
            Some("The range is not used: its numbers are skipped."),
            None,
        )
        .to_error()
    })
}

/// Raises the marks of `marks` in the file (never lowers one), durably, in one write: a
/// database's catalog merged in (`registry::catalog_marks`). Returns how many rose.
pub(crate) fn merge(marks: &[(String, i64)]) -> Result<usize, String> {
    let _guard = LOCK.exclusive();
    let path = path();
    let mut recorded = read_at(&path)?;
    let mut raised = 0;
    for (name, mark) in marks {
        let m = recorded.marks.entry(name.clone()).or_insert(i64::MIN);
        if *mark > *m {
            *m = *mark;
            raised += 1;
        }
    }
    if raised > 0 {
        write_at(&path, &encode(&recorded))
            .map_err(|e| format!("could not write \"{}\": {e}", path.display()))?;
    }
    Ok(raised)
}

/// The state of the catalogs' merge: 0 not started, its start ([`contact_clock_ms`]) while it
/// runs, -1 once done, -2 failed.
pub(crate) fn catalog_merge() -> i64 {
    if SHARED.attached() {
        SHARED.get().catalog_merge.load(Ordering::Acquire)
    } else {
        -1
    }
}

/// The database the merge's last database worker merged (0 for none).
pub(crate) fn catalog_merged_db() -> i64 {
    if SHARED.attached() {
        SHARED.get().catalog_merged_db.load(Ordering::Acquire)
    } else {
        0
    }
}

/// Sets [`catalog_merged_db`].
pub(crate) fn set_catalog_merged_db(db: i64) {
    if SHARED.attached() {
        SHARED.get().catalog_merged_db.store(db, Ordering::Release);
    }
}

/// Sets the state of the catalogs' merge ([`catalog_merge`]).
pub(crate) fn set_catalog_merge(state: i64) {
    if SHARED.attached() {
        SHARED.get().catalog_merge.store(state, Ordering::Release);
    }
}

/// Every mark this server recorded, and the highest revision: what it reports in a recovery.
pub(crate) fn recorded() -> Result<Recorded, String> {
    let _guard = LOCK.exclusive();
    read_at(&path())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_only_rise() {
        let dir = std::env::temp_dir().join(format!("idgen-marks-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        let _ = fs::remove_file(&path);
        assert_eq!(read_at(&path).unwrap(), Recorded::default());
        record_at(&path, "n1", "g", 100, 5).unwrap();
        record_at(&path, "n1", "\u{1}serial\u{1}inv\u{1}2026", 7, 9).unwrap();
        record_at(&path, "n1", "g", 50, 7).unwrap();
        record_at(&path, "n1", "a b", 3, 2).unwrap();
        let r = read_at(&path).unwrap();
        assert_eq!(r.marks.get("g"), Some(&100));
        assert_eq!(r.marks.get("\u{1}serial\u{1}inv\u{1}2026"), Some(&7));
        assert_eq!(r.marks.get("a b"), Some(&3));
        assert_eq!((r.revision, r.node.as_str()), (9, "n1"));
        // A copy under another node name: its revision is its own, the marks stay.
        record_at(&path, "n2", "h", 1, 4).unwrap();
        let r = read_at(&path).unwrap();
        assert_eq!((r.revision, r.node.as_str()), (4, "n2"));
        assert_eq!(r.marks.get("g"), Some(&100));
        fs::write(&path, "idgen registry marks 1\nrevision 3 6e31\n12 zz\n").unwrap();
        assert!(read_at(&path).unwrap_err().contains("line 3"));
        fs::write(&path, "something else\n").unwrap();
        assert!(read_at(&path).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
