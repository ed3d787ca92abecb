"""The SQLAlchemy recipe of README "Clients and ORMs", run against a real server by
tests/cluster/tests/clients.rs (IDGEN_DATABASE_URL: postgresql://user@host:port/dbname of a
database where idgen is created). Exits non-zero on the first assertion that fails.

  create_all: orders.id BIGINT DEFAULT snowflake_nextval() (no BIGSERIAL), orders.order_no
              BIGINT DEFAULT segment_nextval('order_no'), events.id the same as orders.id
  Order, server_default=text("snowflake_nextval()"): a flush of 1,000 new objects sends one
              INSERT ... RETURNING per object; each object gets its own row's id and number
  Event, server_default=func.snowflake_nextval(monotonic=True) (SQLAlchemy 2.1): the ids are
              increasing, so the ORM batches the 1,000 rows in INSERT ... RETURNING statements
              of up to 1,000 rows and sorts what returns by id; each object gets its own row's
"""

import os
import sys

sys.dont_write_bytecode = True

import psycopg  # noqa: E402
import sqlalchemy  # noqa: E402
from sqlalchemy import BigInteger, create_engine, event, func, select, text  # noqa: E402
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column  # noqa: E402

N = 1000
TWO_53 = 2**53


# --8<-- [start:models]
class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"

    id: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, server_default=text("snowflake_nextval()")
    )
    order_no: Mapped[int] = mapped_column(
        BigInteger, unique=True, server_default=text("segment_nextval('order_no')")
    )
    note: Mapped[str]


class Event(Base):
    __tablename__ = "events"

    # monotonic=True (SQLAlchemy 2.1): ids increase in insert order, so a bulk flush batches.
    id: Mapped[int] = mapped_column(
        BigInteger, primary_key=True, server_default=func.snowflake_nextval(monotonic=True)
    )
    note: Mapped[str]
# --8<-- [end:models]


url = os.environ["IDGEN_DATABASE_URL"].replace("postgresql://", "postgresql+psycopg://", 1)
engine = create_engine(url)
print(
    f"sqlalchemy {sqlalchemy.__version__}, psycopg {psycopg.__version__},"
    f" python {sys.version.split()[0]}"
)

with engine.begin() as conn:
    conn.execute(text("SELECT segment_create('order_no', start => 100000)"))
Base.metadata.create_all(engine)

with engine.connect() as conn:
    defaults = conn.execute(
        text(
            "SELECT attrelid::regclass::text || '.' || attname, pg_get_expr(adbin, adrelid)"
            " FROM pg_attrdef JOIN pg_attribute ON attrelid = adrelid AND attnum = adnum"
            " WHERE adrelid IN ('orders'::regclass, 'events'::regclass)"
        )
    ).all()
assert dict(defaults) == {
    "orders.id": "snowflake_nextval()",
    "orders.order_no": "segment_nextval('order_no'::text)",
    "events.id": "snowflake_nextval()",
}, defaults
print("create_all: " + ", ".join(f"{c} DEFAULT {d}" for c, d in sorted(defaults)))

statements = []
event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))


def flush(session, objs):
    """Adds and flushes `objs`; returns the INSERT statements sent."""
    statements.clear()
    session.add_all(objs)
    session.flush()
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    assert inserts and all("RETURNING" in s for s in inserts), inserts[:1]
    ids = [o.id for o in objs]
    assert all(isinstance(i, int) and i > TWO_53 for i in ids), ids[:3]
    assert len(set(ids)) == len(objs)
    return inserts


with Session(engine) as session:
    one = Order(note="first")
    flush(session, [one])
    session.commit()
    assert one.order_no == 100000, one.order_no
    print(f"Order add + commit: id {one.id}, order_no {one.order_no}")

    orders = [Order(note=f"bulk {i}") for i in range(N)]
    inserts = flush(session, orders)
    assert len(inserts) == N, len(inserts)
    session.commit()
    print(f"Order flush of {N}: {len(inserts)} INSERT ... RETURNING statements, {N} distinct ids")

    rows = {r.id: (r.order_no, r.note) for r in session.execute(select(Order.id, Order.order_no, Order.note))}
    assert len(rows) == N + 1
    # Each object holds its own row's id and number, not just some id of the batch.
    assert all(rows[o.id] == (o.order_no, o.note) for o in orders + [one])
    numbers = sorted(r[0] for r in rows.values())
    assert numbers == list(range(100000, 100000 + N + 1)), (numbers[:3], numbers[-3:])
    print(f"orders: {len(rows)} rows, each object's id and order_no its row's, order_no 100000..{numbers[-1]}")

    events = [Event(note=f"event {i}") for i in range(N)]
    inserts = flush(session, events)
    assert len(inserts) < 10, len(inserts)
    session.commit()
    rows = dict(session.execute(select(Event.id, Event.note)).all())
    assert len(rows) == N and all(rows[e.id] == e.note for e in events)
    print(
        f"Event flush of {N}: {len(inserts)} INSERT ... RETURNING statement(s),"
        f" {len(rows)} rows, each object's id its row's"
    )

print("sqlalchemy recipe ok")
