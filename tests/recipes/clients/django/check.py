"""The Django recipe of README "Clients and ORMs", run against a real server by
tests/cluster/tests/clients.rs (IDGEN_DATABASE_URL names an empty database on a server that
preloads idgen). Exits non-zero on the first assertion that fails; prints what it saw.

  migrate: the migration creates the extension, the serial 'invoice' and the table, whose
           columns default to snowflake_nextval() and serial_nextval('invoice')
  create:  Order.objects.create() returns the row's id (RETURNING)
  bulk_create of 1,000: Django 6.x sets every id; Django 5.2 leaves pk a DatabaseDefault, and
           ids drawn first with snowflake_nextvals(1000) are the workaround
  migrate shop zero: the serial and the extension are dropped again

With IDGEN_APP_ROLE=1 the URL's user is an application role, not a superuser: the extension was
created beforehand by a superuser (idgen is not a trusted extension) and the role is a member of
idgen_admin (for serial_create). The migration then runs the same, and `migrate shop zero` fails
with 42501 (only the extension's owner may drop it), rolled back whole.
"""

import os
import sys

sys.dont_write_bytecode = True
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, ProgrammingError, connection, transaction  # noqa: E402
from django.db.models.expressions import DatabaseDefault  # noqa: E402

from shop.models import Order  # noqa: E402

N = 1000
TWO_53 = 2**53


def scalar(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()[0]


# --8<-- [start:bulk-create]
def bulk_create_with_ids(model, objs):
    """bulk_create on Django 5.2 with Snowflake ids drawn first (README's workaround)."""
    with connection.cursor() as cur:
        cur.execute("SELECT snowflake_nextvals(%s)", [len(objs)])
        for obj, (id_,) in zip(objs, cur.fetchall(), strict=True):
            obj.pk = id_
    return model.objects.bulk_create(objs)
# --8<-- [end:bulk-create]


def table():
    """{id: (number, note)} of every row."""
    with connection.cursor() as cur:
        cur.execute("SELECT id, number, note FROM shop_order")
        return {i: (num, note) for i, num, note in cur.fetchall()}


APP_ROLE = os.environ.get("IDGEN_APP_ROLE") == "1"
superuser = scalar("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
assert superuser != APP_ROLE, (superuser, APP_ROLE)
print(
    f"django {django.get_version()}, python {sys.version.split()[0]},"
    f" as {'an application role' if APP_ROLE else 'a superuser'}"
)

# The migration is what makemigrations would write for the model (no pending changes), and
# it creates the extension (unless there already) and the serial.
extension_before = scalar("SELECT count(*) FROM pg_extension WHERE extname = 'idgen'")
assert extension_before == (1 if APP_ROLE else 0), extension_before
call_command("migrate", verbosity=0)
call_command("makemigrations", "shop", check=True, dry_run=True, verbosity=0)
assert scalar("SELECT count(*) FROM pg_extension WHERE extname = 'idgen'") == 1
assert scalar("SELECT count(*) FROM idgen_serials WHERE name = 'invoice'") == 1
default = scalar(
    "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef"
    " WHERE adrelid = 'shop_order'::regclass AND adnum = 1"
)
assert default == "snowflake_nextval()", default
print(f"migrate: extension, serial 'invoice', id DEFAULT {default}")

# create(): the id and the number come back from the INSERT.
o = Order.objects.create(note="first")
assert isinstance(o.id, int) and o.id > TWO_53, repr(o.id)
assert isinstance(o.number, str) and o.number.startswith("INV-"), repr(o.number)
assert table() == {o.id: (o.number, "first")}
print(f"create: id {o.id}, number {o.number}")

# bulk_create of N objects without ids.
objs = [Order(note=f"bulk {i}") for i in range(N)]
created = Order.objects.bulk_create(objs)
rows = table()
assert len(rows) == N + 1, len(rows)
assert len({num for num, _ in rows.values()}) == N + 1
if django.VERSION >= (6, 0):
    ids = [x.pk for x in created]
    assert all(isinstance(i, int) and i > TWO_53 for i in ids), ids[:3]
    assert len(set(ids)) == N
    # Each object got its own row's id (and number), not just some id of the batch.
    assert all(rows[x.pk] == (x.number, x.note) for x in created)
    print(f"bulk_create: {N} objects, {len(set(ids))} distinct ids set, each its own row's")
else:
    # Django 5.2: the rows are inserted with DEFAULT ids, but the objects do not learn them.
    left = sum(isinstance(x.pk, DatabaseDefault) for x in created)
    assert left == N, left
    # The numbers do come back, each object its own row's.
    numbers = {num for num, _ in rows.values()} - {o.number}
    assert [x.number for x in created] == sorted(numbers), [x.number for x in created][:3]
    print(
        f"bulk_create: {N} rows inserted, pk left a DatabaseDefault on {left} objects"
        f" (their numbers set)"
    )
    # Such an object is not its row: save() INSERTs it again (a new id, a second row), which
    # only the unique number stops here.
    stale = created[0]
    stale.note = "changed"
    sent = []
    try:
        with connection.execute_wrapper(lambda run, sql, *a: sent.append(sql) or run(sql, *a)):
            with transaction.atomic():
                stale.save()
        raise AssertionError("save() of a bulk_create object succeeded")
    except IntegrityError as e:
        assert "shop_order_number_key" in str(e), e
    # UPDATE ... WHERE id = (snowflake_nextval()) matches no row, then a new row is INSERTed.
    assert [q.split()[0] for q in sent] == ["UPDATE", "INSERT"], sent
    assert "snowflake_nextval()" in sent[0], sent
    assert len(table()) == N + 1
    print(
        "save() of such an object: UPDATE of no row, then INSERT of a second row"
        " (refused here by the unique number)"
    )
    # The workaround: draw the ids first, in one statement, and set them.
    created = bulk_create_with_ids(Order, [Order(note=f"pre {i}") for i in range(N)])
    ids = [x.pk for x in created]
    rows = table()
    assert len(rows) == 2 * N + 1, len(rows)
    assert len(set(ids)) == N and all(isinstance(i, int) and i > TWO_53 for i in ids)
    assert all(rows[x.pk] == (x.number, x.note) for x in created)
    print(
        f"bulk_create after snowflake_nextvals({N}): {N} distinct ids, each its own row's"
        " (and number)"
    )

total = scalar("SELECT count(*) FROM shop_order")
distinct = scalar("SELECT count(DISTINCT id) + count(DISTINCT number) FROM shop_order")
assert distinct == 2 * total == 2 * len(rows), (total, distinct)
print(f"table: {total} rows, {total} distinct ids and numbers")

if not APP_ROLE:
    # The migration reverses: the table, the serial and the extension go.
    call_command("migrate", "shop", "zero", verbosity=0)
    assert scalar("SELECT count(*) FROM pg_extension WHERE extname = 'idgen'") == 0
    print("migrate shop zero: table, serial and extension dropped")
else:
    # An application role cannot drop the extension: the reversal fails and nothing changes.
    try:
        call_command("migrate", "shop", "zero", verbosity=0)
        raise AssertionError("migrate shop zero succeeded as an application role")
    except ProgrammingError as e:
        assert e.__cause__.sqlstate == "42501", e
        refused = str(e).strip()
    connection.close()
    assert scalar("SELECT count(*) FROM shop_order") == total
    assert scalar("SELECT count(*) FROM idgen_serials WHERE name = 'invoice'") == 1
    print(f"migrate shop zero: 42501 ({refused}), rolled back: {total} rows and the serial kept")
print("django recipe ok")
