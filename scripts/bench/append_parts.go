package main

import (
	"context"
	"fmt"
	"strings"
)

func init() {
	groups = append(groups, group{
		title: "append, part by part",
		names: []string{"append_part_event_row_unhashed", "append_part_event_row", "append_part_stream_row", "append_part_lock", "append_part_messagedb"},
		run:   runAppendParts,
	})
}

// The parts of an append (issue 10's "measure each part"), each a pgbench
// script run by one client on the event store's own tables, as prepared
// statements (as pgx sends the append) beside pgbench's 1-row insert, also
// prepared: what the server spends on each thing an append must write,
// with pgbench's small client share in both. Each part adds to the one
// before:
//   - event_row_unhashed: one events row without its two hashes (NULL, as
//     stored before hashing began): what hashing adds to;
//   - event_row: one events row (four indexes, jsonb data and metadata, the
//     two hashes), an event the size of a Claimed;
//   - stream_row: and the stream's row, written first, in one statement
//     (the optimistic version check lives there);
//   - lock: and the per-stream advisory lock taken before any write (what
//     keeps each stream's versions in the global log's order).
//
// These are shapes of eventstore/postgres's appendOneSQL, written out here,
// not the statement itself: the whole append, through the Go client, is
// append_1ev_c1.
func appendPartScripts(schema string) []struct{ name, script string } {
	const (
		data = `{"operation_id":"OP-4471","execution_id":"EXE-4471.1","capability_id":"CAP-4471.1","message_id":"MSG-55A",` +
			`"worker_id":"worker-1","attempt":1,"lease_epoch":1,"lease_expires_at":"2026-11-26T14:03:10Z","idempotency_key":"refund-OP-4471-a1"}`
		metadata = `{"schema_version":1,"correlation_id":"COR-2210","causation_id":"MSG-55A","actor":"worker-1","recorded_at":"2026-11-26T14:02:10Z"}`
		hash     = `decode(repeat('ab', 32), 'hex')`
	)
	eventRow := func(hash string) string {
		return fmt.Sprintf(`INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata, prev_hash, event_hash)
  SELECT 'part-' || :s, 0, gen_random_uuid(), 'Claimed', '%[2]s', '%[3]s', %[4]s, %[4]s`, schema, data, metadata, hash)
	}
	event := eventRow(hash)
	stream := func(from string) string {
		return fmt.Sprintf(`INSERT INTO %[1]s.streams (stream_id, version, head_hash) SELECT 'part-' || :s, 0, %[2]s %[3]s
  ON CONFLICT (stream_id) DO NOTHING RETURNING stream_id`, schema, hash, from)
	}
	oneLine := func(sql string) string { return strings.Join(strings.Fields(sql), " ") + ";\n" }
	const random = "\\set s random(1, 4000000000000)\n"
	return []struct{ name, script string }{
		{"append_part_event_row_unhashed", random + oneLine(eventRow("NULL::bytea"))},
		{"append_part_event_row", random + oneLine(event)},
		{"append_part_stream_row", random + oneLine(`WITH si AS (`+stream("")+`), e AS (`+event+` FROM si RETURNING 1) SELECT count(*) FROM e`)},
		{"append_part_lock", random + oneLine(`WITH l AS (SELECT pg_advisory_xact_lock(:s)), si AS (`+stream("FROM l")+`), e AS (`+event+` FROM si RETURNING 1) SELECT count(*) FROM e`)},
	}
}

// runAppendParts samples the baseline and every part in turn, round after
// round (baseline, part 1, part 2, part 3, baseline, ...), one client each.
// The whole append is append_1ev_c1 beside the unprepared insert (the
// issue's baseline); prepared, that insert is a little faster.
func runAppendParts(ctx context.Context, s *settings, emit func(figure)) error {
	if err := preparePgbench(ctx, s.url); err != nil {
		return err
	}
	store, err := openStore(ctx, s, storeSchema, 2) // migrates the tables the parts write
	if err != nil {
		return err
	}
	store.Close()
	parts := appendPartScripts(storeSchema)
	var (
		base  []float64
		ours  = make([][]float64, len(parts))
		wants = make([]bool, len(parts))
		some  bool
	)
	for i, p := range parts {
		wants[i] = s.wants(p.name)
		some = some || wants[i]
	}
	if !some && !s.wants("append_part_messagedb") {
		return nil
	}
	// The peer beside the parts: Message DB's whole write_message, one
	// client, also prepared (messagedb.go).
	var peer []float64
	wantPeer := s.mdbURL != "" && s.wants("append_part_messagedb")
	for range s.rounds {
		tps, err := pgbench(ctx, s, pgbenchInsert1, 1, s.sample, "-M", "prepared")
		if err != nil {
			return fmt.Errorf("append parts: baseline: %w", err)
		}
		base = append(base, tps)
		if wantPeer {
			tps, err := messageDBRate(ctx, s, 1, s.sample)
			if err != nil {
				return fmt.Errorf("append_part_messagedb: %w", err)
			}
			peer = append(peer, tps)
		}
		for i, p := range parts {
			if !wants[i] {
				continue
			}
			tps, err := pgbench(ctx, s, p.script, 1, s.sample, "-M", "prepared")
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			ours[i] = append(ours[i], tps)
		}
	}
	for i, p := range parts {
		if !wants[i] {
			continue
		}
		f := rateFigure(p.name, "tps", "pgbench 1-row insert c1, prepared", "", ours[i], base)
		f.note = "server cost of an append's parts, cumulative (scripts/bench/append_parts.go); pgbench, 1 client"
		emit(f)
	}
	if wantPeer {
		f := rateFigure("append_part_messagedb", "tps", "pgbench 1-row insert c1, prepared", "", peer, base)
		f.note = "the peer beside the parts: Message DB's whole write_message (lock, version read, one row with four indexes); pgbench, 1 client"
		emit(f)
	}
	return nil
}
