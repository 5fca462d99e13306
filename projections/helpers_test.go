package projections_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/setaside"
	"opledger/eventstore/postgres"
	"opledger/eventstore/postgres/pgtest"
	"opledger/projections"
)

// waitBound bounds every wait for a condition in these tests.
const waitBound = 30 * time.Second

// fastPolicy sets a failing event aside after three tries, a few
// milliseconds apart.
var fastPolicy = setaside.Policy{MaxAttempts: 3, Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

// env is one test's world: an event store schema, a read-model schema, a
// manual clock and a command handler writing realistic histories.
type env struct {
	t      *testing.T
	store  *postgres.Store
	url    string
	schema string // read models
	pool   *pgxpool.Pool
	clock  *clock.Manual
	h      *ledger.Handler
}

func newEnv(t *testing.T, start time.Time) *env {
	t.Helper()
	store := pgtest.OpenStore(t)
	url, schema := pgtest.Schema(t)
	e := &env{t: t, store: store, url: url, schema: schema, pool: openPool(t, url), clock: clock.NewManual(start)}
	_, err := projections.Migrate(t.Context(), e.pool, schema)
	require.NoError(t, err)
	e.h, err = ledger.New(ledger.Config{Store: store, Clock: e.clock, AppendRetryBackoff: time.Millisecond})
	require.NoError(t, err)
	return e
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// projector returns a projector on the env's read models; tune adjusts its
// config.
func (e *env) projector(tune func(*projections.Config)) *projections.Projector {
	e.t.Helper()
	cfg := projections.Config{
		Pool: e.pool, Store: e.store, Schema: e.schema, Clock: e.clock,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, LockRetryInterval: 5 * time.Millisecond,
		Logger:   slog.New(slog.NewTextHandler(e.t.Output(), nil)),
		SetAside: &setaside.Memory{}, Policy: fastPolicy,
	}
	if tune != nil {
		tune(&cfg)
	}
	p, err := projections.New(cfg)
	require.NoError(e.t, err)
	return p
}

// catchUp folds the whole log into the env's read models.
func (e *env) catchUp() int64 {
	e.t.Helper()
	e.waitVisible()
	n, err := e.projector(nil).CatchUp(e.t.Context())
	require.NoError(e.t, err)
	require.Equal(e.t, e.lastEvent(), e.checkpoint(e.schema).Text)
	return n
}

// start runs p until the test ends.
func (e *env) start(p *projections.Projector) {
	e.t.Helper()
	require.NoError(e.t, p.Start(context.WithoutCancel(e.t.Context())))
	e.t.Cleanup(func() { require.NoError(e.t, p.Stop()) })
}

// lastEvent is the position of the log's last committed event, read from
// the store's table. ReadAll (and Head) may not reach it yet: they stop
// below the oldest transaction still open anywhere on the server, and other
// tests run beside this one.
func (e *env) lastEvent() string {
	e.t.Helper()
	var p postgres.Position
	err := e.pool.QueryRow(e.t.Context(), `SELECT transaction_id, global_position FROM `+pgx.Identifier{e.store.Schema()}.Sanitize()+
		`.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1`).Scan(&p.TransactionID, &p.GlobalPosition)
	require.NoError(e.t, err)
	return p.String()
}

// waitVisible waits until ReadAll reaches the log's last event.
func (e *env) waitVisible() {
	e.t.Helper()
	last := e.lastEvent()
	waitFor(e.t, "the log's end to be readable", func() bool {
		p, err := e.store.Head(e.t.Context())
		require.NoError(e.t, err)
		return p.String() == last
	})
}

// checkpoint reads the projection's checkpoint in schema.
func (e *env) checkpoint(schema string) projections.Checkpoint {
	e.t.Helper()
	cp, err := projections.ReadCheckpoint(e.t.Context(), e.pool, e.store, schema, "")
	require.NoError(e.t, err)
	return cp
}

// waitFor polls cond every few milliseconds, failing the test after
// waitBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", waitBound, what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not a wait for a condition
	}
}

// waitCaughtUp waits until schema's checkpoint is the log's last event.
func (e *env) waitCaughtUp(schema string) {
	e.t.Helper()
	last := e.lastEvent()
	waitFor(e.t, "checkpoint at "+last, func() bool { return e.checkpoint(schema).Text == last })
}

func (e *env) q(schema, sql string) string {
	return fmt.Sprintf(sql, pgx.Identifier{schema}.Sanitize())
}

func (e *env) count(schema, sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.pool.QueryRow(e.t.Context(), e.q(schema, sql), args...).Scan(&n))
	return n
}

// tables are the read models compared row for row.
var tables = []string{"operations", "executions", "capabilities", "deliveries", "evidence", "reconciliations"}

// requireFilled fails if a read-model table of schema is empty (a
// comparison of empty tables proves nothing).
func (e *env) requireFilled(schema string) {
	e.t.Helper()
	for _, table := range tables {
		require.NotZero(e.t, e.count(schema, `SELECT count(*) FROM %s.`+table), "%s is empty", table)
	}
}

// countCatalog runs a count that names no schema.
func (e *env) countCatalog(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.pool.QueryRow(e.t.Context(), sql, args...).Scan(&n))
	return n
}

// requireSameRows fails unless every read-model table holds the same rows
// in schemas a and b (EXCEPT ALL both ways), and their checkpoints agree.
func (e *env) requireSameRows(a, b string) {
	e.t.Helper()
	qa, qb := pgx.Identifier{a}.Sanitize(), pgx.Identifier{b}.Sanitize()
	for _, table := range tables {
		var onlyA, onlyB int64
		sql := fmt.Sprintf(`SELECT
  (SELECT count(*) FROM (SELECT * FROM %[1]s.%[3]s EXCEPT ALL SELECT * FROM %[2]s.%[3]s) d),
  (SELECT count(*) FROM (SELECT * FROM %[2]s.%[3]s EXCEPT ALL SELECT * FROM %[1]s.%[3]s) d)`, qa, qb, table)
		require.NoError(e.t, e.pool.QueryRow(e.t.Context(), sql).Scan(&onlyA, &onlyB))
		require.Zero(e.t, onlyA, "%s: rows only in %s", table, a)
		require.Zero(e.t, onlyB, "%s: rows only in %s", table, b)
	}
	var differ int64
	require.NoError(e.t, e.pool.QueryRow(e.t.Context(), fmt.Sprintf(`SELECT count(*) FROM (
  (SELECT name, position, events_applied FROM %[1]s.projection_checkpoints EXCEPT SELECT name, position, events_applied FROM %[2]s.projection_checkpoints)
  UNION ALL
  (SELECT name, position, events_applied FROM %[2]s.projection_checkpoints EXCEPT SELECT name, position, events_applied FROM %[1]s.projection_checkpoints)) d`, qa, qb)).Scan(&differ))
	require.Zero(e.t, differ, "checkpoints differ")
}

// op drives one operation through the command handler.
type op struct {
	e       *env
	id      domain.OperationID
	secrets map[domain.ExecutionID]string // lease secrets the claims returned
}

func (e *env) request(id string, amount int64) *op {
	e.t.Helper()
	o := &op{e: e, id: domain.OperationID(id), secrets: map[domain.ExecutionID]string{}}
	_, err := e.h.RequestOperation(e.t.Context(), domain.RequestOperation{
		OperationID: o.id, OrderID: "ORD-" + id, AmountMinor: amount, Currency: "EUR",
		OrderTotalMinor: 100_000, CorrelationID: domain.CorrelationID("COR-" + id), RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(e.t, err)
	return o
}

// requestExport requests an export download of export EXP-<id>.
func (e *env) requestExport(id string) *op {
	e.t.Helper()
	o := &op{e: e, id: domain.OperationID(id), secrets: map[domain.ExecutionID]string{}}
	_, err := e.h.RequestOperation(e.t.Context(), domain.RequestOperation{
		OperationID: o.id, Kind: domain.KindExportDownload, ExportID: "EXP-" + id,
		CorrelationID: domain.CorrelationID("COR-" + id), RequestedBy: "agent-7",
	}, ledger.Cause{Actor: "agent-7"})
	require.NoError(e.t, err)
	return o
}

// allowDownloads decides uses downloads Allowed and issues their capability.
func (o *op) allowDownloads(uses int) domain.CapabilityID {
	o.e.t.Helper()
	_, c, err := o.e.h.DecideAndIssue(o.e.t.Context(), o.id, domain.Decide{Approver: "agent-7", ExportFacts: domain.ExportFacts{ExportReady: true}, Uses: uses},
		domain.IssueCapability{}, ledger.Cause{Actor: "agent-7"})
	require.NoError(o.e.t, err)
	return c.CapabilityID
}

func (o *op) decide(facts domain.Facts) domain.Decided {
	o.e.t.Helper()
	d, _, err := o.e.h.Decide(o.e.t.Context(), o.id, domain.Decide{Approver: "agent-7", ApprovalLimitMinor: 50_000, Facts: facts}, ledger.Cause{Actor: "agent-7"})
	require.NoError(o.e.t, err)
	return d
}

var okFacts = domain.Facts{OrderRefundable: true}

func (o *op) allow() { o.e.t.Helper(); o.decide(okFacts) }

func (o *op) issue() domain.CapabilityID {
	o.e.t.Helper()
	c, err := o.e.h.IssueCapability(o.e.t.Context(), o.id, domain.IssueCapability{}, ledger.Cause{Actor: "refund-api"})
	require.NoError(o.e.t, err)
	return c.CapabilityID
}

func (o *op) revoke(c domain.CapabilityID) {
	o.e.t.Helper()
	require.NoError(o.e.t, o.e.h.RevokeCapability(o.e.t.Context(), o.id, domain.RevokeCapability{CapabilityID: c, Reason: "customer withdrew", Actor: "agent-9"}, ledger.Cause{Actor: "agent-9"}))
}

func (o *op) claim(msg string, c domain.CapabilityID) ledger.ClaimOutcome {
	o.e.t.Helper()
	out, err := o.e.h.Claim(o.e.t.Context(), o.id, domain.Claim{MessageID: domain.MessageID(msg), CapabilityID: c, WorkerID: "worker-a", CorrelationID: domain.CorrelationID("COR-" + string(o.id))})
	require.NoError(o.e.t, err)
	if out.Status == domain.StatusClaimed {
		o.secrets[out.ExecutionID] = out.LeaseSecret
	}
	return out
}

// execute allows, issues and claims: an Executing execution.
func (o *op) execute(msg string) domain.ExecutionID {
	o.e.t.Helper()
	o.allow()
	out := o.claim(msg, o.issue())
	require.Equal(o.e.t, domain.StatusClaimed, out.Status)
	return out.ExecutionID
}

func (o *op) record(x domain.ExecutionID, outcome domain.Outcome, ref string) {
	o.e.t.Helper()
	require.NoError(o.e.t, o.e.h.RecordOutcome(o.e.t.Context(), o.id, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: o.secrets[x], Outcome: outcome, ProviderReference: ref, Detail: "provider said so"}, ledger.Cause{Actor: "worker-a"}))
}

func (o *op) renew(x domain.ExecutionID) {
	o.e.t.Helper()
	_, err := o.e.h.RenewLease(o.e.t.Context(), o.id, domain.RenewLease{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: o.secrets[x], WorkerID: "worker-a"}, ledger.Cause{})
	require.NoError(o.e.t, err)
}

func (o *op) lapse(x domain.ExecutionID) {
	o.e.t.Helper()
	_, err := o.e.h.LapseLease(o.e.t.Context(), o.id, domain.LapseLease{ExecutionID: x}, ledger.Cause{Actor: "sweeper"})
	require.NoError(o.e.t, err)
}

func (o *op) late(x domain.ExecutionID, outcome domain.Outcome, ref string) {
	o.e.t.Helper()
	require.NoError(o.e.t, o.e.h.RecordLateOutcome(o.e.t.Context(), o.id, domain.RecordLateOutcome{ExecutionID: x, LeaseEpoch: 1, LeaseSecret: o.secrets[x], Outcome: outcome, ProviderReference: ref}, ledger.Cause{Actor: "worker-a"}))
}

func (o *op) reconcile(x domain.ExecutionID, outcome domain.Outcome, ref string) {
	o.e.t.Helper()
	require.NoError(o.e.t, o.e.h.Reconcile(o.e.t.Context(), o.id, domain.Reconcile{ExecutionID: x, Outcome: outcome, Method: domain.MethodProviderLookup, ProviderReference: ref, Evidence: "lookup by operation_id"}, ledger.Cause{Actor: "reconciler"}))
}

func (o *op) escalate(x domain.ExecutionID) {
	o.e.t.Helper()
	require.NoError(o.e.t, o.e.h.Escalate(o.e.t.Context(), o.id, domain.Escalate{ExecutionID: x, Reason: "provider lookup inconclusive", Detail: "5 rounds"}, ledger.Cause{Actor: "reconciler"}))
}

// staleWrite makes an executor write under a stale epoch: a WriteRefused.
func (o *op) staleWrite(x domain.ExecutionID) {
	o.e.t.Helper()
	err := o.e.h.RecordOutcome(o.e.t.Context(), o.id, domain.RecordOutcome{ExecutionID: x, LeaseEpoch: 7, LeaseSecret: o.secrets[x], Outcome: domain.Completed, ProviderReference: "re_stale"}, ledger.Cause{Actor: "worker-z"})
	require.Error(o.e.t, err)
}

// world writes a history touching every table and state: completed,
// reconciled, escalated, late, retried, denied, revoked and expired
// authority, duplicates, replays, refused writes and unattributed evidence.
// It returns the operations it wrote, and moves the clock by about 40
// minutes.
func (e *env) world() []*op {
	e.t.Helper()
	a := e.request("OP-A", 12_000) // completed; duplicate and replay afterwards
	xa := a.execute("MSG-A1")
	a.renew(xa)
	a.record(xa, domain.Completed, "re_A")
	e.clock.Advance(time.Second)
	a.claim("MSG-A1", "CAP-NONE") // transport duplicate
	capA := e.capabilityOf(a, xa)
	a.claim("MSG-A2", capA) // spent authority on a new message: replay suspected
	a.claim("MSG-A2", capA) // and its duplicate

	b := e.request("OP-B", 5_000) // Unknown, then reconciled
	xb := b.execute("MSG-B1")
	b.record(xb, domain.Unknown, "")
	b.claim("MSG-B2", b.issue()) // refused: the operation's outcome is unknown

	c := e.request("OP-C", 7_000) // lease lapsed, stale write, escalated
	xc := c.execute("MSG-C1")

	g := e.request("OP-G", 8_000) // lease lapsed, then a late outcome
	xg := g.execute("MSG-G1")

	d := e.request("OP-D", 9_000) // NotApplied, then a second attempt, executing
	xd := d.execute("MSG-D1")
	d.record(xd, domain.NotApplied, "")
	d.decide(domain.Facts{OrderRefundable: true, ChargebackOpen: true}) // denied
	d.execute("MSG-D2")

	f := e.request("OP-F", 4_000) // revoked and expired authority
	f.allow()
	f.revoke(f.issue())
	expiring := f.issue()

	xp := e.requestExport("OP-X") // an export download of 3 uses: one Completed, one Unknown then reconciled, one left
	capX := xp.allowDownloads(3)
	x1 := xp.claim("MSG-X1", capX).ExecutionID
	xp.record(x1, domain.Completed, "dl_X1")
	x2 := xp.claim("MSG-X2", capX).ExecutionID
	xp.record(x2, domain.Unknown, "")
	xp.claim("MSG-X3", capX)      // refused: use 2's outcome is unknown, and the use is not spent
	yp := e.requestExport("OP-Y") // an export download of 1 use, NotApplied, then its replay
	capY := yp.allowDownloads(1)
	xp1 := yp.claim("MSG-Y1", capY).ExecutionID
	yp.record(xp1, domain.NotApplied, "")
	yp.claim("MSG-Y2", capY) // AlreadyConsumed: the NotApplied use was spent

	den := e.request("OP-E", 90_000) // over the approval limit: denied
	den.decide(okFacts)
	e.request("OP-H", 1_000) // requested only

	_, err := e.h.Claim(e.t.Context(), "OP-NOPE", domain.Claim{MessageID: "MSG-X", CapabilityID: "CAP-X", WorkerID: "worker-x"})
	require.NoError(e.t, err) // unattributed evidence
	_, err = e.h.Claim(e.t.Context(), "OP-NOPE", domain.Claim{MessageID: "MSG-X", CapabilityID: "CAP-X", WorkerID: "worker-x"})
	require.NoError(e.t, err) // the same message again

	e.clock.Advance(domain.DefaultLeaseDuration + time.Second)
	c.lapse(xc)
	c.staleWrite(xc)
	g.lapse(xg)
	g.late(xg, domain.Completed, "re_G")
	e.clock.Advance(domain.DefaultCapabilityTTL)
	f.claim("MSG-F1", expiring) // expired
	e.clock.Advance(20 * time.Minute)
	b.reconcile(xb, domain.Completed, "re_B")
	xp.reconcile(x2, domain.Completed, "dl_X2")
	c.escalate(xc)
	return []*op{a, b, c, g, d, f, xp, yp, den, {e: e, id: "OP-H"}}
}

func (e *env) capabilityOf(o *op, x domain.ExecutionID) domain.CapabilityID {
	e.t.Helper()
	s, err := e.h.Load(e.t.Context(), o.id)
	require.NoError(e.t, err)
	return s.Execution(x).CapabilityID
}
