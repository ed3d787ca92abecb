-- idgen 0.4.0 -> 0.5.0: trust across servers (DESIGN.md §6, README "Many servers
-- with a registry").
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- * Holders prove who they are. A node sends a secret of its own with its claim (32 random
--   bytes made at its start, src/identity.rs); the registry keeps only its SHA-256 and renews,
--   releases and re-grants a lease, and takes back a global segment's numbers, only for a
--   caller that shows it (42501 otherwise). An incarnation is a name, never a credential, and
--   no error shows another holder's incarnation.
-- * A give-back returns only numbers of the last range taken, by its taker: the registry
--   records the first number and the taker of the range that set each mark.
-- * A registry that lost commits (a restore, an asynchronous failover, synchronous_commit off)
--   is detected from what the nodes know (their confirmed fence, their last mark), recorded in
--   idgen_registry_regression, and never believed: while a regression is open no worker id is
--   claimed and no range is taken, until an operator runs idgen_registry_resolve().
-- * Every function waits at most lock_timeout = 2s for a lock (55P03), so one stuck lock on the
--   lease table cannot hang the fleet.
--
-- The functions' signatures change, so a registry and its nodes are updated together: a node
-- running 0.4.0's library calls functions this version no longer has (42883, logged by its
-- registry client) and keeps its ids below its last fence until it is updated.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.5.0'" to load this file. \quit

ALTER TABLE idgen_registry_lease ADD COLUMN holder_key text;
ALTER TABLE idgen_registry_lease ADD COLUMN attested_standbys text[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN idgen_registry_lease.attested_standbys IS
  'Node names of the holder''s streaming standbys, as its last renewal named them: only these may succeed it by promotion while its lease lives.';
ALTER TABLE idgen_registry_segment
    ADD COLUMN taken_first bigint,
    ADD COLUMN taker text,
    ADD COLUMN taker_key text,
    ADD COLUMN given_back_by text,
    ADD COLUMN given_back_from bigint;
COMMENT ON COLUMN idgen_registry_lease.holder_key IS
  'SHA-256 (hex) of the holder''s secret: renew, release and a re-claim by the same incarnation must show the secret.';
COMMENT ON COLUMN idgen_registry_segment.taken_first IS
  'First number of the range that set max_id: a give-back never lowers the mark below taken_first - 1.';
COMMENT ON COLUMN idgen_registry_segment.given_back_by IS
  'Incarnation of the node that gave the last numbers back, and given_back_from the mark it lowered: its own reports of that mark are no regression.';
COMMENT ON COLUMN idgen_registry_segment.taker IS
  'Incarnation of the node that took the range that set max_id (NULL after a give-back): only it may give numbers back.';

-- A node's own rows: a global segment's max_id is now the least mark the node shows the
-- registry when it takes a range (a registry below it has lost commits). 0.4.0 stored the
-- caller's start there at segment_create, which may be above the registry's mark: forget it
-- until the next range sets it (that one range is taken without the check).
UPDATE idgen_segment SET max_id = -9223372036854775808 WHERE scope = 'global';

-- What the nodes showed the registry to have lost: a fence or a mark below one a node had
-- confirmed. While a row is open (resolved_at IS NULL) claims and takes are refused (55000).
CREATE TABLE idgen_registry_regression (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    detected_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    worker_id      integer,
    segment        text,
    registry_value bigint      NOT NULL,
    node_value     bigint      NOT NULL,
    node_name      text,
    incarnation    text,
    reported_by    text        NOT NULL,
    reporter_address text,
    resolved_at    timestamptz,
    dismissed      boolean     NOT NULL DEFAULT false,
    CHECK ((worker_id IS NULL) <> (segment IS NULL))
);
COMMENT ON TABLE idgen_registry_regression IS
  'Regressions of the registry seen by nodes (a fence or mark below what a node confirmed), with who reported them; open ones stop claims and takes until idgen_registry_resolve().';

-- Records what a node showed the registry to have lost, once per subject and reporting
-- incarnation while it is open (a node retrying adds nothing), naming the reporter: any member
-- of idgen_registry can report, so an operator reads who did before resolving.
CREATE FUNCTION idgen_registry_report_regression(worker integer, seg text, registry_value bigint,
                                                 node_value bigint, node text, incarnation_id text)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO @extschema@.idgen_registry_regression
         (worker_id, segment, registry_value, node_value, node_name, incarnation, reported_by,
          reporter_address)
  SELECT worker, seg, registry_value, node_value, node, incarnation_id, session_user,
         host(inet_client_addr())
   WHERE NOT EXISTS (
         SELECT FROM @extschema@.idgen_registry_regression g
          WHERE g.resolved_at IS NULL AND g.worker_id IS NOT DISTINCT FROM worker
            AND g.segment IS NOT DISTINCT FROM seg
            AND g.incarnation IS NOT DISTINCT FROM incarnation_id)
     -- Still true now: the caller compared with a mark read before it waited here (on
     -- idgen_registry_resolve(), which locks this table), and resolve may have raised it since.
     AND (seg IS NULL OR EXISTS (
         SELECT FROM @extschema@.idgen_registry_segment s
          WHERE s.name = seg AND s.max_id < node_value))
$$;

-- Which server this registry is, and until when it is on probation. A registry that restarted,
-- failed over or was restored (another postmaster start time or system identifier than the one
-- recorded) may have lost commits that no node has shown it yet. For a while it hands out no
-- range (ranges_until: at least twice the longest renewal interval it has seen, at least 20 s)
-- and grants no worker id except to the incarnation that holds it (claims_until: at least the
-- longest lease it has seen, at least 60 s), so that every live holder renews (showing its
-- fence) and every node reports its global segments' marks first; after it, a grant starts no
-- lower than the registry's clock, past every R a lost renewal could have confirmed.
-- A random token made when the extension is created here (not dumped): a dump reloaded into
-- the same running server makes a new one, so it counts as another server too.
CREATE TABLE idgen_registry_install (token text NOT NULL);
INSERT INTO idgen_registry_install VALUES (pg_catalog.gen_random_uuid()::text);
REVOKE ALL ON TABLE idgen_registry_install FROM PUBLIC;
COMMENT ON TABLE idgen_registry_install IS
  'A token made at CREATE EXTENSION (not dumped): part of the registry server''s identity.';

CREATE TABLE idgen_registry_server (
    singleton       boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    server_identity text        NOT NULL,
    ranges_until    timestamptz NOT NULL,
    claims_until    timestamptz NOT NULL,
    max_lease_ms    bigint      NOT NULL DEFAULT 0,
    max_renew_ms    bigint      NOT NULL DEFAULT 0
);
COMMENT ON TABLE idgen_registry_server IS
  'The registry server (system identifier and postmaster start) last seen, the ends of its probation after a change, and the longest lease and renewal interval seen.';

-- The ends of the probation, starting one if this server is not the one recorded. Called by the
-- nodes in a statement of its own (hello, and before a range), so that a refused claim or range
-- does not roll the start of the probation back.
CREATE FUNCTION idgen_registry_probation(OUT ranges_until timestamptz, OUT claims_until timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    me      text;
    r       @extschema@.idgen_registry_server;
    lease   bigint;
    renew   bigint;
    used    boolean;
    had_row boolean;
    now_ts  timestamptz := clock_timestamp();
BEGIN
    SELECT format('%s@%s@%s', s.system_identifier,
                  extract(epoch FROM pg_catalog.pg_postmaster_start_time()),
                  (SELECT i.token FROM @extschema@.idgen_registry_install i LIMIT 1))
      INTO me FROM pg_catalog.pg_control_system() s;
    SELECT * INTO r FROM @extschema@.idgen_registry_server;
    had_row := FOUND;
    IF had_row AND r.server_identity = me THEN
        ranges_until := r.ranges_until;
        claims_until := r.claims_until;
        RETURN;
    END IF;
    SELECT greatest(coalesce(max(l.lease_ms), 0), r.max_lease_ms, 60000),
           greatest(2 * coalesce(max(l.renew_interval_ms), 0)::bigint, 2 * r.max_renew_ms, 20000)
      INTO lease, renew FROM @extschema@.idgen_registry_lease l;
    lease := coalesce(lease, 60000);
    renew := coalesce(renew, 20000);
    -- A registry that has never granted or handed out anything has nothing to lose.
    used := had_row
            OR EXISTS (SELECT FROM @extschema@.idgen_registry_lease)
            OR EXISTS (SELECT FROM @extschema@.idgen_registry_segment WHERE ranges > 0);
    INSERT INTO @extschema@.idgen_registry_server AS x
           (singleton, server_identity, ranges_until, claims_until, max_lease_ms, max_renew_ms)
    VALUES (true, me,
            CASE WHEN used THEN now_ts + make_interval(secs => renew / 1000.0) ELSE '-infinity' END,
            CASE WHEN used THEN now_ts + make_interval(secs => lease / 1000.0) ELSE '-infinity' END,
            coalesce(r.max_lease_ms, 0), coalesce(r.max_renew_ms, 0))
    ON CONFLICT (singleton) DO UPDATE SET server_identity = excluded.server_identity,
        ranges_until = excluded.ranges_until, claims_until = excluded.claims_until
    RETURNING x.ranges_until, x.claims_until INTO ranges_until, claims_until;
END
$$;

-- Remembers the longest lease and renewal interval seen (for the next probation); writes only
-- when one is longer than recorded, so renewals do not contend on the row.
CREATE FUNCTION idgen_registry_note_lease(lease_length_ms integer, renew_every_ms integer)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  UPDATE @extschema@.idgen_registry_server
     SET max_lease_ms = greatest(max_lease_ms, lease_length_ms),
         max_renew_ms = greatest(max_renew_ms, renew_every_ms)
   WHERE max_lease_ms < lease_length_ms OR max_renew_ms < renew_every_ms
$$;

-- The hash the registry keeps of a holder's secret.
CREATE FUNCTION idgen_registry_key(holder_secret text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(holder_secret, 'UTF8')), 'hex') $$;

-- Refuses (55000) while a regression is open.
CREATE FUNCTION idgen_registry_check_regressions()
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n integer;
BEGIN
    SELECT count(*) INTO n FROM @extschema@.idgen_registry_regression WHERE resolved_at IS NULL;
    IF n > 0 THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = 'the registry has lost commits: no worker id is granted and no range taken until an operator resolves it',
            DETAIL = format('%s open regression(s) in idgen_registry_regression: nodes had confirmed fences or marks above what the registry holds (a restore, a failover to an asynchronous standby, synchronous_commit off).', n),
            HINT = 'On the registry, as a superuser: SELECT * FROM idgen_registry_resolve(); (README "A registry that lost commits").';
    END IF;
END
$$;

-- A node's global segments' marks (names[i] at marks[i]: the last number of its last range of
-- each): a mark above the registry's is a range the registry lost; reported.
CREATE FUNCTION idgen_registry_check_marks(segment_names text[], segment_marks bigint[], node text,
                                           incarnation_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_lost text;
    m record;
BEGIN
    FOR m IN SELECT s.name, s.max_id, k.mark
               FROM unnest(segment_names, segment_marks) AS k(name, mark)
               JOIN @extschema@.idgen_registry_segment s ON s.name = k.name
              WHERE k.mark > s.max_id
                -- The last range this very node gave back: its report read the mark before
                -- the give-back (nothing of the range above the new mark was handed out).
                AND NOT coalesce(s.given_back_by = incarnation_id AND k.mark = s.given_back_from, false) LOOP
        PERFORM @extschema@.idgen_registry_report_regression(NULL, m.name, m.max_id, m.mark, node, incarnation_id);
        found_lost := coalesce(found_lost, format('global segment %L''s mark in the registry is %s, below %s that this node holds: the registry has lost commits', m.name, m.max_id, m.mark));
    END LOOP;
    RETURN found_lost;
END
$$;

DROP FUNCTION idgen_registry_claim(text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer);
DROP FUNCTION idgen_registry_renew(integer, text, integer, integer, double precision);
DROP FUNCTION idgen_registry_release(integer, text, bigint);
DROP FUNCTION idgen_registry_segment_take(text, integer);
DROP FUNCTION idgen_registry_segment_give_back(text, bigint, bigint);

-- Claims a worker id for a node incarnation: wanted_worker, or with NULL (worker_id = auto) the
-- id this node name held last if free, else the lowest free one. holder_secret is the node's
-- own secret (its SHA-256 is kept); known_tick is the first tick the node's own reservation
-- never reached (0 if none): a floor for its own next ids. Returns the id, the floor (the first
-- tick the node may use) and the fence (R). Errors: 22023 bad arguments or a layout that
-- differs from the fleet's; 55006 the id is held by a live server; 53400 no id is free; 42501
-- this incarnation's lease with another secret; 55000 an open regression; 55P03 a lock not
-- granted within 2 s.
CREATE FUNCTION idgen_registry_claim(
    node text, incarnation_id text, holder_secret text, system_id text, on_timeline integer,
    wanted_worker integer, epoch_ms bigint, worker_bit_count integer, sequence_bit_count integer,
    tick_ms integer, lease_length_ms integer, renew_every_ms integer, offset_ms double precision,
    node_port integer, known_tick bigint)
RETURNS TABLE (worker_id integer, floor_tick bigint, fence_tick bigint,
               expires_at timestamptz, registry_now timestamptz, previous_holder text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    f          @extschema@.idgen_registry_fleet;
    l          @extschema@.idgen_registry_lease;
    now_ts     timestamptz := clock_timestamp();
    now_ms     bigint;
    max_worker bigint;
    chosen     integer;
    start_at   bigint;
    bound      bigint;
    prev       text;
    key        text;
    diffs      text[] := '{}';
    found_row  boolean := false;
    probation  timestamptz;
    caller     text := coalesce(host(inet_client_addr()), 'local') || ':' || coalesce(node_port::text, '?');
BEGIN
    IF node IS NULL OR octet_length(node) NOT BETWEEN 1 AND 63 OR node !~ '^[A-Za-z0-9._:-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = format('invalid node name %L', node),
            HINT = 'A node name is 1 to 63 bytes of ASCII letters, digits and . _ - :';
    END IF;
    IF incarnation_id IS NULL OR holder_secret IS NULL OR octet_length(holder_secret) < 32
       OR system_id IS NULL OR on_timeline IS NULL OR epoch_ms IS NULL
       OR worker_bit_count IS NULL OR sequence_bit_count IS NULL OR tick_ms IS NULL
       OR lease_length_ms IS NULL OR renew_every_ms IS NULL
       OR lease_length_ms < 1 OR renew_every_ms < 1 OR tick_ms < 1
       OR known_tick IS NULL OR known_tick < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid worker id claim';
    END IF;
    key := @extschema@.idgen_registry_key(holder_secret);
    now_ms := floor(extract(epoch FROM now_ts) * 1000);
    -- Claims are rare: one at a time. Renewals (row updates) wait for a claim, and back; at
    -- most lock_timeout each.
    LOCK TABLE @extschema@.idgen_registry_lease IN SHARE ROW EXCLUSIVE MODE;
    PERFORM @extschema@.idgen_registry_check_regressions();
    probation := (@extschema@.idgen_registry_probation()).claims_until;
    PERFORM @extschema@.idgen_registry_note_lease(lease_length_ms, renew_every_ms);

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

    -- The node's own reservation can say no more than a holder could have reached: a lease
    -- ahead (a larger value would only burn the worker id).
    known_tick := least(known_tick,
        greatest(now_ms + 2::bigint * lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms);

    -- 1. This incarnation holds one already (a claim whose answer was lost, a client started
    --    again): only with the same secret (a row of another secret under this incarnation is
    --    someone else's, and not this node's to find).
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.incarnation = incarnation_id AND r.holder_key = key AND r.released_tick IS NULL
       AND (wanted_worker IS NULL OR r.worker_id = wanted_worker);
    IF FOUND THEN
        chosen := l.worker_id;
        start_at := l.start_tick;
    ELSIF probation > now_ts THEN
        -- A registry that restarted, failed over or was restored may have lost grants and
        -- renewals no node has shown it yet: every other grant waits until the live holders
        -- have renewed.
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = format('the registry grants no worker id until %s', probation),
            DETAIL = 'It restarted, failed over or was restored: its leases may lack commits, so live holders renew first.',
            HINT = 'The claim is tried again; nothing to do.';
    ELSE
        -- 2. A promoted standby succeeds its primary: same system, a later timeline, and the
        --    primary has named it as its streaming standby in a renewal of the last lease
        --    (attested_standbys). The primary's ids stay below its R; the successor starts
        --    above it, without waiting for the lease to expire. A restored copy of the primary
        --    promoted elsewhere was never attested: it waits for the lease like anyone else.
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r
         WHERE r.system_identifier = system_id AND r.timeline < on_timeline
           AND r.released_tick IS NULL AND r.expires_at >= now_ts
           AND node = ANY (r.attested_standbys) AND node <> r.node_name
           AND (wanted_worker IS NULL OR r.worker_id = wanted_worker)
         ORDER BY r.timeline DESC, r.renewed_at DESC LIMIT 1;
        found_row := FOUND;
        IF found_row THEN
            prev := format('%s (timeline %s, succeeded by promotion)', l.node_name, l.timeline);
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
                prev := format('%s (released)', l.node_name);
            ELSIF l.expires_at < now_ts THEN
                prev := format('%s (lease expired at %s)', l.node_name, l.expires_at);
            ELSIF l.node_name = node AND l.system_identifier = system_id AND l.timeline = on_timeline
                  AND l.address = caller
                  AND l.renewed_at < now_ts - make_interval(secs => 2.0 * l.renew_interval_ms / 1000.0) THEN
                -- The same node name, system, timeline and address, silent for two renewal
                -- intervals: a restart after a crash (a copy elsewhere, or promoted, is not).
                prev := format('%s (not renewed since %s)', l.node_name, l.renewed_at);
            ELSIF l.node_name = node THEN
                RAISE EXCEPTION USING ERRCODE = '55006',
                    MESSAGE = format('node name %L holds worker id %s in another live server', node, l.worker_id),
                    DETAIL = format('It renewed its lease %s s ago; a second server with the same node name is refused while the first renews.',
                                    round(extract(epoch FROM now_ts - l.renewed_at)::numeric, 3)),
                    HINT = 'Give each server its own idgen.node_name (or cluster_name): a base backup or a copied configuration carries the original''s.';
            ELSE
                RAISE EXCEPTION USING ERRCODE = '55006',
                    MESSAGE = format('worker id %s is held by node %L', l.worker_id, l.node_name),
                    DETAIL = format('It renewed its lease %s s ago; it expires at %s.',
                                    round(extract(epoch FROM now_ts - l.renewed_at)::numeric, 3), l.expires_at),
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
                prev := format('%s (%s)', l.node_name,
                               CASE WHEN l.released_tick IS NOT NULL THEN 'released' ELSE 'lease expired' END);
            END IF;
        END IF;
        chosen := coalesce(l.worker_id, wanted_worker, chosen);
        start_at := CASE WHEN NOT found_row THEN 0
                         WHEN l.released_tick IS NOT NULL THEN l.released_tick
                         ELSE l.fence_tick + 1 END;
        -- The node's own reservation: it issued nothing at or past it, but maybe up to it.
        IF found_row AND l.node_name = node AND l.worker_id = chosen THEN
            start_at := greatest(start_at, known_tick);
        END IF;
        -- Never below the registry's clock: a lease that expired had its R below it, and one
        -- that a registry lost (restored, failed over) had its R at most a lease past the last
        -- renewal, which the probation has outlasted.
        start_at := greatest(start_at, greatest(now_ms - f.epoch_unix_ms, 0) / f.time_unit_ms);
    END IF;

    bound := greatest(
        greatest(now_ms + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms,
        start_at + ceil(lease_length_ms::numeric / f.time_unit_ms)::bigint,
        CASE WHEN l.incarnation = incarnation_id AND l.released_tick IS NULL THEN l.fence_tick END);
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
                        now_ts + make_interval(secs => lease_length_ms / 1000.0), now_ts, prev;
END
$$;

-- Renews a lease: moves R to the tick at now + lease (never back) and the expiry to now +
-- lease, for the holder that shows its secret. known_fence is the R the node last had
-- confirmed; standbys are the node names of the holder's streaming standbys (they may succeed
-- it by promotion). A registry whose R is below known_fence has lost commits: the regression
-- is recorded (claims and takes stop until idgen_registry_resolve()). While a regression is
-- open, the lease is kept alive (at an R never below the node's) and the answer's regression
-- column says why: the node then extends nothing, issuing only below the R it had confirmed.
-- Errors: 55006 this incarnation no longer holds the worker id; 42501 the secret does not
-- match; 55P03 a lock not granted within 2 s.
CREATE FUNCTION idgen_registry_renew(
    held_worker integer, incarnation_id text, holder_secret text, lease_length_ms integer,
    renew_every_ms integer, offset_ms double precision, known_fence bigint,
    standbys text[] DEFAULT '{}', segment_names text[] DEFAULT '{}',
    segment_marks bigint[] DEFAULT '{}')
RETURNS TABLE (fence_tick bigint, expires_at timestamptz, registry_now timestamptz, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    now_ts timestamptz := clock_timestamp();
    l      @extschema@.idgen_registry_lease;
    lost   text;
BEGIN
    IF lease_length_ms IS NULL OR lease_length_ms < 1 OR renew_every_ms IS NULL OR renew_every_ms < 1
       OR holder_secret IS NULL OR known_fence IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid lease renewal';
    END IF;
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = held_worker;
        IF NOT FOUND OR coalesce(l.released_tick - 1, l.fence_tick) < known_fence THEN
            -- This node was confirmed a fence the registry's row never reached (or there is
            -- no row): the registry lost this node's claim or renewals. Reported (for the
            -- operator; it raises nothing, the probation keeps others off the id), and answered
            -- (not raised, so that the report commits) as a regression: the node extends
            -- nothing.
            IF NOT EXISTS (SELECT FROM @extschema@.idgen_registry_regression g
                            WHERE g.worker_id = held_worker AND g.incarnation = incarnation_id
                              AND g.resolved_at IS NOT NULL) THEN
                PERFORM @extschema@.idgen_registry_report_regression(held_worker, NULL,
                    coalesce(l.released_tick - 1, l.fence_tick, -1), known_fence, NULL, incarnation_id);
                RETURN QUERY SELECT NULL::bigint, NULL::timestamptz, now_ts,
                    format('the registry has no lease of worker id %s up to tick %s that it confirmed to this node: the registry has lost commits', held_worker, known_fence);
                RETURN;
            END IF;
            -- Reported and resolved: the lease is gone from the registry; this server stays
            -- below its fence until a restart claims anew (55006 below).
        END IF;
        RAISE EXCEPTION USING ERRCODE = '55006',
            MESSAGE = format('worker id %s is no longer leased to this server', held_worker),
            DETAIL = CASE WHEN NOT FOUND THEN 'The registry has no lease of it.'
                          WHEN l.released_tick IS NOT NULL THEN 'Its lease was released.'
                          ELSE format('Node %L took it over at %s, after this server''s lease expired.', l.node_name, l.claimed_at) END,
            HINT = 'Restart this server to claim a worker id again; until then its ids stop at the last confirmed end of its lease.';
    END IF;
    IF l.holder_key IS DISTINCT FROM @extschema@.idgen_registry_key(holder_secret) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('only the holder of worker id %s can renew its lease', held_worker);
    END IF;
    lost := @extschema@.idgen_registry_check_marks(segment_names, segment_marks, l.node_name, incarnation_id);
    IF l.fence_tick < known_fence THEN
        PERFORM @extschema@.idgen_registry_report_regression(held_worker, NULL, l.fence_tick, known_fence, l.node_name, incarnation_id);
        lost := format('the registry''s fence of worker id %s is tick %s, below tick %s that it confirmed to this node: the registry has lost commits',
                       held_worker, l.fence_tick, known_fence);
    ELSIF lost IS NULL AND EXISTS (SELECT FROM @extschema@.idgen_registry_regression g WHERE g.resolved_at IS NULL) THEN
        -- Another node found the registry behind: nothing it says is believed until resolved.
        lost := 'the registry has lost commits (an open regression in idgen_registry_regression)';
    END IF;
    UPDATE @extschema@.idgen_registry_lease r
       SET fence_tick = greatest(r.fence_tick, known_fence,
                                 greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms),
           renewed_at = now_ts,
           expires_at = now_ts + make_interval(secs => lease_length_ms / 1000.0),
           lease_ms = lease_length_ms, renew_interval_ms = renew_every_ms,
           clock_offset_ms = offset_ms, renewals = r.renewals + 1,
           attested_standbys = coalesce(standbys, '{}')
      FROM @extschema@.idgen_registry_fleet f
     WHERE r.worker_id = held_worker
    RETURNING r.* INTO l;
    -- After the lease row (a claim holds the lease table and then writes the server row).
    PERFORM @extschema@.idgen_registry_probation();
    PERFORM @extschema@.idgen_registry_note_lease(lease_length_ms, renew_every_ms);
    RETURN QUERY SELECT l.fence_tick, l.expires_at, now_ts, lost;
END
$$;

-- Releases a lease at a clean shutdown, recording the holder's final reservation: the next
-- holder starts there. Returns false if this incarnation held nothing. Errors: 42501 the
-- secret does not match.
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
    -- Never below the start or the fence the registry holds: a final reservation above the
    -- fence (a registry that lost the renewals behind it) is believed, since it comes from
    -- the holder itself, up to a lease ahead of the clock (no holder reaches further).
    -- A lease ahead of the clock, and never below the fence the registry itself granted (a
    -- floor may be further ahead than twice this holder's own lease: a promotion from a
    -- primary with a longer one).
    SELECT greatest(greatest(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
                    + 2::bigint * l.lease_ms - f.epoch_unix_ms, 0) / f.time_unit_ms,
                    l.fence_tick + 1)
      INTO cap FROM @extschema@.idgen_registry_fleet f;
    UPDATE @extschema@.idgen_registry_lease r
       SET released_tick = greatest(least(final_tick, cap), r.start_tick),
           fence_tick = greatest(r.fence_tick, least(final_tick, cap) - 1),
           expires_at = clock_timestamp()
     WHERE r.worker_id = held_worker;
    RETURN true;
END
$$;

-- Takes the next range of a global segment for a node: the numbers after the mark, step_size
-- of them (fewer at the bigint maximum), in one committed UPDATE, recording the range's first
-- number and its taker. known_mark is the mark the node saw at its last range (NULL for none):
-- a mark below it means the registry lost commits; the regression is recorded and no range is
-- handed out (the answer's columns are NULL and regression says why). Errors: 42704 no such
-- segment; 2200H the segment has run out; 55000 an open regression; 55P03 a lock not granted
-- within 2 s.
CREATE FUNCTION idgen_registry_segment_take(segment text, step_size integer, incarnation_id text,
                                            holder_secret text, known_mark bigint)
RETURNS TABLE (first_id bigint, last_id bigint, base_step integer, regression text)
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
    SELECT * INTO s FROM @extschema@.idgen_registry_segment r WHERE r.name = segment FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('global segment %L does not exist', segment);
    END IF;
    IF s.max_id < known_mark
       AND NOT coalesce(s.given_back_by = incarnation_id AND known_mark = s.given_back_from, false) THEN
        PERFORM @extschema@.idgen_registry_report_regression(NULL, segment, s.max_id, known_mark, NULL, incarnation_id);
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, s.step,
            format('global segment %L''s mark in the registry is %s, below %s that this node saw: the registry has lost commits',
                   segment, s.max_id, known_mark);
        RETURN;
    END IF;
    IF (@extschema@.idgen_registry_probation()).ranges_until > clock_timestamp() THEN
        -- After a restart, failover or restore the registry may have lost ranges whose takers
        -- have not reported their marks yet: none is handed out until they have.
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = format('the registry hands out no range until %s', (@extschema@.idgen_registry_probation()).ranges_until),
            DETAIL = 'It restarted, failed over or was restored: every node reports its marks first.',
            HINT = 'The refill is tried again; cached ranges serve meanwhile.';
    END IF;
    PERFORM @extschema@.idgen_registry_check_regressions();
    IF s.max_id = 9223372036854775807 THEN
        RAISE EXCEPTION USING ERRCODE = '2200H', MESSAGE = format('global segment %L has run out of numbers', segment);
    END IF;
    first := s.max_id + 1;
    UPDATE @extschema@.idgen_registry_segment r
       SET max_id = CASE WHEN s.max_id > 9223372036854775807 - step_size THEN 9223372036854775807
                         ELSE s.max_id + step_size END,
           ranges = r.ranges + 1, updated_at = clock_timestamp(),
           taken_first = first, taker = incarnation_id,
           taker_key = @extschema@.idgen_registry_key(holder_secret)
     WHERE r.name = segment
    RETURNING r.* INTO s;
    RETURN QUERY SELECT first, s.max_id, s.step, NULL::text;
END
$$;

-- The registry's side of a give-back (README "Give-back"): the node that took a global
-- segment's last range, showing its secret, lowers the mark to new_mark, if the mark is still
-- the one its range set (expected_mark) and new_mark is not below that range's first number
-- minus one: only numbers of the last range go back, never those of an earlier range, which
-- may lie below another node's. True if it did; false if someone took a range since. Errors:
-- 42501 the caller did not take the last range (or showed another secret); 22023 new_mark
-- below the last range.
CREATE FUNCTION idgen_registry_segment_give_back(segment text, incarnation_id text, holder_secret text,
                                                 expected_mark bigint, new_mark bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    s @extschema@.idgen_registry_segment;
BEGIN
    IF incarnation_id IS NULL OR holder_secret IS NULL OR expected_mark IS NULL OR new_mark IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid give-back';
    END IF;
    SELECT * INTO s FROM @extschema@.idgen_registry_segment r WHERE r.name = segment FOR UPDATE;
    IF NOT FOUND OR s.max_id <> expected_mark THEN
        RETURN false;
    END IF;
    IF s.taker IS DISTINCT FROM incarnation_id
       OR s.taker_key IS DISTINCT FROM @extschema@.idgen_registry_key(holder_secret) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('only the node that took global segment %L''s last range can give numbers back', segment);
    END IF;
    IF new_mark >= expected_mark THEN
        RETURN false;
    END IF;
    IF new_mark < s.taken_first - 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('a give-back of global segment %L may return only numbers of its last range, %s to %s', segment, s.taken_first, s.max_id);
    END IF;
    UPDATE @extschema@.idgen_registry_segment r
       SET max_id = new_mark, updated_at = clock_timestamp(), taker = NULL, taker_key = NULL,
           given_back_by = incarnation_id, given_back_from = expected_mark
     WHERE r.name = segment;
    RETURN true;
END
$$;

-- Ends the open regressions (README "A registry that lost commits"), as a superuser on the
-- registry once every node has reported: raises each lease's R and each global segment's mark
-- to the highest value a node reported, so that no holder or taker starts below what was
-- handed out, and closes them. Reports listed in dismiss (their ids; read reported_by first:
-- any member of idgen_registry can report) are closed without raising anything. Reports arriving
-- meanwhile wait for it (the table is locked first), so none is closed unapplied. Returns what
-- it raised.
CREATE FUNCTION idgen_registry_resolve(dismiss bigint[] DEFAULT '{}')
RETURNS TABLE (worker_id integer, segment text, raised_from bigint, raised_to bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    LOCK TABLE @extschema@.idgen_registry_regression IN SHARE ROW EXCLUSIVE MODE;
    UPDATE @extschema@.idgen_registry_regression g
       SET resolved_at = clock_timestamp(), dismissed = true
     WHERE g.resolved_at IS NULL AND g.id = ANY (coalesce(dismiss, '{}'));
    -- A worker id's report raises nothing here: a holder whose row survived raised its R with
    -- its own renewal (only the holder can); one whose row was lost is told so at its next
    -- renewal (55006: it stays below its fence until a restart claims anew); and the probation
    -- kept everyone else off the id until every R a lost renewal could have confirmed had
    -- passed (with one lease length for the whole fleet). Such reports are only closed.
    RETURN QUERY
    WITH worst AS (
        SELECT g.segment, max(g.node_value) AS v FROM @extschema@.idgen_registry_regression g
         WHERE g.resolved_at IS NULL AND g.segment IS NOT NULL GROUP BY g.segment),
    raised AS (
        UPDATE @extschema@.idgen_registry_segment r
           SET max_id = w.v, taker = NULL, taker_key = NULL, updated_at = clock_timestamp()
          FROM worst w, (SELECT name, max_id FROM @extschema@.idgen_registry_segment) o
         WHERE r.name = w.segment AND o.name = r.name AND r.max_id < w.v
        RETURNING r.name, o.max_id AS before, r.max_id AS after)
    SELECT NULL::integer, raised.name, raised.before, raised.after FROM raised;
    UPDATE @extschema@.idgen_registry_regression g SET resolved_at = clock_timestamp()
     WHERE g.resolved_at IS NULL;
END
$$;

-- A node without a worker id (it only draws global segments) reports its marks with this,
-- every renewal interval, as renewals do. Returns the registry's clock and what it found lost.
CREATE FUNCTION idgen_registry_report(node text, incarnation_id text, segment_names text[],
                                      segment_marks bigint[], renew_every_ms integer)
RETURNS TABLE (registry_now timestamptz, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
BEGIN
    PERFORM @extschema@.idgen_registry_probation();
    IF renew_every_ms > 0 THEN
        PERFORM @extschema@.idgen_registry_note_lease(0, renew_every_ms);
    END IF;
    RETURN QUERY SELECT clock_timestamp(),
        @extschema@.idgen_registry_check_marks(segment_names, segment_marks, node, incarnation_id);
END
$$;

SELECT pg_catalog.pg_extension_config_dump('idgen_registry_regression', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_server', '');

COMMENT ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer, bigint) IS
  'Registry: claims a worker id for a node incarnation and its secret; returns the floor and fence ticks.';
COMMENT ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision, bigint, text[], text[], bigint[]) IS
  'Registry: renews a worker id lease for its holder (secret); returns the new fence tick, or the regression it detected.';
COMMENT ON FUNCTION idgen_registry_release(integer, text, text, bigint) IS
  'Registry: releases a worker id lease at a clean shutdown (holder''s secret), recording the final reservation.';
COMMENT ON FUNCTION idgen_registry_segment_take(text, integer, text, text, bigint) IS
  'Registry: the next range of a global segment, in one committed UPDATE, recording its taker.';
COMMENT ON FUNCTION idgen_registry_segment_give_back(text, text, text, bigint, bigint) IS
  'Registry: the taker of a global segment''s last range lowers the mark within that range (a node gives back its unused numbers).';
COMMENT ON FUNCTION idgen_registry_resolve(bigint[]) IS
  'Registry (superuser): raises fences and marks to what nodes reported (except the dismissed reports) and closes the open regressions.';
COMMENT ON FUNCTION idgen_registry_report(text, text, text[], bigint[], integer) IS
  'Registry: a node without a worker id reports its global segments'' marks.';
COMMENT ON FUNCTION idgen_registry_report_regression(integer, text, bigint, bigint, text, text) IS
  'Registry: records a regression a node found, once per subject and reporter while open.';
COMMENT ON FUNCTION idgen_registry_probation() IS
  'Registry: the ends of its probation (ranges, claims) after a restart, failover or restore.';
COMMENT ON FUNCTION idgen_registry_note_lease(integer, integer) IS
  'Registry: remembers the longest lease and renewal interval seen.';
COMMENT ON FUNCTION idgen_registry_check_marks(text[], bigint[], text, text) IS
  'Registry: reports the global segment marks of a node that are above the registry''s.';
COMMENT ON FUNCTION idgen_registry_key(text) IS 'Registry: the SHA-256 kept of a holder''s secret.';
COMMENT ON FUNCTION idgen_registry_check_regressions() IS 'Registry: 55000 while a regression is open.';

REVOKE ALL ON TABLE idgen_registry_regression FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_regression TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_key(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_regressions() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_resolve(bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_report_regression(integer, text, bigint, bigint, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_probation() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_check_marks(text[], bigint[], text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_report(text, text, text[], bigint[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_report(text, text, text[], bigint[], integer) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_probation() TO idgen_registry;
REVOKE EXECUTE ON FUNCTION idgen_registry_note_lease(integer, integer) FROM PUBLIC;
REVOKE ALL ON TABLE idgen_registry_server FROM PUBLIC;
GRANT SELECT ON TABLE idgen_registry_server TO pg_monitor;
REVOKE EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision, bigint, text[], text[], bigint[]) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_release(integer, text, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer, text, text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_give_back(text, text, text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_claim(text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, integer, double precision, integer, bigint) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_renew(integer, text, text, integer, integer, double precision, bigint, text[], text[], bigint[]) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_release(integer, text, text, bigint) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_take(text, integer, text, text, bigint) TO idgen_registry;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_give_back(text, text, text, bigint, bigint) TO idgen_registry;
