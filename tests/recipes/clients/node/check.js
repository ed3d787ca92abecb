// The node-postgres recipe of README "Clients and ORMs", run against a real server by
// tests/cluster/tests/clients.rs (IDGEN_DATABASE_URL: postgresql://user@host:port/dbname of a
// database where idgen is created; NODE_PATH finds `pg`). Exits non-zero on the first assertion
// that fails; prints what it saw.
//
//   (a) default: int8 arrives as a string, every digit kept; it goes back as a parameter as is
//   (b) setTypeParser(20, BigInt): exact BigInts; JSON.stringify throws a TypeError on them
//       unless a replacer writes them as strings
//   (c) setTypeParser(20, parseInt): the trap; ids above 2^53 come back as other numbers, and
//       distinct ids become equal
//   (d) JSON built by the server (to_jsonb(row), json_agg) and parsed by pg: the id is a JSON
//       number and JSON.parse loses digits; the id as text in the JSON round-trips exactly
'use strict';

const assert = require('node:assert/strict');
const pg = require('pg');

const N = 1000;
const TWO_53 = 2n ** 53n;

// How many of `values` (numbers or strings from a JSON parse) are not the exact ids.
function changed(values, exact) {
  return values.filter((v, i) => BigInt(v) !== BigInt(exact[i])).length;
}

async function main() {
  const pgVersion = require('pg/package.json').version;
  console.log(`node ${process.version}, pg ${pgVersion}`);
  const client = new pg.Client({ connectionString: process.env.IDGEN_DATABASE_URL });
  await client.connect();
  try {
    await client.query(
      'CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), note text NOT NULL)'
    );

    // (a) The default: int8 is a string.
    const ins = await client.query(
      `INSERT INTO orders (note) SELECT 'order ' || g FROM generate_series(1, ${N}) g
       RETURNING id, id::text AS id_text`
    );
    assert.equal(ins.rows.length, N);
    for (const r of ins.rows) {
      assert.equal(typeof r.id, 'string');
      assert.equal(r.id, r.id_text);
      assert.ok(BigInt(r.id) > TWO_53, r.id);
    }
    assert.equal(new Set(ins.rows.map((r) => r.id)).size, N);
    const exact = ins.rows.map((r) => r.id_text);
    // A string id goes back as a parameter and finds its row.
    const back = await client.query('SELECT note FROM orders WHERE id = $1', [exact[N - 1]]);
    assert.equal(back.rows[0].note, `order ${N}`);
    console.log(`(a) default: ${N} ids as strings, all equal to id::text, e.g. ${exact[0]}`);

    const defaultParser = pg.types.getTypeParser(20, 'text');
    const byId = 'SELECT id, id::text AS id_text, note FROM orders ORDER BY id';

    // (b) BigInt.
    // --8<-- [start:bigint]
    pg.types.setTypeParser(20, BigInt);
    // --8<-- [end:bigint]
    const big = (await client.query(byId)).rows;
    assert.equal(big.length, N);
    for (const r of big) {
      assert.equal(typeof r.id, 'bigint');
      assert.equal(r.id, BigInt(r.id_text));
    }
    assert.throws(() => JSON.stringify(big[0]), TypeError);
    // --8<-- [start:replacer]
    const replacer = (key, value) => (typeof value === 'bigint' ? value.toString() : value);
    const json = JSON.stringify(big, replacer);
    // --8<-- [end:replacer]
    assert.deepEqual(
      JSON.parse(json).map((r) => r.id),
      big.map((r) => r.id_text)
    );
    // A BigInt goes back as a parameter too.
    const back2 = await client.query('SELECT id::text AS id_text FROM orders WHERE id = $1', [big[7].id]);
    assert.equal(back2.rows[0].id_text, big[7].id_text);
    console.log(
      `(b) setTypeParser(20, BigInt): ${N} exact BigInts; JSON.stringify throws TypeError;` +
        ` with the replacer ${N} ids as exact JSON strings`
    );

    // (c) parseInt: the trap.
    pg.types.setTypeParser(20, parseInt);
    const num = (await client.query(byId)).rows;
    const ids = num.map((r) => r.id_text);
    assert.ok(num.every((r) => typeof r.id === 'number' && !Number.isSafeInteger(r.id)));
    const wrong = changed(
      num.map((r) => r.id),
      ids
    );
    const distinct = new Set(num.map((r) => r.id)).size;
    assert.ok(wrong > 0, 'parseInt changed no id');
    assert.ok(distinct < N, 'no two ids became equal');
    console.log(
      `(c) setTypeParser(20, parseInt): ${wrong} of ${N} ids changed; ${N} distinct ids became` +
        ` ${distinct} distinct numbers (${N - distinct} ids collapsed onto another's number),` +
        ` e.g. ${ids[1]} -> ${num[1].id}`
    );
    pg.types.setTypeParser(20, defaultParser);

    // (d) JSON from the server, parsed by pg with JSON.parse.
    const rowJson = (
      await client.query('SELECT to_jsonb(o) AS j, o.id::text AS id_text FROM orders o ORDER BY o.id')
    ).rows;
    assert.ok(rowJson.every((r) => typeof r.j.id === 'number'));
    const lostRow = changed(
      rowJson.map((r) => r.j.id),
      rowJson.map((r) => r.id_text)
    );
    assert.ok(lostRow > 0, 'to_jsonb lost no digit');
    const agg = (
      await client.query(
        'SELECT json_agg(o ORDER BY o.id) AS a, array_agg(o.id::text ORDER BY o.id) AS ids FROM orders o'
      )
    ).rows[0];
    const lostAgg = changed(
      agg.a.map((o) => o.id),
      agg.ids
    );
    assert.ok(lostAgg > 0, 'json_agg lost no digit');
    // The fix: the id as text inside the JSON.
    const fixedRow = (
      await client.query(
        `SELECT to_jsonb(o) || jsonb_build_object('id', o.id::text) AS j, o.id::text AS id_text
           FROM orders o ORDER BY o.id`
      )
    ).rows;
    assert.ok(fixedRow.every((r) => r.j.id === r.id_text && r.j.note.startsWith('order ')));
    const fixedAgg = (
      await client.query(
        `SELECT json_agg(jsonb_build_object('id', o.id::text, 'note', o.note) ORDER BY o.id) AS a,
                array_agg(o.id::text ORDER BY o.id) AS ids FROM orders o`
      )
    ).rows[0];
    assert.deepEqual(
      fixedAgg.a.map((o) => o.id),
      fixedAgg.ids
    );
    console.log(
      `(d) JSON from the server: to_jsonb(row) lost digits of ${lostRow} of ${N} ids, json_agg` +
        ` of ${lostAgg}; with id::text in the JSON ${N} of ${N} exact (both)`
    );
  } finally {
    await client.end();
  }
  console.log('node-postgres recipe ok');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
