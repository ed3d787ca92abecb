-- idgen 0.2.0 -> 0.3.0: the registry (DESIGN.md §6, README "Many servers with a registry").
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- A registry is any database with idgen installed. Nodes (servers with idgen.registry set)
-- lease their Snowflake worker ids here, through the four functions below, each one short
-- transaction on the registry's own clock (clock_timestamp()). The guarantee: every id a node
-- issues under a worker id has a tick at most the fence_tick (R) recorded here for its lease,
-- and whoever takes the worker id next starts strictly above it (at floor_tick), whatever the
-- nodes' clocks say.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.3.0'" to load this file. \quit

-- The one Snowflake layout of every node of this registry, recorded by the first claim.
CREATE TABLE idgen_registry_fleet (
    singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    epoch_unix_ms bigint      NOT NULL,
    worker_bits   integer     NOT NULL CHECK (worker_bits BETWEEN 0 AND 31),
    sequence_bits integer     NOT NULL CHECK (sequence_bits BETWEEN 0 AND 31),
    time_unit_ms  integer     NOT NULL CHECK (time_unit_ms > 0),
    created_at    timestamptz NOT NULL
);

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
    renewals          bigint      NOT NULL DEFAULT 0
);

-- The registry's clock and idgen version: the client's first call, to measure its clock offset
-- and to find out that the registry has idgen at all.
CREATE FUNCTION idgen_registry_hello(OUT registry_now timestamptz, OUT version text)
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT clock_timestamp(), (SELECT extversion FROM pg_extension WHERE extname = 'idgen') $$;

-- Claims a worker id for a node incarnation: wanted_worker, or with NULL (worker_id = auto) the
-- id this node name held last if free, else the lowest free one. Returns the id, the floor
-- (the first tick the node may use) and the fence (R). Errors: 22023 bad arguments or a layout
-- that differs from the fleet's; 55006 the id is held by a live server; 53400 no id is free.
CREATE FUNCTION idgen_registry_claim(
    node text, incarnation_id text, system_id text, on_timeline integer, wanted_worker integer,
    epoch_ms bigint, worker_bit_count integer, sequence_bit_count integer, tick_ms integer,
    lease_length_ms integer, renew_every_ms integer, offset_ms double precision,
    node_port integer)
RETURNS TABLE (worker_id integer, floor_tick bigint, fence_tick bigint,
               expires_at timestamptz, registry_now timestamptz, previous_holder text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    f          @extschema@.idgen_registry_fleet;
    l          @extschema@.idgen_registry_lease;
    now_ts     timestamptz := clock_timestamp();
    now_ms     bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    max_worker bigint;
    chosen     integer;
    start_at   bigint;
    bound      bigint;
    prev       text;
    diffs      text[] := '{}';
    found_row  boolean := false;
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('invalid node name %L', node),
            HINT = 'A node name is 1 to 63 bytes of ASCII letters, digits and . _ - :';
    END IF;
    IF incarnation_id IS NULL OR system_id IS NULL OR on_timeline IS NULL OR epoch_ms IS NULL
       OR worker_bit_count IS NULL OR sequence_bit_count IS NULL OR tick_ms IS NULL
       OR lease_length_ms IS NULL OR renew_every_ms IS NULL
       OR lease_length_ms < 1 OR renew_every_ms < 1 OR tick_ms < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid worker id claim';
    END IF;
    now_ms := floor(extract(epoch FROM now_ts) * 1000);
    -- Claims are rare: one at a time. Renewals (row updates) wait for a claim, and back.
    LOCK TABLE @extschema@.idgen_registry_lease IN SHARE ROW EXCLUSIVE MODE;

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

    -- 1. This incarnation holds one already (a claim whose answer was lost, a restarted client).
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.incarnation = incarnation_id AND r.released_tick IS NULL
       AND (wanted_worker IS NULL OR r.worker_id = wanted_worker);
    IF FOUND THEN
        chosen := l.worker_id;
        start_at := l.start_tick;
    ELSE
        -- 2. A promoted standby succeeds its primary: same system, a later timeline. The
        --    primary's ids stay below its R; the successor starts above it, without waiting
        --    for the lease to expire.
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r
         WHERE r.system_identifier = system_id AND r.timeline < on_timeline
           AND r.released_tick IS NULL AND r.expires_at >= now_ts
           AND (wanted_worker IS NULL OR r.worker_id = wanted_worker)
         ORDER BY r.timeline DESC, r.renewed_at DESC LIMIT 1;
        found_row := FOUND;
        IF found_row THEN
            prev := format('%s (incarnation %s, timeline %s, succeeded by promotion)', l.node_name, l.incarnation, l.timeline);
        ELSIF wanted_worker IS NOT NULL THEN
            SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = wanted_worker;
            found_row := FOUND;
        ELSE
            -- 3. auto: the id this node name held last, if it is free.
            SELECT * INTO l FROM @extschema@.idgen_registry_lease r
             WHERE r.node_name = node ORDER BY r.renewed_at DESC LIMIT 1;
            found_row := FOUND;
        END IF;
        IF found_row AND prev IS NULL THEN
            IF l.released_tick IS NOT NULL THEN
                prev := format('%s (incarnation %s, released)', l.node_name, l.incarnation);
            ELSIF l.expires_at < now_ts THEN
                prev := format('%s (incarnation %s, lease expired at %s)', l.node_name, l.incarnation, l.expires_at);
            ELSIF l.node_name = node AND l.renewed_at < now_ts - make_interval(secs => 2 * l.renew_interval_ms / 1000.0) THEN
                -- The same node name, silent for two renewal intervals: a restart after a crash.
                prev := format('%s (incarnation %s, not renewed since %s)', l.node_name, l.incarnation, l.renewed_at);
            ELSIF l.node_name = node THEN
                RAISE EXCEPTION USING ERRCODE = '55006',
                    MESSAGE = format('node name %L holds worker id %s in another live server', node, l.worker_id),
                    DETAIL = format('Incarnation %s (address %s) renewed its lease %s s ago; a second server with the same node name is refused while the first renews.',
                                    l.incarnation, coalesce(l.address, 'unknown'), round(extract(epoch FROM now_ts - l.renewed_at)::numeric, 3)),
                    HINT = 'Give each server its own idgen.node_name (or cluster_name): a base backup or a copied configuration carries the original''s.';
            ELSE
                RAISE EXCEPTION USING ERRCODE = '55006',
                    MESSAGE = format('worker id %s is held by node %L', l.worker_id, l.node_name),
                    DETAIL = format('Incarnation %s (address %s) renewed its lease %s s ago; it expires at %s.',
                                    l.incarnation, coalesce(l.address, 'unknown'), round(extract(epoch FROM now_ts - l.renewed_at)::numeric, 3), l.expires_at),
                    HINT = 'Choose another idgen.worker_id, or idgen.worker_id = auto.';
            END IF;
        END IF;
        IF NOT found_row AND wanted_worker IS NULL THEN
            -- 4. auto: the lowest free id: never leased, released, or expired.
            SELECT min(c) INTO chosen FROM (
                SELECT 0 AS c WHERE NOT EXISTS (SELECT FROM @extschema@.idgen_registry_lease WHERE worker_id = 0)
                UNION ALL
                SELECT r.worker_id + 1 FROM @extschema@.idgen_registry_lease r
                 WHERE r.worker_id + 1 <= max_worker
                   AND NOT EXISTS (SELECT FROM @extschema@.idgen_registry_lease s WHERE s.worker_id = r.worker_id + 1)
                UNION ALL
                SELECT r.worker_id FROM @extschema@.idgen_registry_lease r
                 WHERE r.worker_id <= max_worker AND (r.released_tick IS NOT NULL OR r.expires_at < now_ts)
            ) free;
            IF chosen IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = '53400',
                    MESSAGE = 'no free worker id in the registry',
                    DETAIL = format('All %s worker ids of idgen.worker_bits = %s are held by live servers.', max_worker + 1, f.worker_bits),
                    HINT = 'Stop a server you no longer need (its lease is released at a clean shutdown, or expires), or start a new fleet with more worker bits.';
            END IF;
            SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = chosen;
            found_row := FOUND;
            IF found_row THEN
                prev := format('%s (incarnation %s, %s)', l.node_name, l.incarnation,
                               CASE WHEN l.released_tick IS NOT NULL THEN 'released' ELSE 'lease expired' END);
            END IF;
        END IF;
        chosen := coalesce(l.worker_id, wanted_worker, chosen);
        start_at := CASE WHEN NOT found_row THEN 0
                         WHEN l.released_tick IS NOT NULL THEN l.released_tick
                         ELSE l.fence_tick + 1 END;
    END IF;

    bound := greatest(
        greatest(now_ms + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms,
        start_at + ceil(lease_length_ms::numeric / f.time_unit_ms)::bigint,
        CASE WHEN l.incarnation = incarnation_id AND l.released_tick IS NULL THEN l.fence_tick END);
    INSERT INTO @extschema@.idgen_registry_lease AS r
        (worker_id, node_name, incarnation, system_identifier, timeline, address, start_tick,
         fence_tick, released_tick, lease_ms, renew_interval_ms, claimed_at, renewed_at,
         expires_at, clock_offset_ms, renewals)
    VALUES (chosen, node, incarnation_id, system_id, on_timeline,
            coalesce(host(inet_client_addr()), 'local') || ':' || coalesce(node_port::text, '?'),
            start_at, bound, NULL, lease_length_ms, renew_every_ms, now_ts, now_ts,
            now_ts + make_interval(secs => lease_length_ms / 1000.0), offset_ms, 0)
    ON CONFLICT ON CONSTRAINT idgen_registry_lease_pkey DO UPDATE SET
        node_name = excluded.node_name, incarnation = excluded.incarnation,
        system_identifier = excluded.system_identifier, timeline = excluded.timeline,
        address = excluded.address, start_tick = excluded.start_tick,
        fence_tick = excluded.fence_tick, released_tick = NULL, lease_ms = excluded.lease_ms,
        renew_interval_ms = excluded.renew_interval_ms,
        claimed_at = CASE WHEN r.incarnation = excluded.incarnation THEN r.claimed_at ELSE excluded.claimed_at END,
        renewed_at = excluded.renewed_at, expires_at = excluded.expires_at,
        clock_offset_ms = excluded.clock_offset_ms, renewals = 0;
    RETURN QUERY SELECT chosen, start_at, bound,
                        now_ts + make_interval(secs => lease_length_ms / 1000.0), now_ts, prev;
END
$$;

-- Renews a lease: moves R to the tick at now + lease (never back) and the expiry to now +
-- lease. Errors: 55006 when this incarnation no longer holds the worker id.
CREATE FUNCTION idgen_registry_renew(
    held_worker integer, incarnation_id text, lease_length_ms integer, renew_every_ms integer,
    offset_ms double precision)
RETURNS TABLE (fence_tick bigint, expires_at timestamptz, registry_now timestamptz)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    now_ts timestamptz := clock_timestamp();
    l      @extschema@.idgen_registry_lease;
BEGIN
    IF lease_length_ms IS NULL OR lease_length_ms < 1 OR renew_every_ms IS NULL OR renew_every_ms < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid lease renewal';
    END IF;
    UPDATE @extschema@.idgen_registry_lease r
       SET fence_tick = greatest(r.fence_tick,
                                 greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms),
           renewed_at = now_ts,
           expires_at = now_ts + make_interval(secs => lease_length_ms / 1000.0),
           lease_ms = lease_length_ms, renew_interval_ms = renew_every_ms,
           clock_offset_ms = offset_ms, renewals = r.renewals + 1
      FROM @extschema@.idgen_registry_fleet f
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL
    RETURNING r.* INTO l;
    IF NOT FOUND THEN
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = held_worker;
        RAISE EXCEPTION USING ERRCODE = '55006',
            MESSAGE = format('worker id %s is no longer leased to this server', held_worker),
            DETAIL = CASE WHEN NOT FOUND THEN 'The registry has no lease of it.'
                          WHEN l.released_tick IS NOT NULL THEN format('Its lease was released by incarnation %s.', l.incarnation)
                          ELSE format('Node %L (incarnation %s) took it over at %s, after this server''s lease expired.', l.node_name, l.incarnation, l.claimed_at) END,
            HINT = 'Restart this server to claim a worker id again; until then its ids stop at the last confirmed end of its lease.';
    END IF;
    RETURN QUERY SELECT l.fence_tick, l.expires_at, now_ts;
END
$$;

-- Releases a lease at a clean shutdown, recording the holder's final reservation (at most
-- R + 1): the next holder starts there. Returns false if this incarnation held nothing.
CREATE FUNCTION idgen_registry_release(held_worker integer, incarnation_id text, final_tick bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    UPDATE @extschema@.idgen_registry_lease r
       SET released_tick = greatest(least(final_tick, r.fence_tick + 1), r.start_tick),
           expires_at = clock_timestamp()
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL;
    RETURN FOUND;
END
$$;

-- Global segments (Leaf's own design, one high-water mark per name in the registry): a node's
-- allocator takes each range with one committed UPDATE ... RETURNING here and caches it in its
-- double buffer. Every number <= max_id may have been handed out by some node; none above.
CREATE TABLE idgen_registry_segment (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_id      bigint      NOT NULL,
    step        integer     NOT NULL CHECK (step > 0),
    description text        CHECK (octet_length(description) <= 1024),
    ranges      bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

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
    RETURN QUERY SELECT inserted > 0, s.step FROM @extschema@.idgen_registry_segment s WHERE s.name = segment;
END
$$;

-- A global segment's step, if it exists (a node draws from a name it has not declared).
CREATE FUNCTION idgen_registry_segment_get(segment text)
RETURNS TABLE (step integer, max_id bigint)
LANGUAGE sql STABLE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT s.step, s.max_id FROM @extschema@.idgen_registry_segment s WHERE s.name = segment $$;

-- Takes the next range of a global segment: the numbers after the mark, step_size of them
-- (fewer at the bigint maximum), in one committed UPDATE. Errors: 42704 no such segment,
-- 2200H the segment has run out.
CREATE FUNCTION idgen_registry_segment_take(segment text, step_size integer)
RETURNS TABLE (first_id bigint, last_id bigint, base_step integer)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    s     @extschema@.idgen_registry_segment;
    first bigint;
BEGIN
    IF step_size IS NULL OR step_size < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid step';
    END IF;
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
           ranges = r.ranges + 1, updated_at = clock_timestamp()
     WHERE r.name = segment
    RETURNING r.* INTO s;
    RETURN QUERY SELECT first, s.max_id, s.step;
END
$$;

-- The node's side: a segment of the local catalog is local (its mark is here) or global (its
-- mark is in the registry; max_id here is the registry's mark as of this node's last range).
ALTER TABLE idgen_segment
    ADD COLUMN scope text NOT NULL DEFAULT 'local' CHECK (scope IN ('local', 'global'));

-- segment_create gains scope => 'global'. (The old one's C symbol stays for databases not yet
-- updated: src/upgrade.rs.)
DROP FUNCTION IF EXISTS segment_create(text, bigint, integer, text);
CREATE OR REPLACE FUNCTION "segment_create"(
	"name" TEXT,
	"start" bigint DEFAULT 1,
	"step" INT DEFAULT 1000,
	"description" TEXT DEFAULT NULL,
	"scope" TEXT DEFAULT 'local'
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'segment_create_scoped_wrapper';
REVOKE EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    GRANT EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text) TO idgen_admin;
  END IF;
END
$$;
COMMENT ON FUNCTION segment_create(text, bigint, integer, text, text) IS
  'Creates a segment whose first number is start, refilled step numbers at a time; not undone by ROLLBACK. scope => ''global'': its numbers come from the registry, shared by every node.';

-- Every lease, for monitoring: holder, address, state, R and its time, offsets, layout.
CREATE VIEW idgen_registry_workers AS
SELECT l.worker_id, l.node_name, l.incarnation, l.address, l.system_identifier, l.timeline,
       CASE WHEN l.released_tick IS NOT NULL THEN 'released'
            WHEN l.expires_at < clock_timestamp() THEN 'expired'
            ELSE 'held' END AS state,
       l.fence_tick,
       pg_catalog.to_timestamp(
           (f.epoch_unix_ms + (l.fence_tick + 1) * f.time_unit_ms)::pg_catalog.float8
           OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS fenced_until,
       l.start_tick, l.released_tick, l.claimed_at, l.renewed_at, l.expires_at, l.lease_ms,
       l.renew_interval_ms, l.clock_offset_ms, l.renewals,
       f.epoch_unix_ms, f.worker_bits, f.sequence_bits, f.time_unit_ms
  FROM idgen_registry_lease l CROSS JOIN idgen_registry_fleet f;

-- The node's side: this server's registry client, from shared memory.
CREATE FUNCTION idgen_registry_client_status()
RETURNS TABLE (registry text, state text, worker_id integer, node_name text, incarnation text,
               lease_expires_at timestamptz, fence_tick bigint, fenced_until timestamptz,
               head_start_ms bigint, last_renewal timestamptz, renewals bigint,
               clock_offset_ms double precision, clock_offset_bound_ms double precision,
               last_error text)
LANGUAGE c VOLATILE PARALLEL SAFE ROWS 1
AS 'MODULE_PATHNAME', 'idgen_registry_client_status_wrapper';
CREATE VIEW idgen_registry_status AS SELECT * FROM idgen_registry_client_status();

SELECT pg_catalog.pg_extension_config_dump('idgen_registry_fleet', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_lease', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_segment', '');
COMMENT ON TABLE idgen_registry_segment IS
  'Global segments of the registry: numbers <= max_id may have been handed out by some node, numbers above never.';
COMMENT ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) IS
  'Registry: creates a global segment (an existing one is kept); returns its step.';
COMMENT ON FUNCTION idgen_registry_segment_get(text) IS
  'Registry: a global segment''s step and mark, if it exists.';
COMMENT ON FUNCTION idgen_registry_segment_take(text, integer) IS
  'Registry: the next range of a global segment, in one committed UPDATE.';
COMMENT ON TABLE idgen_registry_fleet IS
  'The registry''s one Snowflake layout (epoch, bit widths, tick), recorded by the first claim.';
COMMENT ON TABLE idgen_registry_lease IS
  'Worker id leases of the registry: no holder issues an id past fence_tick; the next starts above it.';
COMMENT ON VIEW idgen_registry_workers IS
  'Every worker id lease of this registry: holder, address, state, fence and clock offset.';
COMMENT ON VIEW idgen_registry_status IS
  'This server''s registry client: worker id, lease, fence, head start, clock offset, state.';
COMMENT ON FUNCTION idgen_registry_client_status() IS
  'This server''s registry client, one row (the idgen_registry_status view).';
COMMENT ON FUNCTION idgen_registry_hello() IS 'Registry: its clock and idgen version.';
COMMENT ON FUNCTION idgen_registry_claim(text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) IS
  'Registry: claims a worker id for a node incarnation; returns the floor and fence ticks.';
COMMENT ON FUNCTION idgen_registry_renew(integer, text, integer, integer, double precision) IS
  'Registry: renews a worker id lease; returns the new fence tick.';
COMMENT ON FUNCTION idgen_registry_release(integer, text, bigint) IS
  'Registry: releases a worker id lease at a clean shutdown, recording the final reservation.';

-- Nodes connect as a role that is a member of idgen_registry and can do nothing else here.
DO $$
BEGIN
  -- A role of that name made by someone else (a CREATEROLE holder, before the first install)
  -- would hand what idgen grants it to whoever controls it: refuse one that can log in, has
  -- any attribute, a password, or an administrator who is not a superuser. Members a superuser
  -- granted (GRANT idgen_registry TO ...) are how it is meant to be used, and stay.
  IF EXISTS (SELECT FROM pg_catalog.pg_authid a
              WHERE a.rolname OPERATOR(pg_catalog.=) 'idgen_registry'::pg_catalog.name
                AND (a.rolsuper OR a.rolcreaterole OR a.rolcreatedb OR a.rolcanlogin
                     OR a.rolreplication OR a.rolbypassrls OR a.rolpassword IS NOT NULL
                     OR a.rolvaliduntil IS NOT NULL
                     OR EXISTS (SELECT FROM pg_catalog.pg_auth_members m
                                  JOIN pg_catalog.pg_authid adm
                                    ON adm.oid OPERATOR(pg_catalog.=) m.member
                                 WHERE m.roleid OPERATOR(pg_catalog.=) a.oid
                                   AND m.admin_option AND NOT adm.rolsuper))) THEN
    RAISE EXCEPTION 'role idgen_registry exists with rights idgen does not give it'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'It can log in, has attributes or a password, or a role that is not a superuser administers it: idgen''s grants to it would go to whoever made it.',
            HINT = 'Drop the role (or make it NOLOGIN with no attributes, no password and no ADMIN OPTION held by other roles), then create the extension again.';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_registry') THEN
    CREATE ROLE idgen_registry NOLOGIN;
    COMMENT ON ROLE idgen_registry IS
      'Members may lease worker ids from this registry (GRANT idgen_registry TO <the nodes'' role>).';
  END IF;
END
$$;
REVOKE ALL ON TABLE idgen_registry_fleet, idgen_registry_lease, idgen_registry_segment FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_segment TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_get(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_create(text, bigint, integer, text) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_get(text) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer) TO idgen_registry;
REVOKE ALL ON TABLE idgen_registry_workers, idgen_registry_status FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_workers, idgen_registry_status TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_hello() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_renew(integer, text, integer, integer, double precision) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_release(integer, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_client_status() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_hello() TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_renew(integer, text, integer, integer, double precision) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_release(integer, text, bigint) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_client_status() TO pg_monitor;
