-- idgen 0.8.0 -> 0.9.0: the registry enforces its side of the fault model (DESIGN.md §6).
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- A registry grants worker ids and hands out global ranges only while it can show that it
-- keeps what it acknowledges (idgen_registry_check_durable: a synchronous standby streaming,
-- or idgen.registry_single_server = on, with fsync and synchronous_commit on). Leases and
-- renewal intervals are bounded (100 ms to 120 s), so no member stores a lease that makes the
-- next probation last for weeks; a renewal's confirmed fence is capped at a lease past the
-- registry's clock, so no member burns a worker id; a global segment asked to start above an
-- existing registry segment's numbers is refused instead of handing out the numbers below.
--
-- Global segments give nothing back any more: idgen_registry_segment_give_back is dropped, the
-- columns only it used are emptied, and with them goes the exemption that let a lost re-take ending where
-- a give-back began go unreported (review finding S4). A node of an earlier release that still
-- calls it gets 42883 and logs that it skipped its unused numbers: a gap.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.9.0'" to load this file. \quit

DROP FUNCTION @extschema@.idgen_registry_segment_give_back(text, text, text, bigint, bigint);
-- The columns only the give-back used stay (a dump of an earlier release names them in its
-- COPY), emptied.
UPDATE @extschema@.idgen_registry_segment
   SET taken_first = NULL, taker_key = NULL, given_back_by = NULL, given_back_from = NULL;
-- Lease lengths and renewal intervals a member recorded before the registry bounded them (S8:
-- 2^31 - 1 ms made the next probation last weeks): the recorded maxima and every lease's, live
-- ones too (a member's live lease of weeks is the very case), to the 120 s the registry grants
-- now. A longer live lease's holder can confirm no more after the update: its next renewal
-- asking for more is refused.
UPDATE @extschema@.idgen_registry_server
   SET max_lease_ms = LEAST(max_lease_ms, 120000),
       max_renew_ms = LEAST(max_renew_ms, 120000);
UPDATE @extschema@.idgen_registry_lease
   SET lease_ms = LEAST(lease_ms, 120000),
       renew_interval_ms = LEAST(renew_interval_ms, 120000)
 WHERE lease_ms OPERATOR(pg_catalog.>) 120000 OR renew_interval_ms OPERATOR(pg_catalog.>) 120000;

COMMENT ON COLUMN @extschema@.idgen_registry_segment.taker IS
  'Incarnation of the node that took the range that set max_id, for operators (never a credential).';
COMMENT ON COLUMN @extschema@.idgen_registry_segment.taken_first IS
  'Unused (NULL) since 0.9.0, which removed global give-back, as are taker_key, given_back_by and given_back_from: kept so that dumps of earlier releases restore.';
COMMENT ON COLUMN @extschema@.idgen_registry_segment.given_back_by IS NULL;

CREATE FUNCTION @extschema@.idgen_registry_check_durable()
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

CREATE FUNCTION @extschema@.idgen_registry_check_lease(lease_length_ms integer, renew_every_ms integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF lease_length_ms IS NULL OR lease_length_ms NOT BETWEEN 100 AND 120000 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a lease of %s ms is outside 100 ms to 120 s', lease_length_ms),
            HINT = 'Set idgen.registry_lease to at most 120s on the node.';
    END IF;
    IF renew_every_ms IS NULL OR renew_every_ms NOT BETWEEN 1 AND lease_length_ms THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('a renewal interval of %s ms is outside 1 ms to the lease, %s ms',
                                        renew_every_ms, lease_length_ms);
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION @extschema@.idgen_registry_check_durable() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION @extschema@.idgen_registry_check_lease(integer, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_segment_create(segment text, start_at bigint, step_size integer, about text)
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

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_claim(
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
    PERFORM @extschema@.idgen_registry_check_lease(lease_length_ms, renew_every_ms);
    PERFORM @extschema@.idgen_registry_check_durable();
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

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_renew(
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
    PERFORM @extschema@.idgen_registry_check_lease(lease_length_ms, renew_every_ms);
    -- A fence the registry confirmed is at most a lease past its clock: a larger one shown would
    -- only burn the worker id for every later holder.
    SELECT least(known_fence, greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint
                                       + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms + 1)
      INTO known_fence FROM @extschema@.idgen_registry_fleet f;
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
                PERFORM @extschema@.idgen_registry_report_regression(held_worker::integer, NULL::text,
                    coalesce(l.released_tick - 1, l.fence_tick, -1)::bigint, known_fence::bigint, NULL::text, incarnation_id::text);
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
        PERFORM @extschema@.idgen_registry_report_regression(held_worker::integer, NULL::text, l.fence_tick::bigint, known_fence::bigint, l.node_name::text, incarnation_id::text);
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

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_report(node text, incarnation_id text, segment_names text[],
                                      segment_marks bigint[], renew_every_ms integer)
RETURNS TABLE (registry_now timestamptz, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
BEGIN
    PERFORM @extschema@.idgen_registry_probation();
    IF renew_every_ms > 0 THEN
        PERFORM @extschema@.idgen_registry_check_lease(120000, renew_every_ms);
        PERFORM @extschema@.idgen_registry_note_lease(0, renew_every_ms);
    END IF;
    RETURN QUERY SELECT clock_timestamp(),
        @extschema@.idgen_registry_check_marks(segment_names, segment_marks, node, incarnation_id);
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_segment_take(segment text, step_size integer, incarnation_id text,
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
    PERFORM @extschema@.idgen_registry_check_durable();
    SELECT * INTO s FROM @extschema@.idgen_registry_segment r WHERE r.name = segment FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('global segment %L does not exist', segment);
    END IF;
    IF s.max_id < known_mark THEN
        PERFORM @extschema@.idgen_registry_report_regression(NULL::integer, segment::text, s.max_id::bigint, known_mark::bigint, NULL::text, incarnation_id::text);
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
           ranges = r.ranges + 1, updated_at = clock_timestamp(), taker = incarnation_id
     WHERE r.name = segment
    RETURNING r.* INTO s;
    RETURN QUERY SELECT first, s.max_id, s.step, NULL::text;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_serial_take(serial text, period text, step_size bigint,
                                           incarnation_id text, holder_secret text,
                                           serial_reset text, serial_format text, known_mark bigint)
RETURNS TABLE (mark bigint, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    d       @extschema@.idgen_registry_serial;
    current bigint;
    taken   bigint;
BEGIN
    IF serial IS NULL OR octet_length(serial) NOT BETWEEN 1 AND 40 OR serial ~ '[[:cntrl:]]' OR period IS NULL
       OR period !~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'
       OR step_size IS NULL OR step_size < 1 OR step_size > 1000000
       OR incarnation_id IS NULL OR holder_secret IS NULL OR octet_length(holder_secret) < 32
       OR serial_reset IS NULL OR serial_format IS NULL OR known_mark IS NULL OR known_mark < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid serial counter request';
    END IF;
    PERFORM @extschema@.idgen_registry_check_durable();
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
    SELECT c.max_id INTO current FROM @extschema@.idgen_registry_serial_counter c
     WHERE c.serial = idgen_registry_serial_take.serial AND c.period = idgen_registry_serial_take.period
       FOR UPDATE;
    IF coalesce(current, 0) < known_mark THEN
        PERFORM @extschema@.idgen_registry_report_serial_regression(serial::text, period::text,
            coalesce(current, 0)::bigint, known_mark::bigint, NULL::text, incarnation_id::text);
        RETURN QUERY SELECT NULL::bigint,
            format('global serial %L''s counter for %L in the registry is %s, below %s that this node took: the registry has lost commits',
                   serial, period, coalesce(current, 0), known_mark);
        RETURN;
    END IF;
    IF (@extschema@.idgen_registry_probation()).ranges_until > clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = format('the registry hands out no range until %s', (@extschema@.idgen_registry_probation()).ranges_until),
            DETAIL = 'It restarted, failed over or was restored: every node reports its marks first.';
    END IF;
    PERFORM @extschema@.idgen_registry_check_regressions();
    INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id, taker)
    VALUES (serial, period, step_size, incarnation_id)
    ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
       SET max_id = c.max_id + excluded.max_id, taker = excluded.taker,
           updated_at = clock_timestamp()
    RETURNING c.max_id INTO taken;
    RETURN QUERY SELECT taken, NULL::text;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_check_marks(segment_names text[], segment_marks bigint[], node text,
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
              WHERE k.mark > s.max_id LOOP
        PERFORM @extschema@.idgen_registry_report_regression(NULL::integer, m.name::text, m.max_id::bigint, m.mark::bigint, node::text, incarnation_id::text);
        found_lost := coalesce(found_lost, format('global segment %L''s mark in the registry is %s, below %s that this node holds: the registry has lost commits', m.name, m.max_id, m.mark));
    END LOOP;
    -- Global serials' counters, named E'\\x01serial\\x01' || serial || E'\\x01' || period.
    FOR m IN SELECT k.serial, k.period, coalesce(c.max_id, 0) AS max_id, k.mark
               FROM (SELECT split_part(x.name, chr(1), 3) AS serial,
                            split_part(x.name, chr(1), 4) AS period, x.mark
                       FROM unnest(segment_names, segment_marks) AS x(name, mark)
                      WHERE x.name LIKE chr(1) || 'serial' || chr(1) || '%'
                        AND array_length(string_to_array(x.name, chr(1)), 1) = 4
                        -- A global segment's name is a segment's mark, never a serial's.
                        AND NOT EXISTS (SELECT FROM @extschema@.idgen_registry_segment s
                                         WHERE s.name = x.name)) k
               LEFT JOIN @extschema@.idgen_registry_serial_counter c
                      ON c.serial = k.serial AND c.period = k.period
              WHERE k.mark > coalesce(c.max_id, 0)
                AND octet_length(k.serial) BETWEEN 1 AND 40
                AND k.period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$' LOOP
        PERFORM @extschema@.idgen_registry_report_serial_regression(m.serial::text, m.period::text,
            m.max_id::bigint, m.mark::bigint, node::text, incarnation_id::text);
        found_lost := coalesce(found_lost, format('global serial %L''s counter for %L in the registry is %s, below %s that this node holds: the registry has lost commits', m.serial, m.period, m.max_id, m.mark));
    END LOOP;
    RETURN found_lost;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.idgen_registry_resolve(dismiss bigint[] DEFAULT '{}')
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
           SET max_id = w.v, taker = NULL, updated_at = clock_timestamp()
          FROM worst w, (SELECT name, max_id FROM @extschema@.idgen_registry_segment) o
         WHERE r.name = w.segment AND o.name = r.name AND r.max_id < w.v
        RETURNING r.name, o.max_id AS before, r.max_id AS after)
    SELECT NULL::integer, raised.name, raised.before, raised.after FROM raised;
    -- A global serial's counter: raised to the highest mark a node reported.
    RETURN QUERY
    WITH worst AS (
        SELECT g.serial, g.serial_period AS period, max(g.node_value) AS v
          FROM @extschema@.idgen_registry_regression g
         WHERE g.resolved_at IS NULL AND g.serial IS NOT NULL GROUP BY 1, 2),
    before AS (
        SELECT w.serial, w.period, w.v, c.max_id AS was FROM worst w
          LEFT JOIN @extschema@.idgen_registry_serial_counter c
                 ON c.serial = w.serial AND c.period = w.period
         WHERE coalesce(c.max_id, 0) < w.v),
    raised AS (
        INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id)
        SELECT b.serial, b.period, b.v FROM before b
        ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
           SET max_id = greatest(c.max_id, excluded.max_id), taker = NULL, updated_at = clock_timestamp()
        RETURNING c.serial, c.period)
    SELECT NULL::integer, format('serial %s, period %s', b.serial, b.period), b.was, b.v
      FROM before b JOIN raised r ON r.serial = b.serial AND r.period = b.period;
    UPDATE @extschema@.idgen_registry_regression g SET resolved_at = clock_timestamp()
     WHERE g.resolved_at IS NULL;
END
$$;
