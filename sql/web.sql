-- idgen's install script: text forms and short ids for the web (docs: guide/text-forms.md,
-- guide/short-ids.md). pgrx creates the functions (src/snowflake/mod.rs, src/sqids.rs); this file documents
-- them.

COMMENT ON FUNCTION snowflake_format(bigint, text) IS
  'Text form of a Snowflake id: prefix + UTC yyyyMMddHHmmssSSS of its tick + worker id + sequence, fixed width; sorts as the ids do.';
COMMENT ON FUNCTION snowflake_parse(text) IS
  'The Snowflake id of a text made by snowflake_format (any prefix).';
COMMENT ON FUNCTION sqids_encode(bigint, text, integer) IS
  'Short text of a non-negative bigint for URLs (sqids.org): alphabet NULL for the default, padded to min_length (0-255). Not encryption: anyone can decode it.';
COMMENT ON FUNCTION sqids_decode(text, text, integer) IS
  'The bigint whose sqid (as sqids_encode makes it, with the same alphabet and min_length) is the text; 22P02 for any other text.';
