//! The durable Snowflake reservation: a small file in the data directory that records the first
//! tick no id of this server has reached: its format, the promotion arithmetic, and reading and
//! writing it with plain std file I/O.
//!
//! The generator never issues an id at or beyond the stored `reserved_end` tick, and at start-up
//! it continues from there (DESIGN.md §1 "Surviving restarts and crashes"). So a crash, a
//! `kill -9` or a clock set back while the server was down cannot make it repeat an id: the
//! idea of PostgreSQL's sequence.c, which WAL-logs `SEQ_LOG_VALS` values ahead of the last one
//! handed out, applied to time.
//!
//! The file is text, one `key=value` per line, ending with a CRC-32 of everything before it:
//!
//! ```text
//! # idgen snowflake reservation; written by idgen, do not edit.
//! version=1
//! reserved_end_tick=1234567890
//! reserved_end_unix_ms=1765000000000
//! written_at_unix_ms=1764999999000
//! timeline=1
//! max_drift_ms=1000
//! epoch_unix_ms=1704067200000
//! worker_bits=10
//! sequence_bits=12
//! time_unit_ms=1
//! crc32=0a1b2c3d
//! ```
//!
//! It is replaced atomically: written to a temporary file, fsynced, renamed over the old one,
//! and the directory fsynced, so after a crash it holds either the old or the new reservation.
//! A file that does not parse or whose checksum does not match is *corrupt*: generation stops
//! rather than guessing (SQLSTATE XX001). The layout is recorded too, because a tick means
//! something else under another layout, and ids of two layouts can collide. `idgen.id_bits` is
//! not: it changes how far the time field goes, not what a tick means or how an id is composed
//! (`Layout::counts_ticks_as`), and a reservation past a narrower layout's last tick only makes
//! that layout exhausted (generation fails loudly).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::layout::Layout;

/// Name of the reservation file inside the data directory.
pub const FILE_NAME: &str = "idgen_snowflake.reservation";

/// Format version written in the file.
const VERSION: u64 = 1;

/// The contents of the reservation file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// The first tick not reserved: every id this server issued has a smaller tick.
    pub reserved_end: u64,
    /// The wall clock when the file was written, Unix ms: a clock now behind it was set back.
    pub written_at_unix_ms: i64,
    /// The WAL timeline the server was on when it wrote the file. A server on another timeline
    /// was promoted (or recovered to a point in time) since: the file is an old copy.
    pub timeline: u32,
    /// `idgen.max_drift_ms` in force when the file was written, or how far ahead of the clock
    /// the generator was if more (-1: unbounded); `None` in a file written before idgen
    /// recorded it. A standby made from this server (`pg_basebackup` copies the file) learns
    /// from it how far ahead of its clock the primary may stamp ids: as of the base backup, so
    /// a later raise of the primary's bound must be made on its standbys too.
    pub max_drift_ms: Option<i64>,
    /// The layout the tick is counted in. The file does not record `id_bits`, so this is the
    /// 63-bit layout of the recorded epoch, widths and tick length: compare it with
    /// `Layout::counts_ticks_as`, not `==`.
    pub layout: Layout,
}

/// Why the file could not be read or written.
#[derive(Debug, Error)]
pub enum FileError {
    /// An I/O failure on `path` (`action` is "read", "write", "fsync", "rename").
    #[error("could not {action} file \"{path}\": {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The file exists but is not a valid reservation.
    #[error("snowflake reservation file \"{path}\" is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

/// The file's text for `stored`, checksum included.
pub fn encode(stored: &Stored) -> String {
    let l = &stored.layout;
    let body = format!(
        "# idgen snowflake reservation; written by idgen, do not edit.\n\
         version={VERSION}\n\
         reserved_end_tick={}\n\
         reserved_end_unix_ms={}\n\
         written_at_unix_ms={}\n\
         timeline={}\n\
         {}\
         epoch_unix_ms={}\n\
         worker_bits={}\n\
         sequence_bits={}\n\
         time_unit_ms={}\n",
        stored.reserved_end,
        l.unix_ms_of_tick(stored.reserved_end),
        stored.written_at_unix_ms,
        stored.timeline,
        stored
            .max_drift_ms
            .map_or(String::new(), |ms| format!("max_drift_ms={ms}\n")),
        l.epoch_unix_ms(),
        l.worker_bits(),
        l.sequence_bits(),
        l.time_unit_ms(),
    );
    format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()))
}

/// Parses the file's text. `Err` is the reason it is corrupt.
pub fn decode(text: &str) -> Result<Stored, String> {
    let (body, crc_line) = match text.strip_suffix('\n').and_then(|t| t.rsplit_once('\n')) {
        Some((body, last)) => (&text[..body.len() + 1], last),
        None => return Err("it is truncated".into()),
    };
    let crc = crc_line
        .strip_prefix("crc32=")
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or("the last line is not its checksum")?;
    if crc32fast::hash(body.as_bytes()) != crc {
        return Err("its checksum does not match its contents".into());
    }
    let mut fields = std::collections::BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("line \"{line}\" is not key=value"))?;
        if fields.insert(key, value).is_some() {
            return Err(format!("{key} appears twice"));
        }
    }
    let number = |key: &str| -> Result<i64, String> {
        fields
            .get(key)
            .ok_or_else(|| format!("{key} is missing"))?
            .parse::<i64>()
            .map_err(|_| format!("{key} is not a number"))
    };
    let unsigned = |key: &str| -> Result<u64, String> {
        u64::try_from(number(key)?).map_err(|_| format!("{key} is negative"))
    };
    let bits = |key: &str| -> Result<u32, String> {
        u32::try_from(unsigned(key)?).map_err(|_| format!("{key} is too large"))
    };
    if unsigned("version")? != VERSION {
        return Err(format!("version {} is not {VERSION}", unsigned("version")?));
    }
    let layout = Layout::new(
        number("epoch_unix_ms")?,
        bits("worker_bits")?,
        bits("sequence_bits")?,
        bits("time_unit_ms")?,
    )
    .map_err(|e| e.to_string())?;
    Ok(Stored {
        reserved_end: unsigned("reserved_end_tick")?,
        written_at_unix_ms: number("written_at_unix_ms")?,
        timeline: u32::try_from(unsigned("timeline")?).map_err(|_| "timeline is too large")?,
        max_drift_ms: match fields.contains_key("max_drift_ms") {
            false => None,
            true => Some(number("max_drift_ms")?)
                .filter(|ms| *ms >= -1)
                .map(Some)
                .ok_or("max_drift_ms is below -1".to_owned())?,
        },
        layout,
    })
}

/// The first tick a promoted (or point-in-time recovered) server may issue from, continuing a
/// worker id the previous primary may still have used up to the moment it stopped.
///
/// The old primary never stamped an id more than `max_drift_ms` ahead of its own clock, and its
/// clock is at most `skew_ms` ahead of ours; every one of its ids was issued before now. So its
/// ticks are at most `tick(now + skew) + ceil(max_drift / unit)`; the floor is one tick above,
/// rounded up, never down (with 1 s ticks, rounding down handed out the primary's last tick
/// again). Past the end of the layout it is `max_tick + 1` (generation then fails loudly).
pub fn promotion_floor_tick(layout: &Layout, now_ms: i64, max_drift_ms: u64, skew_ms: u64) -> u64 {
    let end = layout.max_tick() + 1;
    let Ok(their_now) = layout.tick_at(now_ms.saturating_add(skew_ms.min(i64::MAX as u64) as i64))
    else {
        return end;
    };
    let ahead = max_drift_ms.div_ceil(layout.time_unit_ms() as u64);
    their_now.saturating_add(ahead).saturating_add(1).min(end)
}

/// The file in `data_dir`.
pub fn path_in(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE_NAME)
}

/// Reads the file: `Ok(None)` when it does not exist (a fresh start), `Corrupt` when it does
/// not parse.
pub fn read(path: &Path) -> Result<Option<Stored>, FileError> {
    let text = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(FileError::Io {
                action: "read",
                path: path.into(),
                source,
            })
        }
    };
    let corrupt = |reason: String| FileError::Corrupt {
        path: path.into(),
        reason,
    };
    let text = String::from_utf8(text).map_err(|_| corrupt("it is not text".into()))?;
    decode(&text).map(Some).map_err(corrupt)
}

/// Replaces the file durably: write a temporary file, fsync it, rename it over `path`, fsync the
/// directory. On error the old file is still in place.
pub fn write(path: &Path, stored: &Stored) -> Result<(), FileError> {
    let tmp = path.with_extension("reservation.tmp");
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| FileError::Io {
            action,
            path,
            source,
        }
    };
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("write", &tmp))?;
    file.write_all(encode(stored).as_bytes())
        .map_err(io("write", &tmp))?;
    file.sync_all().map_err(io("fsync", &tmp))?;
    drop(file);
    fs::rename(&tmp, path).map_err(io("rename", &tmp))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snowflake::layout::DEFAULT_EPOCH_UNIX_MS;

    fn sample() -> Stored {
        Stored {
            reserved_end: 123_456_789,
            written_at_unix_ms: 1_800_000_000_000,
            timeline: 3,
            max_drift_ms: Some(1000),
            layout: Layout::new(DEFAULT_EPOCH_UNIX_MS, 16, 8, 10).unwrap(),
        }
    }

    #[test]
    fn the_drift_bound_is_optional_and_may_be_unbounded() {
        for drift in [None, Some(-1), Some(0), Some(5000)] {
            let stored = Stored {
                max_drift_ms: drift,
                ..sample()
            };
            assert_eq!(decode(&encode(&stored)), Ok(stored));
        }
        let body = "version=1\nreserved_end_tick=5\nwritten_at_unix_ms=0\ntimeline=1\n\
                    max_drift_ms=-2\nepoch_unix_ms=0\nworker_bits=10\nsequence_bits=12\ntime_unit_ms=1\n";
        let text = format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()));
        assert_eq!(decode(&text), Err("max_drift_ms is below -1".into()));
    }

    /// Every tick the old primary can have used lies below the floor, at the bounds of drift
    /// and skew, for second ticks (where rounding down repeated ids) and millisecond ticks.
    #[test]
    fn the_promotion_floor_is_above_every_tick_the_old_primary_can_have_used() {
        for unit in [1u32, 10, 1000] {
            let layout = Layout::new(DEFAULT_EPOCH_UNIX_MS, 10, 12, unit).unwrap();
            for drift in [0u64, 1, 999, 1000, 1001, 5000] {
                for skew in [0u64, 1, 999, 1000] {
                    for offset in [0i64, 1, 499, 500, 999, 1000, 1234, 7777] {
                        let now = DEFAULT_EPOCH_UNIX_MS + 1_000_000 + offset;
                        let floor = promotion_floor_tick(&layout, now, drift, skew);
                        // The primary's clock read up to `skew` ahead of ours, at any moment
                        // up to now; the generator lets it run `drift` in ticks ahead of that.
                        let their_clock = now + skew as i64;
                        let their_last =
                            layout.tick_at(their_clock).unwrap() + layout.ticks_in_ms(drift);
                        assert!(
                            floor > their_last,
                            "unit {unit} drift {drift} skew {skew} now +{offset}: floor {floor} <= {their_last}"
                        );
                        // Never more than two ticks above what is needed.
                        assert!(floor <= their_last + 2 + (drift % unit as u64 > 0) as u64);
                    }
                }
            }
        }
        let layout = Layout::new(DEFAULT_EPOCH_UNIX_MS, 10, 12, 1).unwrap();
        assert_eq!(
            promotion_floor_tick(&layout, i64::MAX, 0, 0),
            layout.max_tick() + 1
        );
    }

    fn scratch_dir(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("idgen-reservation-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn encode_decode_round_trip() {
        let text = encode(&sample());
        assert_eq!(decode(&text), Ok(sample()));
        assert!(
            text.contains("reserved_end_unix_ms=1705301767890\n"),
            "{text}"
        );
    }

    #[test]
    fn any_changed_byte_is_corruption() {
        let text = encode(&sample());
        for (i, _) in text.char_indices() {
            let mut bytes = text.clone().into_bytes();
            bytes[i] ^= 0x01;
            let changed = String::from_utf8_lossy(&bytes);
            assert!(decode(&changed).is_err(), "flip at byte {i} went unnoticed");
        }
    }

    #[test]
    fn truncated_or_empty_files_are_corrupt() {
        let text = encode(&sample());
        for len in [0, 1, text.len() / 2, text.len() - 1] {
            assert!(decode(&text[..len]).is_err(), "length {len}");
        }
    }

    #[test]
    fn a_well_formed_file_with_a_bad_field_is_corrupt() {
        let body =
            "version=1\nreserved_end_tick=-5\nwritten_at_unix_ms=0\ntimeline=1\nepoch_unix_ms=0\n\
                    worker_bits=10\nsequence_bits=12\ntime_unit_ms=1\n";
        let text = format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()));
        assert_eq!(decode(&text), Err("reserved_end_tick is negative".into()));
        let body =
            "version=1\nreserved_end_tick=5\nwritten_at_unix_ms=0\ntimeline=1\nepoch_unix_ms=0\n\
                    worker_bits=20\nsequence_bits=20\ntime_unit_ms=1\n";
        let text = format!("{body}crc32={:08x}\n", crc32fast::hash(body.as_bytes()));
        assert!(decode(&text)
            .unwrap_err()
            .contains("invalid snowflake layout"));
    }

    #[test]
    fn missing_file_is_a_fresh_start_and_write_replaces_it() {
        let dir = scratch_dir("rw");
        let path = path_in(&dir);
        assert!(read(&path).unwrap().is_none());
        write(&path, &sample()).unwrap();
        assert_eq!(read(&path).unwrap(), Some(sample()));
        let later = Stored {
            reserved_end: sample().reserved_end + 100,
            ..sample()
        };
        write(&path, &later).unwrap();
        assert_eq!(read(&path).unwrap(), Some(later));
        // Only the file itself is left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(FILE_NAME)]);
        fs::write(&path, "garbage\n").unwrap();
        assert!(matches!(read(&path), Err(FileError::Corrupt { .. })));
        fs::remove_dir_all(&dir).unwrap();
    }
}
