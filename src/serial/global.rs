//! Global serials (`scope => 'global'`): their counters' marks live in the registry
//! (`idgen_registry_serial_take`), taken by this database's allocator; the marks this server
//! took are kept in its own `idgen_serial_counter` (a range at or below one is never used) and
//! reported to the registry in a recovery (DESIGN.md §6). Also the allocator's job for local
//! counters.

use pgrx::prelude::*;

use super::catalog::{self, Arg};
use crate::error::Error;

/// A global serial's format as the registry compares it across nodes: with `{seq:0N}` written
/// `{seq}`, so that widening the counter on every node (the hint of 22003) one node at a time
/// keeps them drawing.
pub(super) fn registry_format(format: &str) -> String {
    let mut out = String::with_capacity(format.len());
    let mut rest = format;
    while let Some(i) = rest.find("{seq:0") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => {
                out.push_str("{seq}");
                rest = &rest[i + j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The marks file's name of a global serial's counter: `chr(1) || 'serial' || chr(1) || serial
/// || chr(1) || period` (the control characters keep it apart from every segment name).
pub(super) fn mark_name(serial: &str, period: &str) -> String {
    format!("\u{1}serial\u{1}{serial}\u{1}{period}")
}

/// The marks of this database's global serials' counters as its catalog keeps them (the last
/// mark this server, or the primary it was promoted from, took: committed before any number of
/// its range was used), by their marks file names. Empty without serials, or before their
/// scope (the extension's SQL not updated yet).
pub(super) fn marks_in_catalog() -> Result<Vec<(String, i64)>, Error> {
    let place = match catalog::place() {
        Ok(p) => p,
        Err(Error::ExtensionNotVisible) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let scoped = catalog::run(
        &place,
        "SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute a
          WHERE a.attrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('$S.idgen_serial')
            AND a.attname OPERATOR(pg_catalog.=) 'scope'::pg_catalog.name
            AND NOT a.attisdropped",
        &[],
        1,
    )
    .first()
    .and_then(|r| r.int8(0))
    .unwrap_or(0)
        == 1;
    if !scoped {
        return Ok(Vec::new());
    }
    let rows = catalog::run(
        &place,
        "SELECT s.name::pg_catalog.text, c.period::pg_catalog.text, c.value
           FROM $S.idgen_serial_counter c
           JOIN $S.idgen_serial s ON s.id OPERATOR(pg_catalog.=) c.serial
          WHERE s.scope OPERATOR(pg_catalog.=) 'global'",
        &[],
        0,
    );
    Ok(rows
        .iter()
        .filter_map(|r| Some((mark_name(&r.text(0)?, &r.text(1)?), r.int8(2)?)))
        .collect())
}

/// The allocator's job (`segment::register_job`): moves the mark of a fast serial's counter
/// up by `step` and returns the new mark, in the allocator's own committed transaction
/// (local), or in the registry (global: the mark is also kept locally, and shown the registry
/// at the next take). `args`: [global, serial id, period key, step]; `name`: the period's
/// text, and for a global serial ':' and the serial's name; `definition`: a global serial's
/// reset and format ('day|INV-...'), which must be the same on every node.
pub(super) fn take_in_allocator(
    name: &str,
    definition: &str,
    args: [i64; 4],
) -> Result<i64, Error> {
    let [global, id, _period, step] = args;
    let place = catalog::place()?;
    if global != 0 {
        let (period, serial) = name.split_once(':').unwrap_or((name, ""));
        let (reset, format) = definition.split_once('|').unwrap_or(("", definition));
        // The last mark this server took for the counter, kept in its own idgen_serial_counter
        // (committed with this transaction before any number of the new range is used): a
        // range at or below it would repeat texts, and is never used.
        let known: i64 = catalog::run(
            &place,
            "SELECT c.value FROM $S.idgen_serial_counter c WHERE c.serial = $1 AND c.period = $2",
            &[Arg::Int8(id), Arg::Text(Some(period))],
            1,
        )
        .first()
        .and_then(|r| r.int8(0))
        .unwrap_or(0);
        let row = crate::segment::registry_call(
            c"SELECT mark, revision FROM @extschema@.idgen_registry_serial_take($1::pg_catalog.text, \
              $2::pg_catalog.text, $3::pg_catalog.int8, $4::pg_catalog.text, $5::pg_catalog.text, \
              $6::pg_catalog.text, $7::pg_catalog.text)",
            &[
                Some(serial.to_owned()),
                Some(period.to_owned()),
                Some(step.to_string()),
                Some(crate::identity::incarnation().to_owned()),
                Some(crate::identity::secret().to_owned()),
                Some(reset.to_owned()),
                Some(format.to_owned()),
            ],
        )?;
        let refused = |why: &str| {
            Error::Relayed {
            sqlstate: PgSqlErrorCode::ERRCODE_PROTOCOL_VIOLATION as i32,
            message: format!("the registry's answer is refused: idgen_registry_serial_take: {why}"),
            detail: Some("Nothing of it was used.".into()),
            hint: Some("Check the registry's idgen functions (a registry database's owner or a superuser may have replaced them) and that idgen.registry reaches the registry (sslmode=verify-full).".into()),
        }
        };
        let row = row.ok_or_else(|| refused("the answer has no row"))?;
        let mark: i64 = row
            .first()
            .cloned()
            .flatten()
            .ok_or_else(|| refused("mark is NULL"))?
            .parse()
            .map_err(|_| refused("mark is not an integer"))?;
        // The range used is the `step` numbers up to the mark (`serial::shared`): all of them
        // above the mark this server took before.
        mark_fits(mark, step, known).map_err(|why| {
            // A counter below this server's own mark: a registry that lost commits before its
            // recovery opened. Never used.
            Error::Relayed {
                sqlstate: PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE as i32,
                message: format!("the registry has lost commits: global serial \"{serial}\"'s counter for \"{period}\": {why}"),
                detail: Some("No range is taken from it: texts could repeat.".into()),
                hint: Some("On the registry: SELECT idgen_registry_begin_recovery(); then complete it (docs: Running on many servers, \"Recovering a registry\").".into()),
            }
        })?;
        let revision: i64 = row
            .get(1)
            .cloned()
            .flatten()
            .ok_or_else(|| refused("revision is NULL"))?
            .parse()
            .map_err(|_| refused("revision is not an integer"))?;
        crate::marks::note_revision(revision);
        // Durable before any number of it is used: reported to the registry in a recovery.
        crate::marks::record(&mark_name(serial, period), mark, revision)?;
        catalog::run(
            &place,
            "INSERT INTO $S.idgen_serial_counter AS c (serial, period, value) VALUES ($1, $2, $3)
             ON CONFLICT (serial, period) DO UPDATE SET value = greatest(c.value, EXCLUDED.value)",
            &[Arg::Int8(id), Arg::Text(Some(period)), Arg::Int8(mark)],
            0,
        );
        return Ok(mark);
    }
    let rows = catalog::run(
        &place,
        "INSERT INTO $S.idgen_serial_counter AS c (serial, period, value) VALUES ($1, $2, $3)
         ON CONFLICT (serial, period) DO UPDATE SET value = c.value + EXCLUDED.value
         RETURNING c.value",
        &[Arg::Int8(id), Arg::Text(Some(name)), Arg::Int8(step)],
        0,
    );
    rows.first()
        .and_then(|r| r.int8(0))
        .ok_or(Error::UnknownSerial {
            name: format!("#{id}"),
        })
}

/// Whether `mark` can end the range of a take of `step` numbers of a counter whose previous
/// mark this server took is `known`: the range `mark - step + 1 ..= mark` lies above `known`
/// (the registry moved the counter up from at least `known` by `step`).
fn mark_fits(mark: i64, step: i64, known: i64) -> Result<(), String> {
    if mark <= known {
        return Err(format!(
            "mark {mark} is not above {known}, this server's previous mark of the counter"
        ));
    }
    if i128::from(mark) - i128::from(step) < i128::from(known) {
        return Err(format!(
            "mark {mark} less the {step} numbers taken is below {known}, this server's previous mark of the counter"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_mark_whose_range_reaches_below_the_previous_one_is_refused() {
        use super::mark_fits;
        assert_eq!(mark_fits(100, 100, 0), Ok(()));
        assert_eq!(mark_fits(500, 100, 300), Ok(()));
        assert!(mark_fits(300, 100, 300).unwrap_err().contains("not above"));
        assert!(mark_fits(350, 100, 300).unwrap_err().contains("below 300"));
        assert!(mark_fits(-1, 1, 0).is_err());
    }

    #[test]
    fn the_registry_compares_formats_without_the_counters_padding() {
        assert_eq!(
            super::registry_format("INV-{YYYY}-{seq:06}"),
            "INV-{YYYY}-{seq}"
        );
        assert_eq!(super::registry_format("A{seq}B"), "A{seq}B");
        assert_eq!(super::registry_format("{seq:012}x"), "{seq}x");
        assert_eq!(super::registry_format("x{seq:0"), "x{seq:0");
    }
}
