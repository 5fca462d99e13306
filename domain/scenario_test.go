package domain_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/codec"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// TestScenarios plays every testdata/*.txt script against the pure model:
// each step is a command decided on the operation's state at the step's
// time, its events folded and stored; the expected output under each step
// is the audit timeline's rows of the events it recorded and its refusal's
// reason, field and detail. A new scenario is a new file of steps.
//
// When the model's output changes on purpose, regenerate the expected
// output with
//
//	go test ./domain -run TestScenarios -rewrite
//
// and read the diff before committing it: it is the change in behaviour.
//
// Steps (positional arguments first; key=value options; a value starting
// with a double quote is a Go string literal, so \x20 is a space and \x00 a
// NUL; @HH:MM:SS[.fff] or @YYYY-MM-DDTHH:MM:SS sets the clock, on the
// scenario's day, 2026-11-26, for this step and the ones after):
//
//	request [kind=export-download] [op= order= amount= currency= total= export= correlation= by=]
//	decide DEC [approver= limit= refundable= chargeback= refunded= total= export-ready= uses= key-policy=]
//	issue CAP [decision=]
//	decide-and-issue DEC CAP [the options of decide]
//	revoke CAP [reason= by=]
//	claim MSG CAP EXE [by= bound-op= bound-attempt= digest=]
//	renew EXE [epoch= secret= by=]
//	outcome EXE Completed|NotApplied|Unknown [epoch= secret= ref= detail=]
//	late EXE Completed|NotApplied [epoch= secret= ref= detail=]
//	lapse EXE
//	escalate EXE reason= [detail=]
//	reconcile EXE Completed|NotApplied [method= by= ref= evidence=]
//	state        the operation's status, capabilities and executions
//	timeline     the operation's audit timeline (audit.WriteTimelineText)
//
// A secret defaults to the one the claim of EXE handed out; secret=none
// presents none, secret=of:EXE-2 another execution's, anything else is
// presented as written.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := newScenario(t)
		datadriven.RunTest(t, path, s.step)
	})
}

// day is the scenario's Thursday; t0 its first instant.
var t0 = time.Date(2026, 11, 26, 14, 2, 10, 0, time.UTC)

// scenario is one operation, its stored stream and the scenario's clock.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	now   time.Time
	op    *domain.Operation
	store *memory.Store
	// decidedOn is the state as it was before the step decided on it: a
	// decision must leave it unchanged (the command handler shares one
	// state between concurrent commands).
	decidedOn *domain.Operation
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{t: t, ctx: t.Context(), now: t0, op: domain.NewOperation()}
	s.store = memory.New(func() time.Time { return s.now })
	return s
}

// secretOf is the lease secret the scenario's claim of exe hands out (the
// command handler mints random ones; the model sees only digests).
func secretOf(exe domain.ExecutionID) string { return "secret-of-" + string(exe) }

// args reads a step's arguments: the positional ones in order, the options
// by key, and the clock.
type args struct {
	t    *testing.T
	d    *datadriven.TestData
	pos  []string
	opts map[string]string
	used map[string]bool
}

func (s *scenario) args(d *datadriven.TestData) *args {
	a := &args{t: s.t, d: d, opts: map[string]string{}, used: map[string]bool{}}
	for _, c := range d.CmdArgs {
		switch {
		case strings.HasPrefix(c.Key, "@"):
			s.now = parseAt(s.t, d, s.now, c.Key[1:])
		case len(c.Vals) == 0:
			a.pos = append(a.pos, c.Key)
		default:
			v := strings.Join(c.Vals, ",")
			if strings.HasPrefix(v, `"`) {
				u, err := strconv.Unquote(v)
				if err != nil {
					d.Fatalf(s.t, "%s=%s: %v", c.Key, v, err)
				}
				v = u
			}
			a.opts[c.Key] = v
		}
	}
	return a
}

func parseAt(t *testing.T, d *datadriven.TestData, now time.Time, at string) time.Time {
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "15:04:05.999999999"} {
		v, err := time.Parse(layout, at)
		if err != nil {
			continue
		}
		if layout == "15:04:05.999999999" {
			y, m, dd := now.Date()
			return time.Date(y, m, dd, v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		}
		return v.UTC()
	}
	d.Fatalf(t, "@%s: want @HH:MM:SS[.fff] or @YYYY-MM-DDTHH:MM:SS", at)
	return now
}

// arg is positional argument i (required).
func (a *args) arg(i int, name string) string {
	if i >= len(a.pos) {
		a.d.Fatalf(a.t, "%s: argument %d (%s) is missing", a.d.Cmd, i+1, name)
	}
	return a.pos[i]
}

func (a *args) str(key, def string) string {
	a.used[key] = true
	if v, ok := a.opts[key]; ok {
		return v
	}
	return def
}

func (a *args) int(key string, def int64) int64 {
	v := a.str(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		a.d.Fatalf(a.t, "%s=%s: %v", key, v, err)
	}
	return n
}

func (a *args) bool(key string, def bool) bool {
	v := a.str(key, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.d.Fatalf(a.t, "%s=%s: %v", key, v, err)
	}
	return b
}

// done fails the step on an option no command read: a typo would
// otherwise pass silently.
func (a *args) done() {
	for k := range a.opts {
		if !a.used[k] {
			a.d.Fatalf(a.t, "%s: unknown option %s", a.d.Cmd, k)
		}
	}
}

// secret is the lease secret a step presents for exe.
func (a *args) secret(exe domain.ExecutionID) string {
	switch v := a.str("secret", secretOf(exe)); {
	case v == "none":
		return ""
	case strings.HasPrefix(v, "of:"):
		return secretOf(domain.ExecutionID(strings.TrimPrefix(v, "of:")))
	default:
		return v
	}
}

func (s *scenario) step(t *testing.T, d *datadriven.TestData) string {
	s.t = t
	a := s.args(d)
	defer a.done()
	s.decidedOn = s.op.Clone()
	switch d.Cmd {
	case "request":
		kind := domain.OperationKind(a.str("kind", ""))
		cmd := domain.RequestOperation{OperationID: domain.OperationID(a.str("op", "OP-4471")), Kind: kind,
			CorrelationID: domain.CorrelationID(a.str("correlation", "COR-2210")), RequestedBy: a.str("by", "agent-7")}
		if kind == domain.KindExportDownload {
			cmd.OperationID = domain.OperationID(a.str("op", "OP-5120"))
			cmd.ExportID = a.str("export", "EXP-7781")
			cmd.CorrelationID = domain.CorrelationID(a.str("correlation", "COR-5120"))
			cmd.OrderID, cmd.AmountMinor, cmd.Currency = a.str("order", ""), a.int("amount", 0), a.str("currency", "")
		} else {
			cmd.ExportID = a.str("export", "")
			cmd.OrderID, cmd.AmountMinor, cmd.Currency = a.str("order", "ORD-8841"), a.int("amount", 12000), a.str("currency", "EUR")
			cmd.OrderTotalMinor = a.int("total", 20000)
		}
		return s.record(a.str("by", "agent-7"))(s.op.Request(cmd, s.now))
	case "decide":
		return s.record(a.str("by", "refund-api"))(s.op.Decide(s.decide(a, domain.DecisionID(a.arg(0, "decision"))), s.now))
	case "issue":
		cmd := domain.IssueCapability{CapabilityID: domain.CapabilityID(a.arg(0, "capability")), DecisionID: domain.DecisionID(a.str("decision", ""))}
		return s.record(a.str("by", "refund-api"))(s.op.IssueCapability(cmd, s.now))
	case "decide-and-issue":
		dec := s.decide(a, domain.DecisionID(a.arg(0, "decision")))
		return s.record(a.str("by", "refund-api"))(s.op.DecideAndIssue(dec, domain.IssueCapability{CapabilityID: domain.CapabilityID(a.arg(1, "capability"))}, s.now))
	case "revoke":
		cmd := domain.RevokeCapability{CapabilityID: domain.CapabilityID(a.arg(0, "capability")), Reason: a.str("reason", ""), Actor: a.str("by", "")}
		return s.record("refund-api")(s.op.RevokeCapability(cmd, s.now))
	case "claim":
		exe := domain.ExecutionID(a.arg(2, "execution"))
		cmd := domain.Claim{MessageID: domain.MessageID(a.arg(0, "message")), CapabilityID: domain.CapabilityID(a.arg(1, "capability")),
			ExecutionID: exe, WorkerID: a.str("by", "worker-a"), BoundOperation: domain.OperationID(a.str("bound-op", "")),
			BoundAttempt: int(a.int("bound-attempt", 0)), LeaseSecretDigest: a.str("digest", domain.LeaseSecretDigest(secretOf(exe)))}
		r, err := s.op.Claim(cmd, s.now)
		return s.record(cmd.WorkerID)(r.Events, err)
	case "renew":
		exe := domain.ExecutionID(a.arg(0, "execution"))
		cmd := domain.RenewLease{ExecutionID: exe, LeaseEpoch: a.int("epoch", 1), LeaseSecret: a.secret(exe), WorkerID: a.str("by", "worker-a")}
		return s.record(cmd.WorkerID)(s.op.RenewLease(cmd, s.now))
	case "outcome":
		exe := domain.ExecutionID(a.arg(0, "execution"))
		cmd := domain.RecordOutcome{ExecutionID: exe, LeaseEpoch: a.int("epoch", 1), LeaseSecret: a.secret(exe),
			Outcome: domain.Outcome(a.arg(1, "outcome")), ProviderReference: a.str("ref", ""), Detail: a.str("detail", "")}
		return s.record(a.str("by", "worker-a"))(s.op.RecordOutcome(cmd, s.now))
	case "late":
		exe := domain.ExecutionID(a.arg(0, "execution"))
		cmd := domain.RecordLateOutcome{ExecutionID: exe, LeaseEpoch: a.int("epoch", 1), LeaseSecret: a.secret(exe),
			Outcome: domain.Outcome(a.arg(1, "outcome")), ProviderReference: a.str("ref", ""), Detail: a.str("detail", "")}
		return s.record(a.str("by", "worker-a"))(s.op.RecordLateOutcome(cmd, s.now))
	case "lapse":
		return s.record("sweeper")(s.op.LapseLease(domain.LapseLease{ExecutionID: domain.ExecutionID(a.arg(0, "execution"))}, s.now))
	case "escalate":
		cmd := domain.Escalate{ExecutionID: domain.ExecutionID(a.arg(0, "execution")), Reason: a.str("reason", ""), Detail: a.str("detail", "")}
		return s.record("reconciler")(s.op.Escalate(cmd, s.now))
	case "reconcile":
		cmd := domain.Reconcile{ExecutionID: domain.ExecutionID(a.arg(0, "execution")), Outcome: domain.Outcome(a.arg(1, "outcome")),
			Method: domain.ReconcileMethod(a.str("method", string(domain.MethodOperator))), Actor: a.str("by", "ops-1"),
			ProviderReference: a.str("ref", ""), Evidence: a.str("evidence", "")}
		return s.record(cmd.Actor)(s.op.Reconcile(cmd, s.now))
	case "state":
		return s.state()
	case "timeline":
		rows, err := audit.Replay(s.ctx, s.store, s.op.ID)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var b strings.Builder
		if err := audit.WriteTimelineText(&b, s.op.ID, rows); err != nil {
			d.Fatalf(t, "%v", err)
		}
		return b.String()
	}
	d.Fatalf(t, "unknown step %q", d.Cmd)
	return ""
}

// decide builds a Decide from a step: a refund's facts default to an
// order that may be refunded, an export's to an export that is ready.
func (s *scenario) decide(a *args, id domain.DecisionID) domain.Decide {
	cmd := domain.Decide{DecisionID: id, Approver: a.str("approver", "agent-7"), Uses: int(a.int("uses", 0)),
		KeyPolicy: domain.KeyPolicy(a.str("key-policy", ""))}
	if s.op.Kind == domain.KindExportDownload {
		cmd.ExportFacts = domain.ExportFacts{ExportReady: a.bool("export-ready", true)}
		cmd.ApprovalLimitMinor = a.int("limit", 0)
		cmd.Facts.OrderRefundable = a.bool("refundable", false)
		return cmd
	}
	cmd.ApprovalLimitMinor = a.int("limit", 50000)
	cmd.Facts = domain.Facts{OrderRefundable: a.bool("refundable", true), ChargebackOpen: a.bool("chargeback", false),
		RefundedMinor: a.int("refunded", 0), OrderTotalMinor: a.int("total", 0)}
	cmd.ExportFacts.ExportReady = a.bool("export-ready", false)
	return cmd
}

// record folds a decision's events into the state, stores them as actor
// recorded them, and renders their timeline rows and the refusal, if any.
func (s *scenario) record(actor string) func([]domain.Event, error) string {
	return func(events []domain.Event, err error) string {
		require.Equal(s.t, s.decidedOn, s.op, "the decision changed the state it was given")
		var b strings.Builder
		from := s.op.Version + 1 // the stream's length: Version is the last event's, -1 for none
		for i, e := range events {
			if ferr := s.op.Evolve(e); ferr != nil {
				s.t.Fatalf("fold %s: %v", e.EventType(), ferr)
			}
			s.op.Version++
			data, eerr := codec.EncodeEvent(fmt.Sprintf("%s-%d", s.op.ID, from+int64(i)), e, domain.Metadata{Actor: actor, RecordedAt: s.now})
			if eerr != nil {
				s.t.Fatalf("encode %s: %v", e.EventType(), eerr)
			}
			if _, aerr := s.store.Append(s.ctx, s.op.ID.StreamName(), eventstore.Any(), []eventstore.EventData{data}); aerr != nil {
				s.t.Fatalf("append %s: %v", e.EventType(), aerr)
			}
		}
		if len(events) > 0 {
			rows, rerr := audit.Replay(s.ctx, s.store, s.op.ID)
			if rerr != nil {
				s.t.Fatalf("replay: %v", rerr)
			}
			for _, r := range rows[from:] {
				writeRow(&b, r)
			}
		}
		if err != nil {
			var r *domain.Refusal
			if !errors.As(err, &r) {
				fmt.Fprintf(&b, "error: %v\n", err)
				return b.String()
			}
			fmt.Fprintf(&b, "refused %s", r.Reason)
			if r.Field != "" {
				fmt.Fprintf(&b, " field=%s", r.Field)
			}
			if r.Detail != "" {
				fmt.Fprintf(&b, ": %s", r.Detail)
			}
			b.WriteString("\n")
		}
		if b.Len() == 0 {
			return "no events\n"
		}
		return b.String()
	}
}

// writeRow renders a timeline row in two lines: what and who, then the
// detail.
func writeRow(b *strings.Builder, r audit.TimelineRow) {
	fmt.Fprintf(b, "#%d %s", r.Version, r.Event)
	for _, f := range []struct{ k, v string }{
		{"", r.Outcome}, {"reason", r.Reason}, {"by", r.Actor}, {"", string(r.Execution)}, {"epoch", epoch(r)},
		{"", string(r.Message)}, {"", string(r.Capability)},
	} {
		switch {
		case f.v == "":
		case f.k == "":
			b.WriteString(" " + f.v)
		default:
			fmt.Fprintf(b, " %s=%s", f.k, f.v)
		}
	}
	b.WriteString("\n")
	if r.Detail != "" {
		fmt.Fprintf(b, "   %s\n", r.Detail)
	}
}

func epoch(r audit.TimelineRow) string {
	switch {
	case r.EpochFrom != 0:
		return fmt.Sprintf("%d→%d", r.EpochFrom, r.Epoch)
	case r.Epoch != 0:
		return strconv.FormatInt(r.Epoch, 10)
	}
	return ""
}

// state renders what the model holds: the status, each capability and
// each execution.
func (s *scenario) state() string {
	var b strings.Builder
	o := s.op
	fmt.Fprintf(&b, "%s %s %s", o.ID, o.Kind, o.Status())
	if o.ExportID != "" {
		fmt.Fprintf(&b, " export %s", o.ExportID)
	}
	if o.Policy.Repeats {
		fmt.Fprintf(&b, ", up to %d uses per decision", o.Policy.MaxUses)
	}
	b.WriteString("\n")
	if d, ok := o.LatestDecision(); ok {
		fmt.Fprintf(&b, "  latest decision %s %s attempt %d, %d use(s), key %s (%s)", d.ID, d.Verdict, d.Attempt, d.Uses, d.IdempotencyKey, d.KeyPolicy)
		if d.Facts != (domain.Facts{}) {
			fmt.Fprintf(&b, ", refund facts %+v", d.Facts)
		}
		if d.ExportFacts != (domain.ExportFacts{}) {
			fmt.Fprintf(&b, ", export facts %+v", d.ExportFacts)
		}
		b.WriteString("\n")
	}
	caps := make([]string, 0, len(o.Capabilities))
	for id := range o.Capabilities {
		caps = append(caps, string(id))
	}
	sort.Strings(caps)
	for _, id := range caps {
		c := o.Capabilities[domain.CapabilityID(id)]
		fmt.Fprintf(&b, "  %s %s, attempt %d, %d of %d uses left\n", c.ID, c.State, c.Attempt, c.UsesLeft(), c.Uses)
	}
	for _, x := range o.Executions {
		fmt.Fprintf(&b, "  %s %s epoch %d, attempt %d use %d, key %s, lease held at", x.ID, x.State, x.LeaseEpoch, x.Attempt, x.Use, x.IdempotencyKey)
		if len(x.HeldLeases) == 0 {
			b.WriteString(" no epoch (bound to no holder)")
		}
		for _, h := range x.HeldLeases {
			holder := "another's secret"
			if h.SecretDigest == domain.LeaseSecretDigest(secretOf(x.ID)) {
				holder = "its claim's secret"
			}
			fmt.Fprintf(&b, " epoch %d by %s", h.Epoch, holder)
		}
		if x.ProviderReference != "" {
			fmt.Fprintf(&b, ", provider reference %s", x.ProviderReference)
		}
		b.WriteString("\n")
	}
	return b.String()
}
