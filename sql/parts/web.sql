-- Ids for the web (branch web-ids): the SQL objects new since idgen 0.5.0, for the upgrade
-- script idgen--0.5.0--0.6.0.sql. Paste from the first statement to the end.
--
-- * snowflake_status() gains the column id_bits (idgen.id_bits, the width of a whole id) after
--   worker_id. Its row type changes, which CREATE OR REPLACE cannot do: it is dropped and
--   created again, and its comment and ROWS 1 (finalize.sql in a fresh install) set again. An
--   update fails with 2BP01 while a user's view or function depends on snowflake_status().
-- * sqids_encode / sqids_decode (src/sqids.rs): short ids for URLs.
--
-- The CREATE FUNCTION statements are pgrx's (`cargo pgrx schema pg16`), verbatim but for OR
-- REPLACE on the two new functions. So the file runs both in an update and in a fresh install
-- after pgrx has created the functions (src/lib.rs includes it there, as name "web", so that
-- both end with the same objects): once idgen--0.5.0--0.6.0.sql holds these statements and a
-- fresh install includes that script, drop the include of this file from src/lib.rs.
--
-- Privileges: none to grant or revoke. The three functions are EXECUTE to PUBLIC, as every
-- Snowflake decoder and snowflake_status() are today (a dropped and re-created function gets
-- PostgreSQL's default, PUBLIC, which is what 0.5.0 had); sqids_* are pure and read nothing.

DROP FUNCTION snowflake_status();
CREATE FUNCTION "snowflake_status"() RETURNS TABLE (
	"worker_id" INT,  /* Option < i32 > */
	"id_bits" INT,  /* i32 */
	"time_bits" INT,  /* i32 */
	"worker_bits" INT,  /* i32 */
	"sequence_bits" INT,  /* i32 */
	"time_unit_ms" INT,  /* i32 */
	"epoch" timestamp with time zone,  /* TimestampWithTimeZone */
	"exhausted_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_id" bigint,  /* Option < i64 > */
	"last_tick_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"drift_ms" bigint,  /* i64 */
	"borrowed_ticks" bigint,  /* i64 */
	"waits" bigint,  /* i64 */
	"clock_failures" bigint,  /* i64 */
	"clock_regressions" bigint,  /* i64 */
	"reserved_tick" bigint,  /* Option < i64 > */
	"reserved_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"reservation_writes" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_status_wrapper';
COMMENT ON FUNCTION snowflake_status() IS
  'This server''s Snowflake generator: worker id, layout, epoch, last id, drift and borrowed ticks.';
ALTER FUNCTION snowflake_status() ROWS 1;

CREATE OR REPLACE FUNCTION "sqids_encode"(
	"id" bigint, /* Option < i64 > */
	"alphabet" TEXT DEFAULT NULL, /* Option < & str > */
	"min_length" INT DEFAULT 0 /* Option < i32 > */
) RETURNS TEXT /* Option < String > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sqids_encode_wrapper';
COMMENT ON FUNCTION sqids_encode(bigint, text, integer) IS
  'Short text of a non-negative bigint for URLs (sqids.org): alphabet NULL for the default, padded to min_length (0-255). Not encryption: anyone can decode it.';

CREATE OR REPLACE FUNCTION "sqids_decode"(
	"text" TEXT, /* Option < & str > */
	"alphabet" TEXT DEFAULT NULL, /* Option < & str > */
	"min_length" INT DEFAULT 0 /* Option < i32 > */
) RETURNS bigint /* Option < i64 > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sqids_decode_wrapper';
COMMENT ON FUNCTION sqids_decode(text, text, integer) IS
  'The bigint whose sqid (as sqids_encode makes it, with the same alphabet and min_length) is the text; 22P02 for any other text.';
