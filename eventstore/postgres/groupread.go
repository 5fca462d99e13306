package postgres

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"opledger/eventstore"
)

// Group read defaults (Config.MaxGroupReads, MaxReadsInFlight).
const (
	// DefaultMaxGroupReads bounds the stream reads one statement carries.
	DefaultMaxGroupReads = 64
	// DefaultMaxReadsInFlight bounds the stream-read statements running at
	// once. A stream read is an index range of a few rows: its statement's
	// own cost (the round trip, binding, the executor's start) is most of
	// it, so reads that wait for one of these two to end and then share a
	// statement cost the server less than each running alone (with pgbench
	// on the benchmark machine, 8 clients: a statement reading 7 streams
	// ran at 0.37 of the rate of one reading 1, so 2.6 times the streams per
	// second).
	DefaultMaxReadsInFlight = 2
)

// groupReader gathers concurrent stream reads (ReadStream) into shared
// statements (statementGroup), as groupCommitter does appends: a runner
// takes as many queued reads as the bound allows into one statement
// (readStreamsSQL), which answers each with exactly the rows its own
// statement would have. A shared statement always starts after its reads'
// calls did, so each sees every event committed before its call.
//
// Each read keeps its own stream, first version and limit (at most limit
// rows each, as alone). A statement that fails for a reason that may be one
// read's fault (data Postgres refuses) is answered by running each of its
// reads alone; a failure of the connection or the server is every read's.
// A caller whose context ends while its read is queued takes it out of the
// queue; a running statement is cancelled only when every one of its
// callers has gone.
type groupReader struct {
	store    *Store
	maxReads int
	statementGroup[*pendingRead]

	statements, reads atomic.Int64 // for GroupReadStats
}

// GroupReadStats reports how many stream-read statements the store ran and
// how many reads they carried.
func (s *Store) GroupReadStats() (statements, reads int64) {
	return s.reads.statements.Load(), s.reads.reads.Load()
}

type readRequest struct {
	stream      string
	from, limit int64
}

type pendingRead struct {
	ctx  context.Context
	req  readRequest
	done chan readOutcome // buffered: the runner never blocks on it
}

type readOutcome struct {
	events []eventstore.RecordedEvent
	alone  bool // run the read on its own: its statement failed for a reason that may be another read's
	err    error
}

func newGroupReader(s *Store, maxReads, maxRun int) *groupReader {
	g := &groupReader{store: s, maxReads: maxReads}
	g.statementGroup = statementGroup[*pendingRead]{maxRun: maxRun, take: g.take, execute: g.execute}
	return g
}

// read returns the events of r.stream from r.from on, at most r.limit,
// sharing a statement with other reads when some are waiting.
func (g *groupReader) read(ctx context.Context, r readRequest) ([]eventstore.RecordedEvent, error) {
	p, alone := g.join(func() *pendingRead { return &pendingRead{ctx: ctx, req: r, done: make(chan readOutcome, 1)} })
	if alone {
		events, err := g.alone(ctx, r)
		g.leave()
		return events, err
	}
	select {
	case o := <-p.done:
		if o.alone {
			return g.alone(ctx, r)
		}
		return o.events, o.err
	case <-ctx.Done():
		g.withdraw(p)
		return nil, interpretError("read stream "+r.stream, ctx.Err())
	}
}

// alone runs one read as a statement of its own.
func (g *groupReader) alone(ctx context.Context, r readRequest) ([]eventstore.RecordedEvent, error) {
	g.statements.Add(1)
	g.reads.Add(1)
	rows, err := g.store.pool.Query(ctx, g.store.sql.readStream, r.stream, r.from, r.limit)
	if err != nil {
		return nil, interpretError("read stream "+r.stream, err)
	}
	events, err := collectEvents(rows, int(r.limit))
	return events, interpretError("read stream "+r.stream, err)
}

// take splits the queue: at most maxReads reads for the next statement,
// in order, and those left waiting. Reads whose callers have gone are
// dropped.
func (g *groupReader) take(queue []*pendingRead) (batch, keep []*pendingRead) {
	keep = queue[:0]
	for _, p := range queue {
		switch {
		case p.ctx.Err() != nil:
			p.done <- readOutcome{err: interpretError("read stream "+p.req.stream, p.ctx.Err())}
		case len(batch) >= g.maxReads:
			keep = append(keep, p)
		default:
			batch = append(batch, p)
		}
	}
	return batch, keep
}

// execute runs one statement for batch and hands out the outcomes.
func (g *groupReader) execute(batch []*pendingRead) {
	if len(batch) == 1 {
		p := batch[0]
		events, err := g.alone(p.ctx, p.req)
		p.done <- readOutcome{events: events, err: err}
		return
	}
	ctxs := make([]context.Context, len(batch))
	streams := make([]string, len(batch))
	froms := make([]int64, len(batch))
	limits := make([]int64, len(batch))
	for i, p := range batch {
		ctxs[i] = p.ctx
		streams[i], froms[i], limits[i] = p.req.stream, p.req.from, p.req.limit
	}
	ctx, cancel := batchContext(ctxs)
	defer cancel()
	g.statements.Add(1)
	g.reads.Add(int64(len(batch)))
	events, err := g.query(ctx, streams, froms, limits)
	switch {
	case err == nil:
		for i, p := range batch {
			p.done <- readOutcome{events: events[i]}
		}
	case !errors.Is(err, eventstore.ErrUnavailable):
		for _, p := range batch {
			p.done <- readOutcome{alone: true}
		}
	default:
		for _, p := range batch {
			p.done <- readOutcome{err: interpretError("read stream "+p.req.stream, err)}
		}
	}
}

// query runs readStreamsSQL and splits its rows by read.
func (g *groupReader) query(ctx context.Context, streams []string, froms, limits []int64) ([][]eventstore.RecordedEvent, error) {
	rows, err := g.store.pool.Query(ctx, g.store.sql.readStreams, streams, froms, limits)
	if err != nil {
		return nil, interpretError("read streams", err)
	}
	out := make([][]eventstore.RecordedEvent, len(streams))
	var (
		ord int64
		e   eventstore.RecordedEvent
		p   Position
		id  string
	)
	_, err = pgx.ForEachRow(rows, []any{&ord, &p.GlobalPosition, &p.TransactionID, &e.StreamID, &e.Version, &id, &e.Type, &e.Data, &e.Metadata, &e.RecordedAt, &e.PrevHash, &e.Hash}, func() error {
		i := ord - 1
		if i < 0 || int(i) >= len(out) {
			return errors.New("read streams: a row of no read")
		}
		e.ID = id
		e.Position = p
		e.RecordedAt = e.RecordedAt.UTC()
		if out[i] == nil {
			out[i] = make([]eventstore.RecordedEvent, 0, max(1, min(limits[i], firstCapacity)))
		}
		out[i] = append(out[i], e)
		e.Data, e.Metadata, e.PrevHash, e.Hash = nil, nil, nil, nil // fresh slices for the next row
		return nil
	})
	if err != nil {
		return nil, interpretError("read streams", err)
	}
	for i := range out {
		if out[i] == nil {
			out[i] = []eventstore.RecordedEvent{}
		}
	}
	return out, nil
}
