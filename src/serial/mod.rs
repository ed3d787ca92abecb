//! Business serial numbers (seed 003, scenario 2; README "Serial numbers"): `serial_create`,
//! `serial_nextval` and the rest are SQL functions of the extension script
//! (`sql/idgen--0.3.0--0.4.0.sql`); this module gives them what SQL does badly: the format's
//! parser and checks ([`format`]) and the rendering of one number, as two internal functions.

pub(crate) mod format;

use pgrx::datetime::Timestamp;
use pgrx::prelude::*;

use crate::error::{Error, OrReport};
use format::{Format, LocalTime, RenderError, Reset};

/// The parsed format, or 22023 naming the offending token.
fn parse(format: &str) -> Result<Format, Error> {
    Format::parse(format).map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
}

/// Internal (`serial_create`, `serial_alter`): checks `format` for a counter reset every
/// `reset` ('day', 'month', 'year', 'never'). Errors: 22023 an invalid format (naming the
/// token), a format that does not show the period its counter restarts in, or an unknown reset.
#[pg_extern(immutable, parallel_safe)]
fn idgen_serial_check(format: &str, reset: &str) {
    let f = parse(format).or_report();
    let reset = Reset::parse(reset)
        .ok_or_else(|| Error::InvalidSerialFormat {
            why: format!(
                "reset must be 'day', 'month', 'year' or 'never', not '{}'",
                reset.chars().take(20).collect::<String>()
            ),
        })
        .or_report();
    f.check_reset(reset)
        .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
        .or_report();
}

/// Internal (`serial_nextval`): the text of counter value `seq` of serial `name`, drawn at local
/// time `at` (in the serial's time zone). `{worker}` is this server's Snowflake worker id.
/// Errors: 22003 the counter outgrew its padding (the 1,000,000th number of `{seq:06}`); 55000
/// a `{worker}` without a worker id, or one wider than its padding; 22008 a year `{YYYY}`
/// cannot show.
#[pg_extern(stable, parallel_safe)]
fn idgen_serial_render(name: &str, format: &str, at: Timestamp, seq: i64) -> String {
    let f = parse(format).or_report();
    let worker = if f.uses_worker() {
        Some(crate::snowflake::worker_id().or_report() as u32)
    } else {
        None
    };
    let (hour, minute, second, micro) = at.to_hms_micro();
    let t = LocalTime {
        year: at.year(),
        month: at.month(),
        day: at.day(),
        hour,
        minute,
        second,
        milli: (micro / 1000) as u16,
    };
    f.render(&t, seq, worker)
        .map_err(|e| match e {
            RenderError::SeqOverflow { max } => Error::SerialExhausted {
                name: name.into(),
                max,
            },
            RenderError::Worker { worker, width } => Error::SerialWorker {
                detail: match worker {
                    Some(w) => {
                        format!("Worker id {w} is wider than the {width} digits of its token.")
                    }
                    None => "This server has no worker id.".into(),
                },
            },
            RenderError::Year(year) => Error::TimestampOutOfRange {
                detail: format!("The year {year} does not fit {{YYYY}}."),
            },
        })
        .or_report()
}

// The objects of idgen 0.4.0 (serials, the text form of a Snowflake id, idgen_adopt_column, the
// registry's give-back): the upgrade script from 0.3.0 is also part of every fresh install,
// after 0.3.0's and after pgrx has created the new functions, so that both end with the same
// objects.
pgrx::extension_sql_file!(
    "../../sql/idgen--0.3.0--0.4.0.sql",
    name = "v0_4_0",
    requires = [
        "registry",
        idgen_serial_check,
        idgen_serial_render,
        snowflake::snowflake_format,
        snowflake::snowflake_parse
    ]
);
