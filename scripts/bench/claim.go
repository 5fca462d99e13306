package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/eventstore"
	"opledger/eventstore/postgres"
)

func init() {
	groups = append(groups, group{
		title: "claim",
		names: []string{"claim_c1", "claim_c4"},
		run:   runClaims,
	}, group{
		title: "claim by stream length",
		names: []string{"claim_stream_10", "claim_stream_100", "claim_stream_1000", "claim_stream_10000"},
		run:   runClaimByLength,
	})
}

// benchStart is the ledger clock's start in every figure.
var benchStart = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// claimable is a pool of operations each holding one capability never
// presented, seeded in bulk: a template operation written by the command
// handler (requested, decided, capability issued), copied by SQL under
// new identifiers. The copies' events carry no hashes (stored as if
// before hashing began): a claim's cost does not depend on them.
type claimable struct {
	ops  []domain.OperationID
	caps []domain.CapabilityID
	next atomic.Int64
}

func (c *claimable) take() (domain.OperationID, domain.CapabilityID, bool) {
	i := c.next.Add(1) - 1
	if int(i) >= len(c.ops) {
		return "", "", false
	}
	return c.ops[i], c.caps[i], true
}

// seedClaimable writes n claimable operations named OP-<tag><k>.
func seedClaimable(ctx context.Context, s *settings, store *postgres.Store, tag string, n int) (*claimable, error) {
	h, err := ledger.New(ledger.Config{Store: store, Clock: clock.NewManual(benchStart), Logger: quietLogger()})
	if err != nil {
		return nil, err
	}
	tpl := domain.OperationID("OP-" + tag)
	by := ledger.Cause{Actor: "bench"}
	if _, err := h.RequestOperation(ctx, domain.RequestOperation{OperationID: tpl, OrderID: "ORD-" + tag, AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: domain.CorrelationID("COR-" + tag), RequestedBy: "agent-7"}, by); err != nil {
		return nil, err
	}
	_, issued, err := h.DecideAndIssue(ctx, tpl, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: domain.Facts{OrderRefundable: true}},
		domain.IssueCapability{}, by)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{store.Schema()}.Sanitize()
	// Copies k = 1..n: every occurrence of the tag gets k appended.
	_, err = conn.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata)
SELECT replace(e.stream_id, $1, $1 || k), e.stream_version, gen_random_uuid(), e.event_type,
       replace(e.data::text, $1, $1 || k)::jsonb, replace(e.metadata::text, $1, $1 || k)::jsonb
FROM generate_series(1, $2::int) AS k, %[1]s.events e WHERE e.stream_id = $3
ORDER BY k, e.stream_version;
`, ident), tag, n, tpl.StreamName())
	if err != nil {
		return nil, fmt.Errorf("seed claimable operations: %w", err)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.streams (stream_id, version)
SELECT replace(s.stream_id, $1, $1 || k), s.version FROM generate_series(1, $2::int) AS k, %[1]s.streams s WHERE s.stream_id = $3`, ident),
		tag, n, tpl.StreamName())
	if err != nil {
		return nil, fmt.Errorf("seed claimable streams: %w", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`ANALYZE %[1]s.events; ANALYZE %[1]s.streams`, ident)); err != nil {
		return nil, err
	}
	c := &claimable{}
	capSuffix := string(issued.CapabilityID)[len("CAP-"+tag):] // ".1"
	for k := 1; k <= n; k++ {
		c.ops = append(c.ops, domain.OperationID(fmt.Sprintf("OP-%s%d", tag, k)))
		c.caps = append(c.caps, domain.CapabilityID(fmt.Sprintf("CAP-%s%d%s", tag, k, capSuffix)))
	}
	return c, nil
}

// claimRate runs clients goroutines claiming pool's operations through h
// for d (or until the pool runs out) and returns Claimed per second.
func claimRate(ctx context.Context, h *ledger.Handler, pool *claimable, clients int, d time.Duration) (float64, error) {
	var (
		done     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				op, capID, ok := pool.take()
				if !ok {
					return
				}
				out, err := h.Claim(ctx, op, domain.Claim{MessageID: domain.MessageID("MSG-" + string(op)), CapabilityID: capID,
					WorkerID: fmt.Sprintf("bench-%d", w)})
				if err == nil && out.Status != domain.StatusClaimed {
					err = fmt.Errorf("claim %s: %s (%s)", op, out.Status, out.Reason)
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if done.Load() == 0 {
		return 0, fmt.Errorf("no operation left to claim")
	}
	return float64(done.Load()) / time.Since(start).Seconds(), nil
}

// claimPoolSize is how many operations the claim figures may consume: a
// generous bound on what the samples reach (one client claims up to about
// 1,500 a second on the development machine, each more adds less).
func claimPoolSize(s *settings, clients int) int {
	perSecond := 2500 + 1000*(min(clients, 8)-1)
	return min(int(float64(perSecond)*s.sample.Seconds())*s.rounds+1000, 200_000)
}

// runClaims: a full Claim (the stream read, the decision, the append) from
// a handler that never saw the operation, as a worker process meets a
// capability published by serve; beside it pgbench's SELECT + INSERT.
func runClaims(ctx context.Context, s *settings, emit func(figure)) error {
	if err := preparePgbench(ctx, s.url); err != nil {
		return err
	}
	store, err := openStore(ctx, s, storeSchema, 20)
	if err != nil {
		return err
	}
	defer store.Close()
	for _, c := range []struct {
		name    string
		clients int
	}{{"claim_c1", 1}, {"claim_c4", 4}} {
		if !s.wants(c.name) {
			continue
		}
		pool, err := seedClaimable(ctx, s, store, fmt.Sprintf("ZC%d", c.clients), claimPoolSize(s, c.clients))
		if err != nil {
			return err
		}
		h, err := ledger.New(ledger.Config{Store: store, Clock: clock.NewManual(benchStart), Logger: quietLogger()})
		if err != nil {
			return err
		}
		ours, base, err := interleave(ctx, s.rounds,
			func(ctx context.Context) (float64, error) { return claimRate(ctx, h, pool, c.clients, s.sample) },
			func(ctx context.Context) (float64, error) {
				return pgbench(ctx, s, pgbenchSelectInsert, c.clients, s.sample)
			})
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		goal := "ratio >= 1.0"
		if c.clients == 4 {
			goal = "ratio >= 0.8"
		}
		f := rateFigure(c.name, "ops/s", fmt.Sprintf("pgbench SELECT + INSERT c%d", c.clients), goal, ours, base)
		f.note = "cold: the handler never saw the operation (one stream read, one append)"
		emit(f)
	}
	return nil
}

// longStream is one operation whose stream is grown to a length and kept
// claimable: after each measured claim, untimed, the execution is recorded
// NotApplied and a new attempt authorized.
type longStream struct {
	op       domain.OperationID
	capID    domain.CapabilityID
	writer   *ledger.Handler
	lengthAt int64
}

// seedLongStream writes an operation with one execution renewed until the
// stream holds about n events, then ends it NotApplied and authorizes a new
// attempt. The renewals are copies of one written by the handler.
func seedLongStream(ctx context.Context, s *settings, store *postgres.Store, writer *ledger.Handler, op domain.OperationID, n int) (*longStream, error) {
	by := ledger.Cause{Actor: "bench"}
	if _, err := writer.RequestOperation(ctx, domain.RequestOperation{OperationID: op, OrderID: "ORD-1", AmountMinor: 12000, Currency: "EUR",
		OrderTotalMinor: 20000, CorrelationID: "COR-1", RequestedBy: "agent-7"}, by); err != nil {
		return nil, err
	}
	_, issued, err := writer.DecideAndIssue(ctx, op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: domain.Facts{OrderRefundable: true}},
		domain.IssueCapability{}, by)
	if err != nil {
		return nil, err
	}
	claimed, err := writer.Claim(ctx, op, domain.Claim{MessageID: "MSG-seed", CapabilityID: issued.CapabilityID, WorkerID: "w"})
	if err != nil {
		return nil, err
	}
	if _, err := writer.RenewLease(ctx, op, domain.RenewLease{ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret, WorkerID: "w"}, by); err != nil {
		return nil, err
	}
	copies := n - 5 - 3 // request, decide, issue, claim, renewal; then outcome, decide, issue
	if copies > 0 {
		conn, err := pgx.Connect(ctx, s.url)
		if err != nil {
			return nil, err
		}
		ident := pgx.Identifier{store.Schema()}.Sanitize()
		_, err = conn.Exec(ctx, fmt.Sprintf(`
INSERT INTO %[1]s.events (stream_id, stream_version, event_id, event_type, data, metadata)
SELECT e.stream_id, e.stream_version + k, gen_random_uuid(), e.event_type, e.data, e.metadata
FROM generate_series(1, $2::int) AS k, %[1]s.events e WHERE e.stream_id = $1 AND e.event_type = 'LeaseRenewed'
ORDER BY k`, ident), op.StreamName(), copies)
		if err == nil {
			_, err = conn.Exec(ctx, fmt.Sprintf(`UPDATE %[1]s.streams SET version = version + $2, head_hash = NULL WHERE stream_id = $1`, ident),
				op.StreamName(), copies)
		}
		conn.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("grow %s: %w", op, err)
		}
	}
	if err := writer.RecordOutcome(ctx, op, domain.RecordOutcome{ExecutionID: claimed.ExecutionID, LeaseEpoch: 1, LeaseSecret: claimed.LeaseSecret,
		Outcome: domain.NotApplied, Detail: "bench"}, by); err != nil {
		return nil, err
	}
	l := &longStream{op: op, writer: writer}
	return l, l.authorize(ctx)
}

// authorize decides and issues a new attempt's capability.
func (l *longStream) authorize(ctx context.Context) error {
	_, issued, err := l.writer.DecideAndIssue(ctx, l.op, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000,
		Facts: domain.Facts{OrderRefundable: true}}, domain.IssueCapability{}, ledger.Cause{Actor: "bench"})
	l.capID = issued.CapabilityID
	return err
}

// claimOnce claims l's capability from a handler with an empty cache (a
// cold load: the snapshot, when there is one, and the events after it) and
// returns how long the Claim took; then, untimed, makes l claimable again.
func (l *longStream) claimOnce(ctx context.Context, store eventstore.Store, msg string) (time.Duration, error) {
	h, err := ledger.New(ledger.Config{Store: store, Clock: clock.NewManual(benchStart), Logger: quietLogger()})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	out, err := h.Claim(ctx, l.op, domain.Claim{MessageID: domain.MessageID(msg), CapabilityID: l.capID, WorkerID: "w"})
	took := time.Since(start)
	if err == nil && out.Status != domain.StatusClaimed {
		err = fmt.Errorf("claim %s: %s (%s)", l.op, out.Status, out.Reason)
	}
	if err != nil {
		return 0, err
	}
	l.lengthAt = out.Operation.Version + 1
	if err := l.writer.RecordOutcome(ctx, l.op, domain.RecordOutcome{ExecutionID: out.ExecutionID, LeaseEpoch: 1, LeaseSecret: out.LeaseSecret,
		Outcome: domain.NotApplied, Detail: "bench"}, ledger.Cause{Actor: "w"}); err != nil {
		return 0, err
	}
	return took, l.authorize(ctx)
}

// runClaimByLength: a cold Claim's latency on streams of 10, 100, 1,000 and
// 10,000 events, the lengths interleaved in every round; each beside the
// 10-event stream's, measured in the same rounds.
func runClaimByLength(ctx context.Context, s *settings, emit func(figure)) error {
	store, err := openStore(ctx, s, "bench_claim_length", 4)
	if err != nil {
		return err
	}
	defer store.Close()
	writer, err := ledger.New(ledger.Config{Store: store, Clock: clock.NewManual(benchStart), Logger: quietLogger()})
	if err != nil {
		return err
	}
	lengths := []int{10, 100, 1000, 10_000}
	streams := make([]*longStream, len(lengths))
	for i, n := range lengths {
		if streams[i], err = seedLongStream(ctx, s, store, writer, domain.OperationID(fmt.Sprintf("OP-LEN%d", n)), n); err != nil {
			return err
		}
		if _, err := streams[i].claimOnce(ctx, store, fmt.Sprintf("MSG-warm-%d", n)); err != nil { // the first cold load keeps the snapshot
			return err
		}
	}
	perRound := 2
	if !s.quick {
		perRound = 4
	}
	samples := make([][]float64, len(lengths))
	for r := range s.rounds {
		for k := range perRound {
			for i := range lengths {
				d, err := streams[i].claimOnce(ctx, store, fmt.Sprintf("MSG-%d-%d-%d", lengths[i], r, k))
				if err != nil {
					return err
				}
				samples[i] = append(samples[i], float64(d.Microseconds())/1000)
			}
		}
	}
	base := median(samples[0])
	for i, n := range lengths {
		f := figure{Figure: fmt.Sprintf("claim_stream_%d", n), Value: round(median(samples[i])), Unit: "ms p50",
			Baseline: "claim on a 10-event stream, p50", BaselineValue: round(base), Ratio: round3(median(samples[i]) / base)}
		if n == 10_000 {
			f.Goal = "ratio <= 2"
		}
		f.spread = fmt.Sprintf("p90 %.2f ms; stream at %d events", percentile(samples[i], 0.9), streams[i].lengthAt)
		emit(f)
	}
	return nil
}

func percentile(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
