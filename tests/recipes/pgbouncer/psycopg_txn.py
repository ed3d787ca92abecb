"""psycopg 3 through pgbouncer's transaction pooling (run by tests/cluster/tests/pgbouncer.rs).

Environment: IDGEN_DSN (a pgbouncer database in transaction mode with a pool of 2 servers),
IDGEN_DSN_ONE (the same server through a pool of 1), IDGEN_CLIENTS, IDGEN_INSERTS. The table
py_orders(id DEFAULT snowflake_nextval(), no DEFAULT segment_nextval('order_no'), client, note)
exists.

1. IDGEN_CLIENTS connections with prepare_threshold=None, in threads, each run the same
   parametrized INSERT ... RETURNING id, no IDGEN_INSERTS times: half in autocommit, half in
   transactions of 5 inserts. Every id and number returned must be distinct and in the table.
2. Through the pool of 1 (both clients land on the one server backend), sequentially: two
   connections with psycopg's default prepare_threshold (5) each run the INSERT 10 times; the
   second one's prepare of "_pg3_0" fails (the first one's is still on the backend). Then two
   connections with prepare_threshold=None do the same without error.

Prints `key=value` lines for the Rust test to check; exits 1 on a failed check.
"""

import os
import sys
import threading

import psycopg

DSN = os.environ["IDGEN_DSN"]
DSN_ONE = os.environ["IDGEN_DSN_ONE"]
CLIENTS = int(os.environ.get("IDGEN_CLIENTS", "6"))
INSERTS = int(os.environ.get("IDGEN_INSERTS", "150"))
INSERT = "INSERT INTO py_orders (client, note) VALUES (%s, %s) RETURNING id, no"

results = {}
errors = []


def client(i):
    rows = []
    try:
        # prepare_threshold=None: psycopg never prepares a named statement, so nothing is left
        # on a server backend that the next transaction may not get.
        # --8<-- [start:connect]
        with psycopg.connect(DSN, prepare_threshold=None, autocommit=True) as conn:
        # --8<-- [end:connect]
            if i % 2 == 0:
                for k in range(INSERTS):
                    rows.append(conn.execute(INSERT, (i, f"c{i}-{k}")).fetchone())
            else:
                for k0 in range(0, INSERTS, 5):
                    with conn.transaction():
                        for k in range(k0, min(k0 + 5, INSERTS)):
                            rows.append(conn.execute(INSERT, (i, f"c{i}-{k}")).fetchone())
    except Exception as e:  # reported below, the test fails
        errors.append(f"client {i}: {type(e).__name__}: {e}")
    results[i] = rows


threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
for t in threads:
    t.start()
for t in threads:
    t.join()

rows = [r for i in range(CLIENTS) for r in results.get(i, [])]
ids = [r[0] for r in rows]
nos = [r[1] for r in rows]
with psycopg.connect(DSN, prepare_threshold=None, autocommit=True) as conn:
    found = conn.execute(
        "SELECT count(*) FROM py_orders p JOIN unnest(%s::bigint[], %s::bigint[]) r(id, no)"
        " ON p.id = r.id AND p.no = r.no",
        (ids, nos),
    ).fetchone()[0]

print(f"psycopg={psycopg.__version__}")
print(f"libpq={psycopg.pq.version()}")
print(f"errors={len(errors)}")
for e in errors:
    print(f"error: {e}")
print(f"returned={len(rows)}")
print(f"distinct_ids={len(set(ids))}")
print(f"distinct_nos={len(set(nos))}")
print(f"found={found}")


def run_twice(prepare_threshold):
    """Two connections in turn through the pool of one: the SQLSTATE of the first error, or
    'none'."""
    for who in ("a", "b"):
        try:
            with psycopg.connect(DSN_ONE, prepare_threshold=prepare_threshold, autocommit=True) as conn:
                for k in range(10):
                    conn.execute(INSERT, (100, f"{prepare_threshold}-{who}-{k}")).fetchone()
        except psycopg.Error as e:
            return e.sqlstate or type(e).__name__
    return "none"


print(f"default_threshold={run_twice(5)}")
print(f"threshold_none={run_twice(None)}")
sys.stdout.flush()
ok = not errors and len(set(ids)) == len(rows) == CLIENTS * INSERTS and len(set(nos)) == len(rows) and found == len(rows)
sys.exit(0 if ok else 1)
