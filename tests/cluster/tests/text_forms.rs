//! Pins the text forms of Snowflake ids on a real server: rows carrying
//! `DEFAULT snowflake_nextval()` keep every digit of their ids through JSON when the id travels
//! as text (ids are above 2^53, where a JSON number read by JavaScript loses digits), and
//! `snowflake_format` reads back with `snowflake_parse` and sorts as the ids do.

use idgen_cluster_tests::{column, Cluster, One};

#[test]
fn ids_round_trip_exactly_through_json_as_text_and_through_the_text_form() {
    let cluster = Cluster::with_idgen("text-forms", 9, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute(
            "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), note text);
             INSERT INTO orders (note) SELECT 'order ' || g FROM generate_series(1, 1000) g;",
        )
        .unwrap();

    // Every id is beyond 2^53: as a JSON number, JavaScript's JSON.parse would round it.
    let below: i64 = client.one("SELECT count(*) FROM orders WHERE id <= 9007199254740992");
    assert_eq!(
        below, 0,
        "the ids are above 2^53, so the test means something"
    );

    // to_jsonb(row) keeps the bigint as an exact JSON number in PostgreSQL; taken out as
    // text it reads back to the same id, digit for digit.
    let exact: i64 = client.one(
        "SELECT count(*) FROM orders o
          WHERE (to_jsonb(o) ->> 'id')::bigint = o.id
            AND (to_jsonb(o) -> 'id')::text = o.id::text
            AND jsonb_typeof(to_jsonb(o) -> 'id') = 'number'",
    );
    assert_eq!(exact, 1000);
    // The safe pattern for JavaScript clients: the id as a JSON string.
    let strings: i64 = client.one(
        "SELECT count(*) FROM orders o, LATERAL (SELECT jsonb_build_object('id', o.id::text) j) s
          WHERE jsonb_typeof(s.j -> 'id') = 'string' AND (s.j ->> 'id')::bigint = o.id",
    );
    assert_eq!(strings, 1000);
    // A JSON number does lose digits where JavaScript reads it as a double (shown with
    // PostgreSQL's own float8, the same IEEE double): that is why the id goes as text.
    let rounded: i64 = client
        .one("SELECT count(*) FROM orders o WHERE (to_jsonb(o) ->> 'id')::float8::numeric <> o.id");
    assert!(rounded > 0, "a double cannot hold these ids");

    // The text form: reads back exactly, sorts as the ids, carries this server's worker id.
    let back: i64 = client.one(
        "SELECT count(*) FROM orders WHERE snowflake_parse(snowflake_format(id, 'ORD-')) = id",
    );
    assert_eq!(back, 1000);
    let by_id: Vec<i64> = column(&mut client, "SELECT id FROM orders ORDER BY id");
    let by_text: Vec<i64> = column(
        &mut client,
        "SELECT id FROM orders ORDER BY snowflake_format(id, 'ORD-') COLLATE \"C\"",
    );
    assert_eq!(by_id, by_text);
    let workers: Vec<String> = column(
        &mut client,
        "SELECT DISTINCT substr(snowflake_format(id, 'ORD-'), 4 + 18, 4) FROM orders",
    );
    assert_eq!(workers, ["0009"]);
}
