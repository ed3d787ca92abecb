-- idgen's install script: the registry (DESIGN.md §6, docs: operations/many-servers.md).
--
-- A registry is any database with idgen installed. Nodes (servers with idgen.registry set)
-- lease their Snowflake worker ids here, and take the ranges of global segments and global
-- serials, through the SECURITY DEFINER functions below: each is one short transaction on the
-- registry's own clock (clock_timestamp()), granted to the role idgen_registry, with
-- search_path pinned to pg_catalog, every table qualified with idgen's schema and every call
-- exactly typed. The guarantee: every id a node issues under a worker id has a tick at most
-- the fence_tick (R) recorded here for its lease, and whoever takes the worker id next starts
-- strictly above it (at floor_tick), whatever the nodes' clocks say.
--
-- * Holders prove who they are. A node sends a secret of its own with its claim (32 random
--   bytes made at its start, src/identity.rs); the registry keeps only its SHA-256 and renews,
--   releases and re-grants a lease only for a caller that shows it (42501 otherwise). An
--   incarnation is a name, never a credential, and no error shows another holder's incarnation.
-- * A global segment's mark only rises: no node gives numbers back (a gap in a 2^63 space is
--   accepted, as on a crash).
-- * A registry keeps what it acknowledged through a restart, a crash and a failover to a
--   synchronous standby (idgen_registry_check_durable). Anything else that loses commits (a
--   restore, a failover to an asynchronous standby, a dump reload) is an operator event: the
--   registry opens a recovery when it can see one (another identity, a node that saw a
--   revision above its own) and the operator opens one when it cannot; while it is open nothing
--   is granted and no range handed out, the nodes report what they hold, and the operator's
--   idgen_registry_recover() raises every mark above the reports. After every new epoch (a
--   start, a failover, a recovery) nothing is granted for a longest lease, so no grant starts
--   below a tick that a lost renewal allowed (DESIGN.md §6 "Fault model").
-- * Every function waits at most lock_timeout = 2s for a lock (55P03), so one stuck lock on the
--   lease table cannot hang the fleet.

-- The one Snowflake layout of every node of this registry, recorded by the first claim.
CREATE TABLE idgen_registry_fleet (
    singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch_unix_ms bigint      NOT NULL,
    worker_bits   integer     NOT NULL CHECK (worker_bits BETWEEN 0 AND 31),
    sequence_bits integer     NOT NULL CHECK (sequence_bits BETWEEN 0 AND 31),
    time_unit_ms  integer     NOT NULL CHECK (time_unit_ms > 0),
    created_at    timestamptz NOT NULL
);
COMMENT ON TABLE idgen_registry_fleet IS
  'The registry''s one Snowflake layout (epoch, bit widths, tick), recorded by the first claim.';

-- One row per worker id ever leased. fence_tick is R: the holder issues no id with a larger
-- tick. released_tick is set by a clean release: the holder's final reservation, the first tick
-- it never reached. A new holder starts at released_tick, else at fence_tick + 1.
CREATE TABLE idgen_registry_lease (
    worker_id         integer     PRIMARY KEY CHECK (worker_id >= 0),
    node_name         text        NOT NULL CHECK (octet_length(node_name) BETWEEN 1 AND 63),
    incarnation       text        NOT NULL,
    system_identifier text        NOT NULL,
    timeline          integer     NOT NULL,
    address           text,
    start_tick        bigint      NOT NULL,
    fence_tick        bigint      NOT NULL,
    released_tick     bigint,
    lease_ms          integer     NOT NULL,
    renew_interval_ms integer     NOT NULL,
    claimed_at        timestamptz NOT NULL,
    renewed_at        timestamptz NOT NULL,
    expires_at        timestamptz NOT NULL,
    clock_offset_ms   double precision,
    renewals          bigint      NOT NULL DEFAULT 0,
    holder_key        text,
    attested_standbys text[]      NOT NULL DEFAULT '{}'
);
COMMENT ON TABLE idgen_registry_lease IS
  'Worker id leases of the registry: no holder issues an id past fence_tick; the next starts above it.';
COMMENT ON COLUMN idgen_registry_lease.holder_key IS
  'SHA-256 (hex) of the holder''s secret: renew, release and a re-claim by the same incarnation must show the secret.';
COMMENT ON COLUMN idgen_registry_lease.attested_standbys IS
  'Unused since 0.9.0, which removed succession by promotion: kept so that dumps of earlier releases restore.';

-- Global segments (Leaf's own design, one high-water mark per name in the registry): a node's
-- allocator takes each range with one committed UPDATE ... RETURNING here and caches it in its
-- double buffer. Every number <= max_id may have been handed out by some node; none above.
CREATE TABLE idgen_registry_segment (
    name            text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_id          bigint      NOT NULL,
    step            integer     NOT NULL CHECK (step > 0),
    description     text        CHECK (octet_length(description) <= 1024),
    ranges          bigint      NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    taken_first     bigint,
    taker           text,
    taker_key       text,
    given_back_by   text,
    given_back_from bigint
);
COMMENT ON TABLE idgen_registry_segment IS
  'Global segments of the registry: numbers <= max_id may have been handed out by some node, numbers above never.';
COMMENT ON COLUMN idgen_registry_segment.taker IS
  'Incarnation of the node that took the range that set max_id, for operators (never a credential).';
COMMENT ON COLUMN idgen_registry_segment.taken_first IS
  'Unused (NULL) since 0.9.0, which removed global give-back, as are taker_key, given_back_by and given_back_from: kept so that dumps of earlier releases restore.';

-- Unused since 0.9.0 (a recovery replaced the regression reports, DESIGN.md §6): what nodes of
-- earlier releases showed the registry to have lost. It stays so that dumps of them restore.
CREATE TABLE idgen_registry_regression (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    detected_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    worker_id        integer,
    segment          text,
    registry_value   bigint      NOT NULL,
    node_value       bigint      NOT NULL,
    node_name        text,
    incarnation      text,
    reported_by      text        NOT NULL,
    reporter_address text,
    resolved_at      timestamptz,
    dismissed        boolean     NOT NULL DEFAULT false,
    serial           text,
    serial_period    text,
    CONSTRAINT idgen_registry_regression_check
        CHECK (pg_catalog.num_nonnulls(worker_id, segment, serial) = 1
               AND (serial IS NULL) = (serial_period IS NULL))
);
COMMENT ON TABLE idgen_registry_regression IS
  'Unused since 0.9.0: regressions nodes of earlier releases reported (kept so that their dumps restore).';

-- A random token made when the extension is created here (not dumped): a dump reloaded into
-- the same running server makes a new one, so it counts as another server too.
CREATE TABLE idgen_registry_install (token text NOT NULL);
INSERT INTO idgen_registry_install VALUES (pg_catalog.gen_random_uuid()::pg_catalog.text);
COMMENT ON TABLE idgen_registry_install IS
  'A token made at CREATE EXTENSION (not dumped): part of the registry server''s identity.';

-- Which server this registry is, where its current epoch began, and its recovery. One row,
-- written by idgen_registry_hello only (a statement of its own, so that nothing refused after
-- it rolls the record back). The identity is the install token (made at CREATE EXTENSION, never
-- dumped) and the system identifier: a dump reloaded, idgen installed again or another cluster
-- is another server, and its recovery opens by itself. The epoch is the later of the postmaster's
-- start, the last change of identity or timeline (a failover, a point-in-time recovery) and the
-- last recovery: every commit the registry may have lost was made before it, so for one
-- longest lease after it nothing is granted, and for half of one (a whole one after a recovery)
-- no range is handed out, while
-- every live node shows the registry the revision it saw (DESIGN.md §6 "Fault model").
-- The columns ranges_until, claims_until, max_lease_ms and max_renew_ms are unused since 0.9.0
-- (no probation depends on a value a node sent); they stay so that dumps of earlier releases
-- restore.
CREATE TABLE idgen_registry_server (
    singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    server_identity    text        NOT NULL,
    ranges_until       timestamptz,
    claims_until       timestamptz,
    max_lease_ms       bigint      NOT NULL DEFAULT 0,
    max_renew_ms       bigint      NOT NULL DEFAULT 0,
    timeline           integer,
    epoch_at           timestamptz,
    recovery_since     timestamptz,
    recovery_reason    text,
    recovery_opened_by text,
    recovered_at       timestamptz
);
COMMENT ON TABLE idgen_registry_server IS
  'The registry server (install token, system identifier, timeline), where its epoch began, and its open recovery.';

-- The registry's revision (etcd's): every grant, renewal, release and range takes the next
-- value and answers it; a node remembers the highest it saw. A node showing one above the
-- registry's own proves that the registry lost commits: its recovery opens.
CREATE SEQUENCE idgen_registry_revision AS bigint NO CYCLE;
COMMENT ON SEQUENCE idgen_registry_revision IS
  'The registry''s revision: raised by every change it commits, answered to the nodes, never lowered but by an operator event.';

-- Every node that ever talked to the registry (its hello), by node name, with the role of its
-- first hello (the name is that role's: no other member acts as this node), and the highest
-- revision the registry answered it (committed with each answer): the recovery waits for each
-- to report, or for the operator to skip it.
CREATE TABLE idgen_registry_node (
    node_name   text        PRIMARY KEY CHECK (octet_length(node_name) BETWEEN 1 AND 63),
    incarnation text        NOT NULL,
    role        text        NOT NULL,
    address     text,
    first_seen  timestamptz NOT NULL,
    last_seen   timestamptz NOT NULL,
    revision    bigint      NOT NULL DEFAULT 0,
    -- The completed recovery that used this node's report (its recovered_at): a node whose
    -- report was not used in the last one (skipped, or silent) drops its cached global ranges
    -- at its next hello.
    ranges_kept_at timestamptz
);
COMMENT ON TABLE idgen_registry_node IS
  'Nodes known to the registry (each hello): a recovery waits for every one to report, or for the operator to skip it.';

-- Which node (and role) each incarnation said hello as: a take names only its incarnation, and
-- the revision it is answered is recorded as answered to that node (two servers may share a
-- node name: both count). Rows not seen for a day are dropped by the next hello.
CREATE TABLE idgen_registry_incarnation (
    incarnation text        PRIMARY KEY CHECK (octet_length(incarnation) BETWEEN 1 AND 200),
    node_name   text        NOT NULL,
    role        text        NOT NULL,
    seen_at     timestamptz NOT NULL
);
COMMENT ON TABLE idgen_registry_incarnation IS
  'Registry: the node and role each incarnation said hello as.';

-- What each node reported in the open recovery, from its own state: the worker id it holds
-- and the first tick its reservation never reached, the marks of the global segments and
-- serial counters it took ranges of (names as in idgen_registry_report_marks), the highest
-- revision it saw. idgen_registry_recover() raises everything above these.
CREATE TABLE idgen_registry_recovery_report (
    node_name      text        PRIMARY KEY CHECK (octet_length(node_name) BETWEEN 1 AND 63),
    recovery_since timestamptz NOT NULL,
    reported_at    timestamptz NOT NULL,
    reported_by    text        NOT NULL,
    address        text,
    incarnation    text        NOT NULL,
    incarnations   text[]      NOT NULL DEFAULT '{}',
    worker_id      integer,
    reserved_tick  bigint,
    names          text[]      NOT NULL,
    marks          bigint[]    NOT NULL,
    revision       bigint      NOT NULL,
    CHECK (pg_catalog.cardinality(names) = pg_catalog.cardinality(marks))
);
COMMENT ON TABLE idgen_registry_recovery_report IS
  'Registry: each node''s report in the open recovery (worker id, reservation, marks, revision), with the role that sent it.';

-- The registry's side of global serials: one counter per (serial name, period), whose mark a
-- node moves up by a step at a time (like a global segment's).
CREATE TABLE idgen_registry_serial_counter (
    serial     text        NOT NULL CHECK (octet_length(serial) BETWEEN 1 AND 40),
    period     text        NOT NULL CHECK (period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'),
    max_id     bigint      NOT NULL,
    taker      text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (serial, period)
);
COMMENT ON TABLE idgen_registry_serial_counter IS
  'Registry: marks of global serials'' counters, per serial name and period; numbers up to max_id may have been handed out by some node.';

-- The definition (reset and format) of each global serial, as the first node to draw it had
-- it: a node whose serial of that name counts per another period would print the same texts
-- from another counter row, so it is refused.
CREATE TABLE idgen_registry_serial (
    serial     text        PRIMARY KEY CHECK (octet_length(serial) BETWEEN 1 AND 40),
    reset      text        NOT NULL,
    format     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE idgen_registry_serial IS
  'Registry: the reset and format of each global serial, the same on every node.';

-- pg_dump carries the leases, marks, the server's record, the known nodes, an open recovery's
-- reports and the revision (not the install token: a reload is another server).
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_fleet', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_lease', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_segment', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_regression', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_server', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_serial_counter', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_serial', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_node', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_recovery_report', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_revision', '');

-- Nobody reads or writes the registry's tables but through its functions; monitoring
-- (pg_monitor) reads the marks, the server's record, the known nodes and the recovery's reports
-- (no secrets there: holder keys are hashes, in the lease table, which it does not read).
REVOKE ALL ON TABLE idgen_registry_fleet, idgen_registry_lease, idgen_registry_segment,
    idgen_registry_regression, idgen_registry_install, idgen_registry_server,
    idgen_registry_serial_counter, idgen_registry_serial, idgen_registry_node,
    idgen_registry_recovery_report, idgen_registry_incarnation FROM PUBLIC;
REVOKE ALL ON SEQUENCE idgen_registry_revision FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_segment, idgen_registry_regression, idgen_registry_server,
    idgen_registry_node, idgen_registry_recovery_report TO pg_monitor;

-- The registry's identity: its install token (made at CREATE EXTENSION, never dumped) and its
-- system identifier.
CREATE FUNCTION idgen_registry_identity()
RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.format('%s@%s', (SELECT i.token FROM @extschema@.idgen_registry_install i LIMIT 1),
                           s.system_identifier)
    FROM pg_catalog.pg_control_system() s
$$;

-- The timeline the registry writes on now (a failover or a point-in-time recovery starts a new
-- one); NULL on a standby.
CREATE FUNCTION idgen_registry_timeline()
RETURNS integer
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL
              ELSE ('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32)::pg_catalog.int4
         END
$$;

-- The longest lease this registry grants, ms: idgen.registry_max_lease in the registry's
-- configuration (a reload setting of idgen's library; a placeholder any session could set does
-- not count), else 60 s. After each new epoch nothing is granted for this long.
CREATE FUNCTION idgen_registry_max_lease_ms()
RETURNS bigint
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT coalesce((SELECT s.setting::pg_catalog.int8 FROM pg_catalog.pg_settings s
                    WHERE s.name OPERATOR(pg_catalog.=) 'idgen.registry_max_lease'
                      AND s.context OPERATOR(pg_catalog.=) 'sighup'
                      AND s.unit OPERATOR(pg_catalog.=) 'ms'), 60000::pg_catalog.int8)
$$;

-- The lease the waits after an epoch count with, ms: the longest of idgen.registry_max_lease now
-- and of every value this registry answered (idgen_registry_server.max_lease_ms, recorded by the
-- hello): a setting lowered by a reload, or a restore onto a server configured lower, never
-- shortens a wait below a lease a node may still hold.
CREATE FUNCTION idgen_registry_wait_lease_ms()
RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT GREATEST(@extschema@.idgen_registry_max_lease_ms(),
                  coalesce((SELECT s.max_lease_ms FROM @extschema@.idgen_registry_server s), 0))
$$;

-- The registry's revision now: the last value any change took (0 before the first).
CREATE FUNCTION idgen_registry_revision_now()
RETURNS bigint
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE WHEN r.is_called THEN r.last_value ELSE 0 END FROM @extschema@.idgen_registry_revision r
$$;

-- The next revision, taken by every change the registry commits, and recorded (in the same
-- transaction) as the highest the registry answered the node of incarnation_id, if the caller
-- is that node's role (no other member can raise it, hiding a loss): a node that
-- shows a higher one at its hello proves the registry lost commits. (The sequence itself may
-- stand above every answer after a crash or a restore: PostgreSQL logs it ahead.)
CREATE FUNCTION idgen_registry_next_revision(incarnation_id text)
RETURNS bigint
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rev bigint := pg_catalog.nextval('@extschema@.idgen_registry_revision'::pg_catalog.regclass);
BEGIN
    UPDATE @extschema@.idgen_registry_node n
       SET revision = GREATEST(n.revision, rev)
      FROM @extschema@.idgen_registry_incarnation i
     WHERE i.incarnation OPERATOR(pg_catalog.=) incarnation_id
       AND i.role OPERATOR(pg_catalog.=) session_user
       AND n.node_name OPERATOR(pg_catalog.=) i.node_name;
    RETURN rev;
END
$$;

-- Refuses (55P03) a take by an incarnation that has not said hello as a node of the calling
-- role in the registry's current epoch: every revision a node is answered is then recorded as
-- answered to it (a take before the node's first hello after its start would not be, and the
-- node would show it as a loss), and the node has shown the registry what it saw before it
-- takes anything new.
CREATE FUNCTION idgen_registry_check_incarnation(incarnation_id text)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM @extschema@.idgen_registry_incarnation i
                    WHERE i.incarnation = incarnation_id AND i.role = session_user
                      AND i.seen_at >= @extschema@.idgen_registry_epoch()) THEN
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = 'this node has not said hello to the registry since it or the registry started',
            HINT = 'Tried again once its registry client has; nothing to do.';
    END IF;
END
$$;

-- Refuses (42501) a call naming a node whose name belongs to another role (the role of its
-- first hello): a member can act only as its own node.
CREATE FUNCTION idgen_registry_check_node(node text)
RETURNS void
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    owner text;
BEGIN
    SELECT n.role INTO owner FROM @extschema@.idgen_registry_node n WHERE n.node_name = node;
    IF owner IS NOT NULL AND owner <> session_user THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = pg_catalog.format('node name %L belongs to another role', node),
            HINT = 'Each node connects to the registry as its own role (docs: Running on many servers).';
    END IF;
END
$$;

-- Where the registry's epoch began: the later of the postmaster's start, the recorded change of
-- identity or timeline, and the last recovery.
CREATE FUNCTION idgen_registry_epoch()
RETURNS timestamptz
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT GREATEST(pg_catalog.pg_postmaster_start_time(), s.epoch_at, s.recovered_at)
    FROM @extschema@.idgen_registry_server s
$$;

-- Whether the grants' wait after the epoch is over at now_tick, counted in the fleet's ticks
-- (epoch_ms, tick_ms): a lost holder's fence is at most the tick of the epoch plus a second
-- (a clock that stepped back across the event) plus a longest lease in ticks, rounded up; a
-- grant starts at now_tick, strictly above it.
CREATE FUNCTION idgen_registry_grants_wait_over(now_tick bigint, epoch_ms bigint, tick_ms integer)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT now_tick > greatest(floor(extract(epoch FROM @extschema@.idgen_registry_epoch()) * 1000)::bigint + 1000 - epoch_ms, 0) / tick_ms
                    + ceil(@extschema@.idgen_registry_wait_lease_ms()::numeric / tick_ms)::bigint
$$;

-- Refuses unless the registry may grant a worker id (grants) or hand out a range (NOT grants)
-- now: 55P03 while it has not recorded which server it is (the nodes' next hello does) or
-- during the wait after a new epoch (a longest lease for grants, half of one for ranges, plus
-- a second for clocks stepped back across the event; ranges too wait a whole longest lease
-- after a recovery, so that the cached ranges of a node it skipped have stopped: a node serves
-- them only within its lease of its last contact); 55000 while a recovery is open.
CREATE FUNCTION idgen_registry_check_open(grants boolean)
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s     @extschema@.idgen_registry_server;
    until timestamptz;
    wait  bigint;
BEGIN
    SELECT * INTO s FROM @extschema@.idgen_registry_server;
    IF NOT FOUND OR s.server_identity IS DISTINCT FROM @extschema@.idgen_registry_identity()
       OR s.timeline IS DISTINCT FROM @extschema@.idgen_registry_timeline() THEN
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = 'the registry has not yet recorded which server it is',
            DETAIL = 'It was started anew, failed over, restored or installed again; a node''s next hello records it.',
            HINT = 'Tried again; nothing to do.';
    END IF;
    IF s.recovery_since IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = 'the registry is recovering: no worker id is granted and no range handed out until an operator completes the recovery',
            DETAIL = pg_catalog.format('Open since %s: %s.', s.recovery_since, s.recovery_reason),
            HINT = 'On the registry: SELECT * FROM idgen_registry_recovery; then, as a superuser, SELECT * FROM idgen_registry_recover(); (docs: Running on many servers, "Recovering a registry").';
    END IF;
    wait  := @extschema@.idgen_registry_wait_lease_ms();
    -- Ranges wait a whole lease after a recovery, whatever epoch came after it (a restart right
    -- after recover() must not shorten it).
    until := GREATEST(@extschema@.idgen_registry_epoch()
                      + pg_catalog.make_interval(secs => ((CASE WHEN grants THEN 1.0 ELSE 0.5 END) * wait + 1000) / 1000.0),
                      coalesce(s.recovered_at + pg_catalog.make_interval(secs => (wait + 1000) / 1000.0),
                               '-infinity'::pg_catalog.timestamptz));
    IF pg_catalog.clock_timestamp() < until THEN
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = pg_catalog.format('the registry %s until %s', CASE WHEN grants THEN 'grants no worker id' ELSE 'hands out no range' END, until),
            DETAIL = 'It started, failed over, was restored or recovered: for one longest lease (idgen.registry_max_lease) every live node shows it what it saw first.',
            HINT = 'Tried again; nothing to do.';
    END IF;
END
$$;

-- A node's hello, in a statement of its own before each claim, renewal or contact: the
-- registry's clock and version, its revision and whether a recovery is open (and this node has
-- reported in it), and when grants and ranges resume after a new epoch. Records which server
-- the registry is (a new identity opens a recovery: a dump reloaded, idgen installed again over
-- old leases), and opens a recovery when the node saw a revision above the registry's (it lost
-- commits). Notes the node as known: a recovery waits for its report. Never refuses after it
-- wrote, so what it records commits. Errors: 22023 bad arguments; 42501 a node name of another
-- role.
CREATE FUNCTION idgen_registry_hello(node text, incarnation_id text, seen_revision bigint, node_port integer)
RETURNS TABLE (registry_now timestamptz, version text, revision bigint, recovery text,
               reported boolean, grants_from timestamptz, ranges_from timestamptz,
               max_lease_ms bigint, recovered_at timestamptz, ranges_kept boolean)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    now_ts timestamptz := clock_timestamp();
    me     text := @extschema@.idgen_registry_identity();
    tl     integer := @extschema@.idgen_registry_timeline();
    s      @extschema@.idgen_registry_server;
    rev    bigint := @extschema@.idgen_registry_revision_now();
    used   boolean;
    lease  bigint := @extschema@.idgen_registry_max_lease_ms();
    epoch  timestamptz;
    known  bigint;
    wait   bigint;
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('invalid node name %L', node),
            HINT = 'A node name is 1 to 63 bytes of ASCII letters, digits and . _ - :';
    END IF;
    IF incarnation_id IS NULL OR octet_length(incarnation_id) NOT BETWEEN 1 AND 200
       OR seen_revision IS NULL OR seen_revision < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid hello';
    END IF;
    -- Compared as it is: any revision above the one answered this node opens a recovery, also
    -- past 2^62 (a report believes revisions up to 2^62 only, so no recovery's revision
    -- reaches the bigint maximum, but the registry's may stand above 2^62 after one).
    PERFORM @extschema@.idgen_registry_check_node(node);
    SELECT n.revision INTO known FROM @extschema@.idgen_registry_node n WHERE n.node_name = node;
    -- Most hellos change nothing of the server's row: only those that do lock it.
    SELECT * INTO s FROM @extschema@.idgen_registry_server;
    IF FOUND AND s.server_identity = me AND s.timeline IS NOT DISTINCT FROM tl
       AND NOT (seen_revision > coalesce(known, 0) AND s.recovery_since IS NULL)
       AND s.max_lease_ms >= lease THEN
        NULL;
    ELSE
        SELECT * INTO s FROM @extschema@.idgen_registry_server FOR UPDATE;
        IF NOT FOUND THEN
            -- Leases or ranges but no record of the server that granted them: a dump reloaded
            -- without it, or an earlier release's record lost. A registry never used has nothing to
            -- lose.
            used := EXISTS (SELECT FROM @extschema@.idgen_registry_lease)
                    OR EXISTS (SELECT FROM @extschema@.idgen_registry_segment WHERE ranges > 0)
                    OR EXISTS (SELECT FROM @extschema@.idgen_registry_serial_counter);
            INSERT INTO @extschema@.idgen_registry_server AS x
                   (singleton, server_identity, timeline, epoch_at, recovery_since, recovery_reason,
                    recovery_opened_by)
            VALUES (true, me, tl, now_ts, CASE WHEN used THEN now_ts END,
                    CASE WHEN used THEN 'the registry holds leases and ranges but no record of the server that granted them (a dump reloaded?)' END,
                    CASE WHEN used THEN 'the registry' END)
            ON CONFLICT (singleton) DO NOTHING;
            -- (Another hello may have recorded it first.)
            SELECT * INTO s FROM @extschema@.idgen_registry_server;
        ELSIF s.server_identity = '' THEN
            -- Updated from 0.8.0, whose record of the server was another kind: recorded anew, as
            -- a new epoch.
            UPDATE @extschema@.idgen_registry_server x
               SET server_identity = me, timeline = tl, epoch_at = now_ts
            RETURNING * INTO s;
        ELSIF s.server_identity IS DISTINCT FROM me THEN
            UPDATE @extschema@.idgen_registry_server x
               SET server_identity = me, timeline = tl, epoch_at = now_ts,
                   recovery_since = coalesce(x.recovery_since, now_ts),
                   recovery_reason = coalesce(x.recovery_reason, 'the registry is another server than the one that granted its leases and ranges (a dump reloaded, idgen installed again, another cluster)'),
                   recovery_opened_by = coalesce(x.recovery_opened_by, 'the registry')
            RETURNING * INTO s;
        ELSIF s.timeline IS DISTINCT FROM tl THEN
            -- A failover or a point-in-time recovery: a new epoch (a failover to a synchronous
            -- standby lost nothing; one that did shows in the nodes' revisions).
            UPDATE @extschema@.idgen_registry_server x SET timeline = tl, epoch_at = now_ts
            RETURNING * INTO s;
        END IF;
        -- The longest lease answered: the waits after an epoch count with it.
        IF s.max_lease_ms < lease THEN
            UPDATE @extschema@.idgen_registry_server x SET max_lease_ms = lease RETURNING * INTO s;
        END IF;
        -- A node this registry never answered (no row) and that saw a revision proves a loss
        -- too: a registry restored to before the node's first hello.
        IF seen_revision > coalesce(known, 0) AND s.recovery_since IS NULL THEN
            UPDATE @extschema@.idgen_registry_server x
               SET recovery_since = now_ts,
                   recovery_reason = format('node %s had seen revision %s, above the %s the registry answered it: the registry lost commits', node, seen_revision, coalesce(known, 0)),
                   recovery_opened_by = format('node %s (role %s, %s)', node, session_user, coalesce(host(inet_client_addr()), 'local'))
            RETURNING * INTO s;
        END IF;
    END IF;
    INSERT INTO @extschema@.idgen_registry_node AS n
           (node_name, incarnation, role, address, first_seen, last_seen, revision)
    VALUES (node, incarnation_id, session_user,
            coalesce(host(inet_client_addr()), 'local') || ':' || coalesce(node_port::text, '?'),
            now_ts, now_ts, rev)
    ON CONFLICT ON CONSTRAINT idgen_registry_node_pkey DO UPDATE
       SET incarnation = excluded.incarnation, address = excluded.address,
           last_seen = excluded.last_seen, revision = GREATEST(n.revision, excluded.revision);
    INSERT INTO @extschema@.idgen_registry_incarnation AS i (incarnation, node_name, role, seen_at)
    VALUES (incarnation_id, node, session_user, now_ts)
    ON CONFLICT ON CONSTRAINT idgen_registry_incarnation_pkey DO UPDATE
       SET node_name = excluded.node_name, seen_at = excluded.seen_at
     WHERE i.role = excluded.role;
    DELETE FROM @extschema@.idgen_registry_incarnation i WHERE i.seen_at < now_ts - interval '1 day';
    epoch := greatest(pg_postmaster_start_time(), s.epoch_at, s.recovered_at);
    wait := @extschema@.idgen_registry_wait_lease_ms();
    RETURN QUERY SELECT now_ts, (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'idgen')::text,
        rev,
        CASE WHEN s.recovery_since IS NOT NULL THEN format('the registry is recovering since %s: %s', s.recovery_since, s.recovery_reason) END,
        EXISTS (SELECT FROM @extschema@.idgen_registry_recovery_report r
                 WHERE r.node_name = node AND r.recovery_since = s.recovery_since
                   AND incarnation_id = ANY (r.incarnations)),
        epoch + make_interval(secs => (wait + 1000) / 1000.0),
        GREATEST(epoch + make_interval(secs => (0.5 * wait + 1000) / 1000.0),
                 coalesce(s.recovered_at + make_interval(secs => (wait + 1000) / 1000.0), '-infinity')),
        lease,
        s.recovered_at,
        s.recovered_at IS NULL OR EXISTS (SELECT FROM @extschema@.idgen_registry_node n
                                           WHERE n.node_name = node AND n.ranges_kept_at = s.recovered_at);
END
$$;

-- Creates a global segment; an existing one is kept as it is (created = false), so that any
-- node may declare it. Returns the segment's step in force.
CREATE FUNCTION idgen_registry_segment_create(segment text, start_at bigint, step_size integer, about text)
RETURNS TABLE (created boolean, step integer)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    inserted integer;
BEGIN
    IF segment IS NULL OR octet_length(segment) NOT BETWEEN 1 AND 63 OR start_at IS NULL
       OR start_at = -9223372036854775808 OR step_size IS NULL OR step_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid global segment';
    END IF;
    INSERT INTO @extschema@.idgen_registry_segment (name, max_id, step, description)
    VALUES (segment, start_at - 1, step_size, about)
    ON CONFLICT (name) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    -- An existing segment whose numbers run below the start asked for would hand those out.
    IF inserted = 0 AND EXISTS (SELECT FROM @extschema@.idgen_registry_segment s
                                 WHERE s.name = segment AND s.max_id < start_at - 1) THEN
        RAISE EXCEPTION USING ERRCODE = '42P07',
            MESSAGE = pg_catalog.format('global segment %L already exists in the registry, below the start %s', segment, start_at),
            DETAIL = pg_catalog.format('Its next number is %s.',
                (SELECT s.max_id + 1 FROM @extschema@.idgen_registry_segment s WHERE s.name = segment)),
            HINT = 'Choose another name, or create it without a start to use the registry''s numbers.';
    END IF;
    RETURN QUERY SELECT inserted > 0, s.step FROM @extschema@.idgen_registry_segment s WHERE s.name = segment;
END
$$;

-- A global segment's step, if it exists (a node draws from a name it has not declared).
CREATE FUNCTION idgen_registry_segment_get(segment text)
RETURNS TABLE (step integer, max_id bigint)
LANGUAGE sql STABLE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT s.step, s.max_id FROM @extschema@.idgen_registry_segment s WHERE s.name = segment $$;

-- The node's side: this server's registry client, from shared memory.
CREATE FUNCTION idgen_registry_client_status()
RETURNS TABLE (registry text, state text, worker_id integer, node_name text, incarnation text,
               lease_expires_at timestamptz, fence_tick bigint, fenced_until timestamptz,
               head_start_ms bigint, last_renewal timestamptz, renewals bigint,
               clock_offset_ms double precision, clock_offset_bound_ms double precision,
               last_error text)
LANGUAGE c VOLATILE PARALLEL SAFE ROWS 1
AS 'MODULE_PATHNAME', 'idgen_registry_client_status_wrapper';

CREATE FUNCTION idgen_registry_calls()
RETURNS TABLE (calls bigint, failures bigint)
LANGUAGE c VOLATILE PARALLEL SAFE ROWS 1
AS 'MODULE_PATHNAME', 'idgen_registry_calls_wrapper';

-- The hash the registry keeps of a holder's secret.
CREATE FUNCTION idgen_registry_key(holder_secret text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(holder_secret, 'UTF8')), 'hex') $$;

-- Refuses (55000) unless the registry keeps every commit it acknowledges through a restart,
-- a crash and a failover to a synchronous standby (DESIGN.md §6 "Fault model"): fsync on,
-- synchronous_commit on or remote_apply in this session, and a synchronous standby streaming,
-- or the operator's declaration idgen.registry_single_server = on in the registry's
-- configuration (a reload setting; a placeholder any session could set does not count).
-- Called by every function that grants a worker id or hands out numbers, before it changes
-- anything.
CREATE FUNCTION idgen_registry_check_durable()
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    why text[] := '{}';
BEGIN
    IF pg_catalog.current_setting('fsync') <> 'on' THEN
        why := why || 'fsync is off'::text;
    END IF;
    IF pg_catalog.current_setting('synchronous_commit') NOT IN ('on', 'remote_apply') THEN
        why := why || pg_catalog.format('synchronous_commit is %s',
                                        pg_catalog.current_setting('synchronous_commit'));
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_settings
                    WHERE name = 'idgen.registry_single_server' AND setting = 'on'
                      AND context = 'sighup')
       AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_replication
                        WHERE sync_state IN ('sync', 'quorum') AND state = 'streaming') THEN
        why := why || 'no synchronous standby is streaming'::text;
    END IF;
    IF pg_catalog.cardinality(why) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = 'the registry cannot show that it keeps the commits it acknowledges',
            DETAIL = pg_catalog.array_to_string(why, '; ') || '.',
            HINT = 'Run the registry with a synchronous standby (synchronous_standby_names) and synchronous_commit = on, or declare a single durable server with idgen.registry_single_server = on in its configuration.';
    END IF;
END
$$;

-- Refuses (22023) a lease or renewal interval outside what the registry grants: a lease of 100
-- ms to idgen.registry_max_lease (the wait after a new epoch is this long), renewals at most a
-- third of the lease apart (so that every live node shows itself within the ranges' wait, half
-- a longest lease, even with its jitter).
CREATE FUNCTION idgen_registry_check_lease(lease_length_ms integer, renew_every_ms integer)
RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    longest bigint := @extschema@.idgen_registry_max_lease_ms();
BEGIN
    IF lease_length_ms IS NULL OR lease_length_ms NOT BETWEEN 100 AND longest THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a lease of %s ms is outside 100 ms to %s ms', lease_length_ms, longest),
            HINT = 'Set idgen.registry_lease on the node to at most idgen.registry_max_lease of the registry.';
    END IF;
    IF renew_every_ms IS NULL OR renew_every_ms NOT BETWEEN 1 AND (lease_length_ms + 2) / 3 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a renewal interval of %s ms is outside 1 ms to a third of the lease, %s ms',
                                        renew_every_ms, lease_length_ms);
    END IF;
END
$$;

-- Claims a worker id for a node incarnation: wanted_worker, or with NULL (worker_id = auto) the
-- id this node name held last if free, else the lowest free one. A free id is one never
-- leased, released at a tick the registry's clock has passed, or whose lease expired and whose
-- fence (R) the clock has passed. holder_secret is the node's own secret (its SHA-256 is kept).
-- Returns the id, the floor (the first tick the node may use: the registry's clock now, above
-- every tick a previous holder could reach, recorded or lost), the fence (R: a lease past it)
-- and the revision. Errors: 22023 bad arguments or a layout that differs from the fleet's;
-- 55006 the id is held by a live lease; 53400 no id is free; 55P03 the wait after a new epoch,
-- an id whose last holder's ticks the clock has not passed yet, or a lock not granted within
-- 2 s; 55000 not durable, or recovering.
CREATE FUNCTION idgen_registry_claim(
    node text, incarnation_id text, holder_secret text, system_id text, on_timeline integer,
    wanted_worker integer, epoch_ms bigint, worker_bit_count integer, sequence_bit_count integer,
    tick_ms integer, lease_length_ms integer, renew_every_ms integer, offset_ms double precision,
    node_port integer)
RETURNS TABLE (worker_id integer, floor_tick bigint, fence_tick bigint,
               expires_at timestamptz, registry_now timestamptz, previous_holder text,
               revision bigint)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    f          @extschema@.idgen_registry_fleet;
    l          @extschema@.idgen_registry_lease;
    now_ts     timestamptz := clock_timestamp();
    now_tick   bigint;
    lease      bigint;
    max_worker bigint;
    chosen     integer;
    start_at   bigint;
    bound      bigint;
    prev       text;
    key        text;
    diffs      text[] := '{}';
    found_row  boolean := false;
    soonest    bigint;
    waited     boolean;
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('invalid node name %L', node),
            HINT = 'A node name is 1 to 63 bytes of ASCII letters, digits and . _ - :';
    END IF;
    IF incarnation_id IS NULL OR holder_secret IS NULL OR octet_length(holder_secret) < 32
       OR system_id IS NULL OR on_timeline IS NULL OR epoch_ms IS NULL
       OR worker_bit_count IS NULL OR sequence_bit_count IS NULL OR tick_ms IS NULL OR tick_ms < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid worker id claim';
    END IF;
    PERFORM @extschema@.idgen_registry_check_lease(lease_length_ms, renew_every_ms);
    PERFORM @extschema@.idgen_registry_check_durable();
    PERFORM @extschema@.idgen_registry_check_node(node);
    key := @extschema@.idgen_registry_key(holder_secret);
    -- Claims are rare: one at a time. Renewals (row updates) wait for a claim, and back; at
    -- most lock_timeout each.
    LOCK TABLE @extschema@.idgen_registry_lease IN SHARE ROW EXCLUSIVE MODE;
    PERFORM @extschema@.idgen_registry_check_open(true);

    SELECT * INTO f FROM @extschema@.idgen_registry_fleet;
    IF NOT FOUND THEN
        INSERT INTO @extschema@.idgen_registry_fleet
        VALUES (true, epoch_ms, worker_bit_count, sequence_bit_count, tick_ms, now_ts)
        RETURNING * INTO f;
    END IF;
    IF f.epoch_unix_ms <> epoch_ms THEN
        diffs := diffs || format('idgen.epoch is %s ms after 1970 in the fleet and %s ms on this node', f.epoch_unix_ms, epoch_ms);
    END IF;
    IF f.worker_bits <> worker_bit_count THEN
        diffs := diffs || format('idgen.worker_bits is %s in the fleet and %s on this node', f.worker_bits, worker_bit_count);
    END IF;
    IF f.sequence_bits <> sequence_bit_count THEN
        diffs := diffs || format('idgen.sequence_bits is %s in the fleet and %s on this node', f.sequence_bits, sequence_bit_count);
    END IF;
    IF f.time_unit_ms <> tick_ms THEN
        diffs := diffs || format('idgen.time_unit_ms is %s in the fleet and %s on this node', f.time_unit_ms, tick_ms);
    END IF;
    IF cardinality(diffs) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'this node''s snowflake layout differs from the fleet''s in the registry',
            DETAIL = array_to_string(diffs, '; ') || '.',
            HINT = 'Every node of a registry needs the same idgen.epoch, idgen.worker_bits, idgen.sequence_bits and idgen.time_unit_ms: ids of two layouts can collide.';
    END IF;
    max_worker := (1::bigint << f.worker_bits) - 1;
    IF wanted_worker IS NOT NULL AND (wanted_worker < 0 OR wanted_worker > max_worker) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('worker id %s does not fit the fleet''s layout', wanted_worker),
            DETAIL = format('idgen.worker_bits = %s allows worker ids 0 to %s.', f.worker_bits, max_worker);
    END IF;
    now_tick := greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint - f.epoch_unix_ms, 0) / f.time_unit_ms;
    lease := ceil(lease_length_ms::numeric / f.time_unit_ms)::bigint;
    waited := @extschema@.idgen_registry_grants_wait_over(now_tick, f.epoch_unix_ms, f.time_unit_ms);

    -- 1. This incarnation holds a live lease already, with the same secret (a claim whose
    --    answer was lost): the same grant again.
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.incarnation = incarnation_id AND r.holder_key = key AND r.released_tick IS NULL
       AND r.fence_tick >= now_tick AND (wanted_worker IS NULL OR r.worker_id = wanted_worker);
    IF FOUND THEN
        chosen := l.worker_id;
        start_at := l.start_tick;
        bound := greatest(l.fence_tick, now_tick + lease);
    ELSE
        IF wanted_worker IS NOT NULL THEN
            SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = wanted_worker;
            found_row := FOUND;
            chosen := wanted_worker;
        ELSE
            -- 2. auto: the id this node name held last, if it is free; else the lowest free
            --    one.
            SELECT r.worker_id INTO chosen FROM @extschema@.idgen_registry_lease r
             WHERE r.node_name = node AND r.worker_id <= max_worker
               AND coalesce(r.released_tick - 1, r.fence_tick) < now_tick
             ORDER BY r.renewed_at DESC LIMIT 1;
            IF chosen IS NULL THEN
                SELECT min(c) INTO chosen FROM (
                    SELECT 0 AS c WHERE NOT EXISTS (SELECT FROM @extschema@.idgen_registry_lease WHERE worker_id = 0)
                    UNION ALL
                    SELECT r.worker_id + 1 FROM @extschema@.idgen_registry_lease r
                     WHERE r.worker_id + 1 <= max_worker
                       AND NOT EXISTS (SELECT FROM @extschema@.idgen_registry_lease s WHERE s.worker_id = r.worker_id + 1)
                    UNION ALL
                    SELECT r.worker_id FROM @extschema@.idgen_registry_lease r
                     WHERE r.worker_id <= max_worker
                       AND coalesce(r.released_tick - 1, r.fence_tick) < now_tick
                ) free;
            END IF;
            IF chosen IS NULL THEN
                -- Ids whose last holder's ticks the clock has not passed yet (a release whose
                -- reservation ran ahead of the clock) are free soon: wait for the soonest.
                SELECT min(coalesce(r.released_tick - 1, r.fence_tick)) INTO soonest
                  FROM @extschema@.idgen_registry_lease r
                 WHERE r.worker_id <= max_worker AND (r.released_tick IS NOT NULL OR r.expires_at < now_ts);
                IF soonest IS NOT NULL THEN
                    RAISE EXCEPTION USING ERRCODE = '55P03',
                        MESSAGE = format('the next free worker id is free at %s',
                            to_timestamp((f.epoch_unix_ms + (soonest + 1) * f.time_unit_ms)::float8 / 1000)),
                        DETAIL = 'Its last holder reserved ticks ahead of the clock; no grant starts above the clock.',
                        HINT = 'Tried again; nothing to do.';
                END IF;
                RAISE EXCEPTION USING ERRCODE = '53400',
                    MESSAGE = 'no free worker id in the registry',
                    DETAIL = format('All %s worker ids of idgen.worker_bits = %s are held by live servers.', max_worker + 1, f.worker_bits),
                    HINT = 'Stop a server you no longer need (its lease is released at a clean shutdown, or expires), or start a new fleet with more worker bits.';
            END IF;
            SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = chosen;
            found_row := FOUND;
        END IF;
        IF found_row THEN
            IF l.released_tick IS NULL AND (l.fence_tick >= now_tick OR l.expires_at >= now_ts) THEN
                IF l.node_name = node THEN
                    RAISE EXCEPTION USING ERRCODE = '55006',
                        MESSAGE = format('node name %L holds worker id %s in a live lease', node, l.worker_id),
                        DETAIL = format('Its lease expires at %s: the server that held it (this one before a restart, or another with the same node name) may issue ids until then.', l.expires_at),
                        HINT = 'Tried again when the lease expires. Give each server its own idgen.node_name (or cluster_name): a base backup or a copied configuration carries the original''s.';
                END IF;
                RAISE EXCEPTION USING ERRCODE = '55006',
                    MESSAGE = format('worker id %s is held by node %L', l.worker_id, l.node_name),
                    DETAIL = format('It renewed its lease %s s ago; it expires at %s.',
                                    round(extract(epoch FROM now_ts - l.renewed_at)::numeric, 3), l.expires_at),
                    HINT = 'Choose another idgen.worker_id, or idgen.worker_id = auto.';
            END IF;
            IF coalesce(l.released_tick - 1, l.fence_tick) >= now_tick THEN
                RAISE EXCEPTION USING ERRCODE = '55P03',
                    MESSAGE = format('worker id %s is free at %s', l.worker_id,
                        to_timestamp((f.epoch_unix_ms + (coalesce(l.released_tick - 1, l.fence_tick) + 1) * f.time_unit_ms)::float8 / 1000)),
                    DETAIL = 'Its last holder reserved ticks ahead of the clock; no grant starts above the clock.',
                    HINT = 'Tried again; nothing to do.';
            END IF;
            prev := format('%s (%s)', l.node_name,
                           CASE WHEN l.released_tick IS NOT NULL THEN 'released' ELSE format('lease expired at %s', l.expires_at) END);
        END IF;
        -- Never above the registry's clock, and above every tick a previous holder could
        -- reach: its recorded fence or final reservation is below the clock (checked above),
        -- and one the registry lost was at most a longest lease past a commit made before the
        -- epoch, which the wait after it, counted in ticks, has outlasted.
        IF NOT waited THEN
            RAISE EXCEPTION USING ERRCODE = '55P03',
                MESSAGE = 'the registry grants no worker id yet: its wait after its start, failover or recovery ends within a tick',
                HINT = 'Tried again; nothing to do.';
        END IF;
        start_at := now_tick;
        bound := now_tick + lease;
    END IF;

    INSERT INTO @extschema@.idgen_registry_lease AS r
        (worker_id, node_name, incarnation, system_identifier, timeline, address, start_tick,
         fence_tick, released_tick, lease_ms, renew_interval_ms, claimed_at, renewed_at,
         expires_at, clock_offset_ms, renewals, holder_key, attested_standbys)
    VALUES (chosen, node, incarnation_id, system_id, on_timeline,
            coalesce(host(inet_client_addr()), 'local') || ':' || coalesce(node_port::text, '?'),
            start_at, bound, NULL, lease_length_ms, renew_every_ms, now_ts, now_ts,
            now_ts + make_interval(secs => lease_length_ms / 1000.0), offset_ms, 0, key, '{}')
    ON CONFLICT ON CONSTRAINT idgen_registry_lease_pkey DO UPDATE SET
        node_name = excluded.node_name, incarnation = excluded.incarnation,
        system_identifier = excluded.system_identifier, timeline = excluded.timeline,
        address = excluded.address, start_tick = excluded.start_tick,
        fence_tick = excluded.fence_tick, released_tick = NULL, lease_ms = excluded.lease_ms,
        renew_interval_ms = excluded.renew_interval_ms,
        claimed_at = CASE WHEN r.incarnation = excluded.incarnation THEN r.claimed_at ELSE excluded.claimed_at END,
        renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
        clock_offset_ms = excluded.clock_offset_ms, renewals = 0,
        holder_key = excluded.holder_key, attested_standbys = '{}';
    RETURN QUERY SELECT chosen, start_at, bound,
                        now_ts + make_interval(secs => lease_length_ms / 1000.0), now_ts, prev,
                        @extschema@.idgen_registry_next_revision(incarnation_id);
END
$$;

-- Renews a lease for the holder that shows its secret: moves R to a lease past the registry's
-- clock (never back) and the expiry to now + lease. A lease that expired is granted anew to
-- its holder, as a claim would be (the registry cannot tell whether a commit it lost granted
-- the id to another node meanwhile): the floor moves to the clock, and the holder jumps to it.
-- Renewals go on while a recovery is open (they grant nothing new). Returns the fence, the
-- floor in force, the expiry, the clock and the revision. Errors: 22023 bad arguments; 55006
-- this incarnation no longer holds the worker id (released, taken over after it expired, or
-- unknown to the registry: the node claims again); 42501 the secret does not match; 55P03 /
-- 55000 an expired lease while grants wait or a recovery is open; 55P03 a lock not granted
-- within 2 s.
CREATE FUNCTION idgen_registry_renew(
    held_worker integer, incarnation_id text, holder_secret text, lease_length_ms integer,
    renew_every_ms integer, offset_ms double precision)
RETURNS TABLE (fence_tick bigint, floor_tick bigint, expires_at timestamptz,
               registry_now timestamptz, revision bigint)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    now_ts   timestamptz := clock_timestamp();
    l        @extschema@.idgen_registry_lease;
    f        @extschema@.idgen_registry_fleet;
    now_tick bigint;
    lease    bigint;
BEGIN
    IF held_worker IS NULL OR incarnation_id IS NULL OR holder_secret IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid lease renewal';
    END IF;
    PERFORM @extschema@.idgen_registry_check_lease(lease_length_ms, renew_every_ms);
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = held_worker;
        RAISE EXCEPTION USING ERRCODE = '55006',
            MESSAGE = format('worker id %s is no longer leased to this server', held_worker),
            DETAIL = CASE WHEN NOT FOUND THEN 'The registry has no lease of it (it was restored, or installed again).'
                          WHEN l.released_tick IS NOT NULL THEN 'Its lease was released.'
                          ELSE format('Node %L took it over at %s, after this server''s lease expired.', l.node_name, l.claimed_at) END,
            HINT = 'The node claims a worker id again; its ids stay below the last confirmed end of its lease until then.';
    END IF;
    IF l.holder_key IS DISTINCT FROM @extschema@.idgen_registry_key(holder_secret) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('only the holder of worker id %s can renew its lease', held_worker);
    END IF;
    SELECT * INTO f FROM @extschema@.idgen_registry_fleet;
    now_tick := greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint - f.epoch_unix_ms, 0) / f.time_unit_ms;
    lease := ceil(lease_length_ms::numeric / f.time_unit_ms)::bigint;
    IF l.fence_tick < now_tick OR l.expires_at < now_ts THEN
        PERFORM @extschema@.idgen_registry_check_durable();
        PERFORM @extschema@.idgen_registry_check_open(true);
        IF NOT @extschema@.idgen_registry_grants_wait_over(now_tick, f.epoch_unix_ms, f.time_unit_ms) THEN
            RAISE EXCEPTION USING ERRCODE = '55P03',
                MESSAGE = 'the registry grants no worker id yet: its wait after its start, failover or recovery ends within a tick',
                HINT = 'Tried again; nothing to do.';
        END IF;
        l.start_tick := now_tick;
    END IF;
    UPDATE @extschema@.idgen_registry_lease r
       SET start_tick = l.start_tick,
           fence_tick = greatest(r.fence_tick, now_tick + lease),
           renewed_at = now_ts,
           expires_at = now_ts + make_interval(secs => lease_length_ms / 1000.0),
           lease_ms = lease_length_ms, renew_interval_ms = renew_every_ms,
           clock_offset_ms = offset_ms, renewals = r.renewals + 1
     WHERE r.worker_id = held_worker
    RETURNING r.* INTO l;
    RETURN QUERY SELECT l.fence_tick, l.start_tick, l.expires_at, now_ts,
                        @extschema@.idgen_registry_next_revision(incarnation_id);
END
$$;

-- Releases a lease at a clean shutdown, recording the holder's final reservation (the first
-- tick it never reached): the next holder starts no lower. Returns false if this incarnation
-- held nothing. Errors: 22023 bad arguments; 42501 the secret does not match.
CREATE FUNCTION idgen_registry_release(held_worker integer, incarnation_id text, holder_secret text, final_tick bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    l   @extschema@.idgen_registry_lease;
    cap bigint;
BEGIN
    IF holder_secret IS NULL OR final_tick IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid lease release';
    END IF;
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF l.holder_key IS DISTINCT FROM @extschema@.idgen_registry_key(holder_secret) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('only the holder of worker id %s can release its lease', held_worker);
    END IF;
    -- Believed up to a lease past the fence (no holder reserves further), never below the
    -- fence the registry granted: a release can neither burn the id nor open ticks the holder
    -- was allowed.
    cap := l.fence_tick + 1;
    UPDATE @extschema@.idgen_registry_lease r
       SET released_tick = greatest(least(final_tick, cap), r.start_tick),
           fence_tick = greatest(r.fence_tick, least(final_tick, cap) - 1),
           expires_at = clock_timestamp()
     WHERE r.worker_id = held_worker;
    PERFORM @extschema@.idgen_registry_next_revision(incarnation_id);
    RETURN true;
END
$$;

-- Takes the next range of a global segment for a node: the numbers after the mark, step_size
-- of them (fewer at the bigint maximum), in one committed UPDATE, recording its taker (for
-- operators). Returns the range, the segment's step and the revision. Errors: 22023 bad
-- arguments; 42704 no such segment; 2200H the segment has run out; 55000 not durable, or
-- recovering; 55P03 the wait after a new epoch, a node that said no hello since its start, or
-- a lock not granted within 2 s.
CREATE FUNCTION idgen_registry_segment_take(segment text, step_size integer, incarnation_id text,
                                            holder_secret text)
RETURNS TABLE (first_id bigint, last_id bigint, base_step integer, revision bigint)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    s     @extschema@.idgen_registry_segment;
    first bigint;
BEGIN
    IF step_size IS NULL OR step_size < 1 OR incarnation_id IS NULL OR holder_secret IS NULL
       OR octet_length(holder_secret) < 32 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid range request';
    END IF;
    PERFORM @extschema@.idgen_registry_check_durable();
    PERFORM @extschema@.idgen_registry_check_open(false);
    PERFORM @extschema@.idgen_registry_check_incarnation(incarnation_id);
    SELECT * INTO s FROM @extschema@.idgen_registry_segment r WHERE r.name = segment FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('global segment %L does not exist', segment);
    END IF;
    IF s.max_id = 9223372036854775807 THEN
        RAISE EXCEPTION USING ERRCODE = '2200H', MESSAGE = format('global segment %L has run out of numbers', segment);
    END IF;
    first := s.max_id + 1;
    UPDATE @extschema@.idgen_registry_segment r
       SET max_id = CASE WHEN s.max_id > 9223372036854775807 - step_size THEN 9223372036854775807
                         ELSE s.max_id + step_size END,
           ranges = r.ranges + 1, updated_at = clock_timestamp(), taker = incarnation_id
     WHERE r.name = segment
    RETURNING r.* INTO s;
    RETURN QUERY SELECT first, s.max_id, s.step, @extschema@.idgen_registry_next_revision(incarnation_id);
END
$$;

-- Moves the mark of global serial `serial`'s counter for `period` up by step_size and returns
-- the new mark (the node uses mark - step + 1 .. mark) and the revision. Errors: 22023 bad
-- arguments; 55000 a reset or format that differs from the serial's on other nodes, not
-- durable, or recovering; 55P03 the wait after a new epoch, or a lock not granted within 2 s.
CREATE FUNCTION idgen_registry_serial_take(serial text, period text, step_size bigint,
                                           incarnation_id text, holder_secret text,
                                           serial_reset text, serial_format text)
RETURNS TABLE (mark bigint, revision bigint)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    d     @extschema@.idgen_registry_serial;
    taken bigint;
BEGIN
    IF serial IS NULL OR octet_length(serial) NOT BETWEEN 1 AND 40 OR serial ~ '[[:cntrl:]]' OR period IS NULL
       OR period !~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'
       OR step_size IS NULL OR step_size < 1 OR step_size > 1000000
       OR incarnation_id IS NULL OR holder_secret IS NULL OR octet_length(holder_secret) < 32
       OR serial_reset IS NULL OR serial_format IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid serial counter request';
    END IF;
    PERFORM @extschema@.idgen_registry_check_durable();
    PERFORM @extschema@.idgen_registry_check_open(false);
    PERFORM @extschema@.idgen_registry_check_incarnation(incarnation_id);
    INSERT INTO @extschema@.idgen_registry_serial AS r (serial, reset, format)
    VALUES (serial, serial_reset, serial_format)
    ON CONFLICT ON CONSTRAINT idgen_registry_serial_pkey DO NOTHING;
    SELECT * INTO d FROM @extschema@.idgen_registry_serial r WHERE r.serial = idgen_registry_serial_take.serial;
    IF d.reset <> serial_reset OR d.format <> serial_format THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('global serial %L is defined as %L, reset %s, on the registry''s nodes, not %L, reset %s',
                             serial, d.format, d.reset, serial_format, serial_reset),
            HINT = 'Create the serial with the same format and reset on every node.';
    END IF;
    INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id, taker)
    VALUES (serial, period, step_size, incarnation_id)
    ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
       SET max_id = c.max_id + excluded.max_id, taker = excluded.taker,
           updated_at = clock_timestamp()
    RETURNING c.max_id INTO taken;
    RETURN QUERY SELECT taken, @extschema@.idgen_registry_next_revision(incarnation_id);
END
$$;

-- A node's report in an open recovery, from its own state: the worker id it holds and the
-- first tick its reservation never reached, the marks of its global segments (by name) and of
-- its global serials' counters (named E'\x01serial\x01' || serial || E'\x01' || period), and
-- the highest revision it saw (believed up to 2^62). Reports of one node name in one recovery
-- accumulate (each mark the highest reported); only the role of the node's first hello reports
-- for it. Returns false when no recovery is open
-- (nothing recorded). Errors: 22023 bad arguments; 42501 not this role's node.
CREATE FUNCTION idgen_registry_report_marks(node text, incarnation_id text, worker integer,
                                            reserved bigint, names text[], marks bigint[],
                                            seen_revision bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
DECLARE
    since timestamptz;
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$'
       OR incarnation_id IS NULL OR names IS NULL OR marks IS NULL
       OR cardinality(names) <> cardinality(marks) OR cardinality(names) > 100000
       OR array_position(names, NULL) IS NOT NULL OR array_position(marks, NULL) IS NOT NULL
       OR seen_revision IS NULL OR seen_revision < 0
       OR (worker IS NULL) <> (reserved IS NULL) OR worker < 0 OR reserved < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid recovery report';
    END IF;
    -- Only as its own node: a node says hello (which records its role) before it reports.
    IF NOT EXISTS (SELECT FROM @extschema@.idgen_registry_node n
                    WHERE n.node_name = node AND n.role = session_user) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = pg_catalog.format('node %L is not a node of this role', node),
            HINT = 'A node reports after its hello, as the role it said hello as.';
    END IF;
    SELECT s.recovery_since INTO since FROM @extschema@.idgen_registry_server s;
    IF since IS NULL THEN
        RETURN false;
    END IF;
    -- Reports of one node name in one recovery accumulate (two live servers may share a name:
    -- a base backup started beside its original), each mark the highest any of them reported;
    -- one statement, so that two first reports cannot replace each other.
    INSERT INTO @extschema@.idgen_registry_recovery_report AS x
           (node_name, recovery_since, reported_at, reported_by, address, incarnation,
            incarnations, worker_id, reserved_tick, names, marks, revision)
    SELECT node, since, clock_timestamp(), session_user, host(inet_client_addr()),
           incarnation_id, ARRAY[incarnation_id], worker, reserved,
           coalesce(array_agg(k.name ORDER BY k.name), '{}'),
           coalesce(array_agg(k.mark ORDER BY k.name), '{}'), seen_revision
      FROM (SELECT u.name, max(u.mark) AS mark FROM unnest(names, marks) AS u(name, mark)
             GROUP BY u.name) k
    ON CONFLICT ON CONSTRAINT idgen_registry_recovery_report_pkey DO UPDATE
       SET reported_at = excluded.reported_at, reported_by = excluded.reported_by,
           address = excluded.address, incarnation = excluded.incarnation,
           worker_id = coalesce(excluded.worker_id, x.worker_id),
           reserved_tick = coalesce(excluded.reserved_tick, x.reserved_tick),
           incarnations = CASE WHEN x.recovery_since <> excluded.recovery_since THEN excluded.incarnations
                               WHEN incarnation_id = ANY (x.incarnations) THEN x.incarnations
                               ELSE x.incarnations || incarnation_id END,
           names = CASE WHEN x.recovery_since <> excluded.recovery_since THEN excluded.names
                        ELSE (SELECT coalesce(array_agg(m.name ORDER BY m.name), '{}')
                                FROM (SELECT u.name FROM unnest(x.names || excluded.names) AS u(name)
                                       GROUP BY u.name) m) END,
           marks = CASE WHEN x.recovery_since <> excluded.recovery_since THEN excluded.marks
                        ELSE (SELECT coalesce(array_agg(m.mark ORDER BY m.name), '{}')
                                FROM (SELECT u.name, max(u.mark) AS mark
                                        FROM unnest(x.names || excluded.names, x.marks || excluded.marks) AS u(name, mark)
                                       GROUP BY u.name) m) END,
           revision = CASE WHEN x.recovery_since <> excluded.recovery_since THEN excluded.revision
                           ELSE greatest(x.revision, excluded.revision) END,
           recovery_since = excluded.recovery_since;
    RETURN true;
END
$$;

-- Binds node name `node` to `member` (the operator's word; a superuser's or the extension
-- owner's): from then on only that role acts as the node. A name is otherwise bound to the role
-- of its first hello: bind the names of a registry updated from 0.8.0 (whose nodes said no
-- hello yet) before their nodes restart, and rebind a name a wrong role took. Errors: 22023
-- an invalid node name; 42704 no such role.
CREATE FUNCTION idgen_registry_bind_node(node text, member name)
RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('invalid node name %L', node);
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles r WHERE r.rolname = member) THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = pg_catalog.format('role %I does not exist', member);
    END IF;
    INSERT INTO @extschema@.idgen_registry_node AS n
           (node_name, incarnation, role, address, first_seen, last_seen)
    VALUES (node, '', member::text, NULL, pg_catalog.clock_timestamp(), pg_catalog.clock_timestamp())
    ON CONFLICT ON CONSTRAINT idgen_registry_node_pkey DO UPDATE SET role = excluded.role;
END
$$;

-- Opens a recovery by the operator's word (docs: Running on many servers, "Recovering a registry"): after a restore,
-- a point-in-time recovery, a failover to an asynchronous standby or a dump reload the registry
-- could not see for itself. Returns when the open recovery began.
CREATE FUNCTION idgen_registry_begin_recovery(reason text DEFAULT 'opened by the operator')
RETURNS timestamptz
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    since timestamptz;
BEGIN
    INSERT INTO @extschema@.idgen_registry_server AS x
           (singleton, server_identity, timeline, epoch_at, recovery_since, recovery_reason,
            recovery_opened_by)
    VALUES (true, @extschema@.idgen_registry_identity(), @extschema@.idgen_registry_timeline(),
            clock_timestamp(), clock_timestamp(), coalesce(reason, 'opened by the operator'),
            pg_catalog.format('the operator (role %s)', session_user))
    ON CONFLICT (singleton) DO UPDATE
       SET recovery_since = coalesce(x.recovery_since, excluded.recovery_since),
           recovery_reason = coalesce(x.recovery_reason, excluded.recovery_reason),
           recovery_opened_by = coalesce(x.recovery_opened_by, excluded.recovery_opened_by)
    RETURNING x.recovery_since INTO since;
    RETURN since;
END
$$;

-- Completes the open recovery (docs: Running on many servers, "Recovering a registry"), as a superuser on the
-- registry once every known node has reported (idgen_registry_recovery): raises each global
-- segment's mark and each global serial's counter to the highest a node reported, the
-- revision above every revision reported, and starts a new epoch (nothing is granted for a
-- longest lease, so no grant starts below a fence a lost renewal confirmed). Nodes named in
-- skip_nodes need not have reported (a node gone for good); their reports, if any, are not
-- used. Returns what it raised. Errors: 55000 no recovery is open, or known nodes have not
-- reported.
CREATE FUNCTION idgen_registry_recover(skip_nodes text[] DEFAULT '{}')
RETURNS TABLE (subject text, raised_from bigint, raised_to bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s       @extschema@.idgen_registry_server;
    missing text[];
    rev     bigint;
    top     bigint;
    done_at timestamptz;
BEGIN
    SELECT * INTO s FROM @extschema@.idgen_registry_server FOR UPDATE;
    IF NOT FOUND OR s.recovery_since IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'no recovery is open';
    END IF;
    -- Reports arriving meanwhile wait (and then land in no recovery: none is used unread).
    LOCK TABLE @extschema@.idgen_registry_recovery_report IN SHARE ROW EXCLUSIVE MODE;
    SELECT array_agg(n.node_name ORDER BY n.node_name) INTO missing
      FROM @extschema@.idgen_registry_node n
     WHERE n.node_name <> ALL (coalesce(skip_nodes, '{}'))
       AND NOT EXISTS (SELECT FROM @extschema@.idgen_registry_recovery_report r
                        WHERE r.node_name = n.node_name AND r.recovery_since = s.recovery_since);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = pg_catalog.format('%s known node(s) have not reported: %s', cardinality(missing), array_to_string(missing, ', ')),
            DETAIL = 'A node that has not reported may hold a range the registry lost; its numbers would be handed out again.',
            HINT = 'Start them (a node reports within a renewal interval), or, for nodes gone for good, name them: SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY[...]);';
    END IF;
    -- Global segments the registry lost altogether (idgen installed again): created at the
    -- highest mark reported, with segment_create's default step (a node's own step is its own).
    RETURN QUERY
    WITH created AS (
        INSERT INTO @extschema@.idgen_registry_segment AS g (name, max_id, step, description)
        SELECT m.name, m.mark, 1000, 'created again by idgen_registry_recover() from the nodes'' reports'
          FROM (SELECT k.name, max(k.mark) AS mark
                 FROM @extschema@.idgen_registry_recovery_report r,
                      unnest(r.names, r.marks) AS k(name, mark)
                WHERE r.recovery_since = s.recovery_since
                  AND r.node_name <> ALL (coalesce(skip_nodes, '{}'))
                GROUP BY k.name) m
         WHERE m.name NOT LIKE chr(1) || '%' AND octet_length(m.name) BETWEEN 1 AND 63
        ON CONFLICT (name) DO NOTHING
        RETURNING g.name, g.max_id)
    SELECT 'global segment ' || created.name, NULL::bigint, created.max_id FROM created;
    -- Global segments.
    RETURN QUERY
    WITH raised AS (
        UPDATE @extschema@.idgen_registry_segment g
           SET max_id = m.mark, taker = NULL, updated_at = clock_timestamp()
          FROM (SELECT k.name, max(k.mark) AS mark
                 FROM @extschema@.idgen_registry_recovery_report r,
                      unnest(r.names, r.marks) AS k(name, mark)
                WHERE r.recovery_since = s.recovery_since
                  AND r.node_name <> ALL (coalesce(skip_nodes, '{}'))
                GROUP BY k.name) m, (SELECT name, max_id FROM @extschema@.idgen_registry_segment) o
         WHERE g.name = m.name AND o.name = g.name AND g.max_id < m.mark
        RETURNING g.name, o.max_id AS before, g.max_id AS after)
    SELECT 'global segment ' || raised.name, raised.before, raised.after FROM raised;
    -- Global serials' counters.
    RETURN QUERY
    WITH reported AS (
        SELECT split_part(m.name, chr(1), 3) AS serial, split_part(m.name, chr(1), 4) AS period, m.mark
          FROM (SELECT k.name, max(k.mark) AS mark
                 FROM @extschema@.idgen_registry_recovery_report r,
                      unnest(r.names, r.marks) AS k(name, mark)
                WHERE r.recovery_since = s.recovery_since
                  AND r.node_name <> ALL (coalesce(skip_nodes, '{}'))
                GROUP BY k.name) m
         WHERE m.name LIKE chr(1) || 'serial' || chr(1) || '%'
           AND array_length(string_to_array(m.name, chr(1)), 1) = 4),
    before AS (
        SELECT p.serial, p.period, p.mark, c.max_id AS was FROM reported p
          LEFT JOIN @extschema@.idgen_registry_serial_counter c
                 ON c.serial = p.serial AND c.period = p.period
         WHERE coalesce(c.max_id, 0) < p.mark
           AND octet_length(p.serial) BETWEEN 1 AND 40
           AND p.period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'),
    raised AS (
        INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id)
        SELECT b.serial, b.period, b.mark FROM before b
        ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
           SET max_id = greatest(c.max_id, excluded.max_id), taker = NULL, updated_at = clock_timestamp()
        RETURNING c.serial, c.period)
    SELECT format('global serial %s, period %s', b.serial, b.period), coalesce(b.was, 0), b.mark
      FROM before b JOIN raised r ON r.serial = b.serial AND r.period = b.period;
    -- The revision: above every one a node saw.
    rev := @extschema@.idgen_registry_revision_now();
    -- A reported revision is kept as sent (the view shows it) and believed up to 2^62, so that
    -- no recovery's revision reaches the bigint maximum.
    SELECT max(least(r.revision, 4611686018427387904)) INTO top
      FROM @extschema@.idgen_registry_recovery_report r
     WHERE r.recovery_since = s.recovery_since AND r.node_name <> ALL (coalesce(skip_nodes, '{}'));
    PERFORM pg_catalog.setval('@extschema@.idgen_registry_revision'::pg_catalog.regclass,
                              greatest(rev, coalesce(top, 0)) + 1);
    RETURN QUERY SELECT 'revision'::text, rev, greatest(rev, coalesce(top, 0)) + 1;
    -- Every node's memory is below the registry now; the nodes whose reports were used keep
    -- their cached ranges (raised above), the others drop them at their next hello.
    done_at := clock_timestamp();
    UPDATE @extschema@.idgen_registry_node n
       SET revision = greatest(rev, coalesce(top, 0)) + 1,
           ranges_kept_at = CASE WHEN n.node_name <> ALL (coalesce(skip_nodes, '{}'))
                                      AND EXISTS (SELECT FROM @extschema@.idgen_registry_recovery_report r
                                                   WHERE r.node_name = n.node_name
                                                     AND r.recovery_since = s.recovery_since)
                                 THEN done_at END;
    UPDATE @extschema@.idgen_registry_server x
       SET recovery_since = NULL, recovery_reason = NULL, recovery_opened_by = NULL,
           recovered_at = done_at, epoch_at = done_at;
    DELETE FROM @extschema@.idgen_registry_recovery_report;
END
$$;

-- This server's registry client (a node's side), from shared memory.
CREATE VIEW idgen_registry_status AS SELECT * FROM idgen_registry_client_status();

-- The open recovery, on the registry: every known node, and what it reported.
CREATE VIEW idgen_registry_recovery AS
SELECT n.node_name, n.role, n.address, n.last_seen,
       r.reported_at IS NOT NULL AS reported, r.reported_at, r.reported_by, r.worker_id,
       r.reserved_tick, pg_catalog.cardinality(r.names) AS marks,
       (SELECT pg_catalog.string_agg(pg_catalog.format('%s=%s', k.name, k.mark), ', ' ORDER BY k.name)
          FROM unnest(r.names, r.marks) AS k(name, mark)) AS reported_marks,
       r.revision,
       s.recovery_since, s.recovery_reason, s.recovery_opened_by
  FROM @extschema@.idgen_registry_server s
  CROSS JOIN @extschema@.idgen_registry_node n
  LEFT JOIN @extschema@.idgen_registry_recovery_report r
         ON r.node_name OPERATOR(pg_catalog.=) n.node_name
        AND r.recovery_since OPERATOR(pg_catalog.=) s.recovery_since
 WHERE s.recovery_since IS NOT NULL;

-- Every lease, for monitoring: holder, address, state, R and its time, offsets, layout.
CREATE VIEW idgen_registry_workers AS
SELECT l.worker_id, l.node_name, l.incarnation, l.address, l.system_identifier, l.timeline,
       CASE WHEN l.released_tick IS NOT NULL THEN 'released'
            WHEN l.expires_at < pg_catalog.clock_timestamp() THEN 'expired'
            ELSE 'held' END AS state,
       l.fence_tick,
       pg_catalog.to_timestamp(
           (f.epoch_unix_ms + (l.fence_tick + 1) * f.time_unit_ms)::pg_catalog.float8
           OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS fenced_until,
       l.start_tick, l.released_tick, l.claimed_at, l.renewed_at, l.expires_at, l.lease_ms,
       l.renew_interval_ms, l.clock_offset_ms, l.renewals,
       f.epoch_unix_ms, f.worker_bits, f.sequence_bits, f.time_unit_ms
  FROM @extschema@.idgen_registry_lease l CROSS JOIN @extschema@.idgen_registry_fleet f;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_get(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_get(text) TO idgen_registry;
REVOKE ALL ON TABLE idgen_registry_workers, idgen_registry_status, idgen_registry_recovery FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_workers, idgen_registry_status, idgen_registry_recovery TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_client_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_client_status() TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_calls() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_calls() TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_identity() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_timeline() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_max_lease_ms() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_wait_lease_ms() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_revision_now() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_next_revision(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_node(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_incarnation(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_epoch() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_open(boolean) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_grants_wait_over(bigint, bigint, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_key(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_durable() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_lease(integer, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_begin_recovery(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_bind_node(text, name) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_recover(text[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_hello(text, text, bigint, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_release(integer, text, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_report_marks(text, text, integer, bigint, text[], bigint[], bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_hello(text, text, bigint, integer) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_release(integer, text, text, bigint) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer, text, text) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_report_marks(text, text, integer, bigint, text[], bigint[], bigint) TO idgen_registry;
COMMENT ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) IS
  'Registry: creates a global segment (an existing one is kept); returns its step.';
COMMENT ON FUNCTION idgen_registry_segment_get(text) IS
  'Registry: a global segment''s step and mark, if it exists.';
COMMENT ON VIEW idgen_registry_workers IS
  'Every worker id lease of this registry: holder, address, state, fence and clock offset.';
COMMENT ON VIEW idgen_registry_status IS
  'This server''s registry client: worker id, lease, fence, head start, clock offset, state.';
COMMENT ON VIEW idgen_registry_recovery IS
  'The registry''s open recovery: every known node, whether it reported, and what.';
COMMENT ON FUNCTION idgen_registry_client_status() IS
  'This server''s registry client, one row (the idgen_registry_status view).';
COMMENT ON FUNCTION idgen_registry_calls() IS
  'Calls this server sent the registry since it started, and the failed ones (the idgen_metrics_registry_client view).';
COMMENT ON FUNCTION idgen_registry_identity() IS 'Registry: its install token and system identifier.';
COMMENT ON FUNCTION idgen_registry_timeline() IS 'Registry: the timeline it writes on (NULL on a standby).';
COMMENT ON FUNCTION idgen_registry_max_lease_ms() IS 'Registry: the longest lease it grants, ms (idgen.registry_max_lease).';
COMMENT ON FUNCTION idgen_registry_wait_lease_ms() IS 'Registry: the lease its waits after an epoch count with, ms: the longest it ever answered.';
COMMENT ON FUNCTION idgen_registry_revision_now() IS 'Registry: its revision now.';
COMMENT ON FUNCTION idgen_registry_next_revision(text) IS 'Registry: takes the next revision and records it as answered to the node.';
COMMENT ON FUNCTION idgen_registry_check_node(text) IS 'Registry: 42501 for a node name that belongs to another role.';
COMMENT ON FUNCTION idgen_registry_check_incarnation(text) IS 'Registry: 55P03 for a take by an incarnation that said no hello as the calling role.';
COMMENT ON FUNCTION idgen_registry_epoch() IS 'Registry: where its epoch began.';
COMMENT ON FUNCTION idgen_registry_check_durable() IS
  'Registry: 55000 unless it keeps the commits it acknowledges (fsync, synchronous_commit, a synchronous standby or the single-server declaration).';
COMMENT ON FUNCTION idgen_registry_check_lease(integer, integer) IS
  'Registry: 22023 for a lease outside 100 ms to idgen.registry_max_lease, or renewals more than a third of it apart.';
COMMENT ON FUNCTION idgen_registry_grants_wait_over(bigint, bigint, integer) IS
  'Registry: whether the grants'' wait after the epoch is over, in the fleet''s ticks.';
COMMENT ON FUNCTION idgen_registry_check_open(boolean) IS
  'Registry: 55P03 during the wait after a new epoch, 55000 while recovering.';
COMMENT ON FUNCTION idgen_registry_hello(text, text, bigint, integer) IS
  'Registry: a node''s hello: clock, version, revision, recovery; records the server and the node, opens a recovery when needed.';
COMMENT ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) IS
  'Registry: claims a worker id for a node incarnation and its secret; returns the floor and fence ticks.';
COMMENT ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision) IS
  'Registry: renews a worker id lease for its holder (secret); returns the new fence and the floor in force.';
COMMENT ON FUNCTION idgen_registry_release(integer, text, text, bigint) IS
  'Registry: releases a worker id lease at a clean shutdown (holder''s secret), recording the final reservation.';
COMMENT ON FUNCTION idgen_registry_segment_take(text, integer, text, text) IS
  'Registry: the next range of a global segment, in one committed UPDATE, recording its taker.';
COMMENT ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text) IS
  'Registry: moves a global serial''s counter for a period up by step_size; returns the new mark.';
COMMENT ON FUNCTION idgen_registry_report_marks(text, text, integer, bigint, text[], bigint[], bigint) IS
  'Registry: a node''s report in an open recovery (worker id, reservation, marks, revision).';
COMMENT ON FUNCTION idgen_registry_bind_node(text, name) IS
  'Registry (operator): binds a node name to the role that alone may act as that node.';
COMMENT ON FUNCTION idgen_registry_begin_recovery(text) IS
  'Registry (operator): opens a recovery after a restore, a failover to an asynchronous standby or a reload.';
COMMENT ON FUNCTION idgen_registry_recover(text[]) IS
  'Registry (superuser): completes the open recovery: raises marks and counters above the reports, the revision above every one seen.';
COMMENT ON FUNCTION idgen_registry_key(text) IS 'Registry: the SHA-256 kept of a holder''s secret.';
