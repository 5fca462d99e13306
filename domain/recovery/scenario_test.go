package recovery_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	"opledger/adapters/provider"
	"opledger/adapters/provider/sim"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
)

// TestScenarios plays every testdata/*.txt script against the roles on
// their own (the fixture: the in-memory store with injectable outages, the
// real command handler, the log index, the sweeper and the reconciler, the
// provider simulator in process, one manual clock). The expected output
// under each step is what the roles answered (verdicts, lapses, refusals),
// what the simulator's ledger shows, and the audit timeline.
//
// When the roles' output changes on purpose, regenerate the expected output
// with
//
//	go test ./domain/recovery -run TestScenarios -rewrite
//
// and read the diff before committing it: it is the change in behaviour.
//
// Steps (positional arguments first, then key=value options; a value
// starting with a double quote is a Go string literal, so \x20 is a space):
//
//	world [profile=stripe-v1|stripe-v2|meridian] [name= reference= retrieve-by-key= max-stream-events=]   first, if at all
//	approve OP…                request, decide Allowed, issue a capability
//	claim OP… [msg= by=]       claim the operation's capability (approving it first if need be)
//	downloads OP uses=N        request an export download of N uses and issue its capability
//	unknown OP…                claim each, let every lease expire, lapse each
//	expire                     move the clock past every lease taken so far
//	advance DURATION|retention move the clock (retention: the profile's key retention)
//	lapse OP                   lapse the operation's last claim, as the sweeper would
//	send OP [fault=KIND]       send the last claim's refund under its key, the fault armed
//	lose-response OP           send OP fault=lose-response-after-commit
//	deliver OP [fault= key= use=]  deliver the last claim's use (or a stray one) to the export-delivery service
//	record OP                  record the last delivery's outcome, as the worker would
//	corrupt OP                 append an outcome for an execution OP never had
//	over-long OP N             append N duplicate deliveries past the handler
//	bogus OP                   append an event nobody can decode
//	store down|up [OP]         the store (or one stream) unreachable, or back
//	reconciler [provider=sim|lagging-lookup|failing-lookup|fixed-lookup|fixed-retrieve] [text= ref= state= amount= currency= op= key= detail= batch= exports= name= reference= retrieve-by-key=]
//	reconcile [rounds=N]       rounds of the reconciler (a default one if none was built)
//	sweeper [batch=N]
//	sweep [rounds=N]
//	expired-leases             what the log index answers
//	sim [OP]                   the simulator's counters (and OP's requests)
//	deliveries                 the export-delivery service's deliveries by key
//	state OP                   the operation's status and executions
//	timeline OP                the audit timeline (audit.WriteTimelineText)
//	item ROLE ITEM | set-aside ROLE | failures [ROLE ITEM] | counts | release ROLE ITEM
//
// An execution id is written as OP's: EXE-<op>.<n> as the handler mints them.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		t.Parallel()
		s := &scenario{}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string { return s.step(t, d) })
	})
}

type scenario struct {
	f      *fixture
	recon  *recovery.Reconciler
	sweep  *recovery.Sweeper
	export *provider.ExportClient
	// claims is each operation's last claim, caps its capability,
	// delivered its last delivery's result.
	claims    map[domain.OperationID]*domain.Claimed
	caps      map[domain.OperationID]domain.CapabilityID
	delivered map[domain.OperationID]domain.EffectResult
}

// opts reads a step's options; every one must be read (a typo fails).
type opts struct {
	t    *testing.T
	d    *datadriven.TestData
	pos  []string
	kv   map[string]string
	used map[string]bool
}

func readOpts(t *testing.T, d *datadriven.TestData) *opts {
	o := &opts{t: t, d: d, kv: map[string]string{}, used: map[string]bool{}}
	for _, a := range d.CmdArgs {
		if len(a.Vals) == 0 {
			o.pos = append(o.pos, a.Key)
			continue
		}
		v := strings.Join(a.Vals, ",")
		if strings.HasPrefix(v, `"`) {
			u, err := strconv.Unquote(v)
			if err != nil {
				d.Fatalf(t, "%s=%s: %v", a.Key, v, err)
			}
			v = u
		}
		o.kv[a.Key] = v
	}
	return o
}

func (o *opts) has(key string) bool { _, ok := o.kv[key]; o.used[key] = true; return ok }

func (o *opts) str(key, def string) string {
	o.used[key] = true
	if v, ok := o.kv[key]; ok {
		return v
	}
	return def
}

func (o *opts) int(key string, def int) int {
	v := o.str(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		o.d.Fatalf(o.t, "%s=%s: %v", key, v, err)
	}
	return n
}

func (o *opts) bool(key string) bool { return o.str(key, "") == "true" }

func (o *opts) ops() []domain.OperationID {
	if len(o.pos) == 0 {
		o.d.Fatalf(o.t, "%s: name an operation", o.d.Cmd)
	}
	out := make([]domain.OperationID, len(o.pos))
	for i, p := range o.pos {
		out[i] = domain.OperationID(p)
	}
	return out
}

func (o *opts) done() {
	for k := range o.kv {
		if !o.used[k] {
			o.d.Fatalf(o.t, "%s: unknown option %s", o.d.Cmd, k)
		}
	}
}

// profile is the built-in profile named by profile=, changed by name=,
// reference= and retrieve-by-key=.
func (o *opts) profile(def domain.ProviderProfile) domain.ProviderProfile {
	p := def
	if name := o.str("profile", ""); name != "" {
		var ok bool
		p, ok = provider.BuiltinProfile(name)
		if !ok {
			o.d.Fatalf(o.t, "no built-in profile %s", name)
		}
	}
	p.Name = o.str("name", p.Name)
	p.ReferenceField = o.str("reference", p.ReferenceField)
	if o.has("retrieve-by-key") {
		p.RetrieveByKey = o.bool("retrieve-by-key")
	}
	return p
}

func (s *scenario) step(t *testing.T, d *datadriven.TestData) string {
	o := readOpts(t, d)
	defer o.done()
	if d.Cmd == "world" { // a new world: what the steps before built is left behind
		*s = scenario{claims: map[domain.OperationID]*domain.Claimed{}, caps: map[domain.OperationID]domain.CapabilityID{},
			delivered: map[domain.OperationID]domain.EffectResult{}}
		s.f = newFixture(t, fixtureOptions{profile: o.profile(provider.StripeV1), maxStreamEvents: o.int("max-stream-events", 0)})
		return fmt.Sprintf("provider %s (api %s), keys kept %s\n", s.f.profile.Name, s.f.profile.API, s.f.profile.KeyRetention)
	}
	if s.f == nil {
		s.step(t, &datadriven.TestData{Cmd: "world"})
	}
	f := s.f
	f.t = t
	var b strings.Builder
	switch d.Cmd {
	case "approve":
		for _, op := range o.ops() {
			s.caps[op] = f.approve(op)
			fmt.Fprintf(&b, "%s %s issued\n", op, s.caps[op])
		}
	case "downloads":
		op := o.ops()[0]
		s.caps[op] = f.downloads(op, o.int("uses", 1))
		fmt.Fprintf(&b, "%s %s issued\n", op, s.caps[op])
	case "claim":
		for _, op := range o.ops() {
			if _, ok := s.caps[op]; !ok {
				s.caps[op] = f.approve(op)
			}
			msg := domain.MessageID(o.str("msg", "MSG-"+string(op)))
			out, err := f.h.Claim(f.ctx, op, domain.Claim{MessageID: msg, CapabilityID: s.caps[op], WorkerID: o.str("by", "worker-a"),
				CorrelationID: domain.CorrelationID("COR-" + string(op))})
			require.NoError(t, err)
			if out.Status != domain.StatusClaimed {
				fmt.Fprintf(&b, "%s %s %s %s\n", op, msg, out.Status, out.Reason)
				continue
			}
			f.secrets[out.ExecutionID] = out.LeaseSecret
			s.claims[op] = out.Claimed
			fmt.Fprintf(&b, "%s %s Claimed %s use %d, key %s, lease until %s\n", op, msg, out.ExecutionID, out.Claimed.Use,
				out.Claimed.IdempotencyKey, out.Claimed.LeaseExpiresAt.Format(time.TimeOnly))
		}
	case "unknown":
		claims := f.unknown(o.ops()...)
		for _, op := range o.ops() {
			s.claims[op] = claims[op]
			fmt.Fprintf(&b, "%s %s Unknown, key %s\n", op, claims[op].ExecutionID, claims[op].IdempotencyKey)
		}
	case "expire":
		f.expire()
		fmt.Fprintf(&b, "clock %s\n", f.clock.Now().Format(time.DateTime))
	case "advance":
		arg := o.pos[0]
		var dur time.Duration
		if arg == "retention" {
			dur = f.profile.KeyRetention
		} else {
			var err error
			if dur, err = time.ParseDuration(arg); err != nil {
				d.Fatalf(t, "advance %s: %v", arg, err)
			}
		}
		f.clock.Advance(dur)
		fmt.Fprintf(&b, "clock %s\n", f.clock.Now().Format(time.DateTime))
	case "lapse":
		op := o.ops()[0]
		f.lapse(op, s.claim(t, d, op).ExecutionID)
		fmt.Fprintf(&b, "%s %s lapsed\n", op, s.claim(t, d, op).ExecutionID)
	case "send", "lose-response":
		op := o.ops()[0]
		c := s.claim(t, d, op)
		fault := sim.FaultKind(o.str("fault", ""))
		if d.Cmd == "lose-response" {
			fault = sim.FaultLoseResponseAfterCommit
		}
		if fault != "" {
			require.NoError(t, f.sim.Arm(sim.Fault{Kind: fault, OperationID: string(op)}))
		}
		st := f.state(op)
		r := f.client.CreateRefund(f.ctx, domain.RefundRequest{OperationID: op, OrderID: st.OrderID, AmountMinor: st.AmountMinor,
			Currency: st.Currency, IdempotencyKey: c.IdempotencyKey})
		fmt.Fprintf(&b, "%s sent under %s: %s\n", op, c.IdempotencyKey, r.Outcome)
	case "deliver":
		op := o.ops()[0]
		if s.export == nil {
			s.export = f.exports()
		}
		del := domain.ExportDelivery{OperationID: op, ExportID: "EXP-" + string(op)}
		if key := o.str("key", ""); key != "" {
			del.IdempotencyKey, del.Use = domain.IdempotencyKey(key), o.int("use", 1)
		} else {
			c := s.claim(t, d, op)
			del.IdempotencyKey, del.Use = c.IdempotencyKey, c.Use
		}
		if fault := o.str("fault", ""); fault != "" {
			require.NoError(t, f.sim.Arm(sim.Fault{Kind: sim.FaultKind(fault), OperationID: string(op)}))
		}
		r := s.export.DeliverExport(f.ctx, del)
		s.delivered[op] = r
		fmt.Fprintf(&b, "%s use %d delivered under %s: %s\n", op, del.Use, del.IdempotencyKey, r.Outcome)
	case "record":
		op := o.ops()[0]
		f.record(op, s.claim(t, d, op), s.delivered[op])
		fmt.Fprintf(&b, "%s %s %s recorded\n", op, s.claim(t, d, op).ExecutionID, s.delivered[op].Outcome)
	case "corrupt":
		f.corrupt(o.ops()[0])
		b.WriteString("ok\n")
	case "over-long":
		n, err := strconv.Atoi(o.pos[1])
		require.NoError(t, err)
		f.overLong(domain.OperationID(o.pos[0]), n)
		b.WriteString("ok\n")
	case "bogus":
		op := o.ops()[0]
		_, err := f.store.Append(f.ctx, op.StreamName(), eventstore.Any(),
			[]eventstore.EventData{{ID: bogusEventID, Type: "Bogus", Data: []byte(`{}`), Metadata: []byte(`{"schema_version":1}`)}})
		require.NoError(t, err)
		fmt.Fprintf(&b, "event %s appended to %s\n", bogusEventID, op.StreamName())
	case "store":
		down := o.pos[0] == "down"
		if len(o.pos) > 1 {
			f.store.setDown(domain.OperationID(o.pos[1]).StreamName(), down)
		} else {
			f.store.setAllDown(down)
		}
		b.WriteString("ok\n")
	case "reconciler":
		s.recon = s.reconciler(t, o)
		b.WriteString("ok\n")
	case "reconcile":
		if s.recon == nil {
			s.recon = f.reconciler(nil)
		}
		for round := 1; round <= o.int("rounds", 1); round++ {
			steps, err := s.recon.ReconcileOnce(f.ctx)
			fmt.Fprintf(&b, "round %d:", round)
			if err != nil {
				fmt.Fprintf(&b, " error: %v", err)
			}
			if len(steps) == 0 {
				b.WriteString(" nothing examined")
			}
			b.WriteString("\n")
			for _, st := range steps {
				fmt.Fprintf(&b, "  %s %s %s: %s\n", st.Ref.OperationID, st.Ref.ExecutionID, st.Verdict, st.Detail)
			}
		}
	case "sweeper":
		s.sweep = f.sweeper(func(c *recovery.SweeperConfig) { c.BatchSize = o.int("batch", c.BatchSize) })
		b.WriteString("ok\n")
	case "sweep":
		if s.sweep == nil {
			s.sweep = f.sweeper(nil)
		}
		for round := 1; round <= o.int("rounds", 1); round++ {
			lapsed, err := s.sweep.SweepOnce(f.ctx)
			fmt.Fprintf(&b, "round %d: %d lapsed", round, lapsed)
			if err != nil {
				fmt.Fprintf(&b, ", error: %v", err)
			}
			b.WriteString("\n")
		}
	case "expired-leases":
		refs, err := f.index.ExpiredLeases(f.ctx, f.clock.Now(), recovery.Cursor{}, 10)
		require.NoError(t, err, "an undecodable event fails no query")
		for _, r := range refs {
			fmt.Fprintf(&b, "%s %s\n", r.OperationID, r.ExecutionID)
		}
	case "sim":
		l := f.sim.Ledger()
		if len(o.pos) == 0 {
			writeCounters(&b, "total", l.Counters)
			break
		}
		op := o.ops()[0]
		writeCounters(&b, string(op), l.ByOperation[string(op)])
		for _, r := range f.simRequests(op) {
			fmt.Fprintf(&b, "  request %d under %s: %d %s", r.Seq, r.IdempotencyKey, r.Status, r.Result)
			if r.Replayed {
				b.WriteString(", answered from the key")
			}
			if r.RefundID != "" {
				b.WriteString(", refund " + r.RefundID)
			}
			if len(r.Faults) > 0 {
				fmt.Fprintf(&b, ", faults %v", r.Faults)
			}
			b.WriteString("\n")
		}
	case "deliveries":
		l := f.sim.Ledger()
		fmt.Fprintf(&b, "export requests %d\n", l.ExportRequests)
		for _, k := range slices.Sorted(maps.Keys(l.DeliveriesByKey)) {
			fmt.Fprintf(&b, "  %s delivered %d\n", k, l.DeliveriesByKey[k])
		}
	case "state":
		for _, op := range o.ops() {
			st := f.state(op)
			fmt.Fprintf(&b, "%s %s\n", op, st.Status())
			for _, x := range st.Executions {
				fmt.Fprintf(&b, "  %s %s epoch %d, key %s", x.ID, x.State, x.LeaseEpoch, x.IdempotencyKey)
				if x.ProviderReference != "" {
					fmt.Fprintf(&b, ", provider reference %s", x.ProviderReference)
				}
				b.WriteString("\n")
			}
		}
	case "timeline":
		op := o.ops()[0]
		rows, err := audit.Replay(f.ctx, f.store, op)
		require.NoError(t, err)
		require.NoError(t, audit.WriteTimelineText(&b, op, rows))
	case "item":
		it, ok := f.item(setaside.Role(o.pos[0]), o.pos[1])
		if !ok {
			b.WriteString("none\n")
			break
		}
		writeItem(&b, it)
	case "set-aside":
		items := f.setAside(setaside.Role(o.pos[0]))
		if len(items) == 0 {
			b.WriteString("none\n")
		}
		for _, it := range items {
			writeItem(&b, it)
		}
	case "failures":
		if len(o.pos) == 0 {
			fmt.Fprintf(&b, "%d reported in all\n", len(f.seen.items))
			break
		}
		fmt.Fprintf(&b, "%d reported\n", len(f.seen.of(setaside.Role(o.pos[0]), o.pos[1])))
	case "counts":
		counts, err := f.failing.Counts(f.ctx)
		require.NoError(t, err)
		fmt.Fprintf(&b, "%v\n", counts)
	case "release":
		require.NoError(t, f.failing.Clear(f.ctx, setaside.Role(o.pos[0]), o.pos[1]))
		b.WriteString("ok\n")
	default:
		d.Fatalf(t, "unknown step %q", d.Cmd)
	}
	return b.String()
}

// bogusEventID is the id of the event bogus appends: fixed, so the item
// the log index sets aside reads the same in every run.
const bogusEventID = "0b0905e1-0000-4000-8000-000000000001"

func (s *scenario) claim(t *testing.T, d *datadriven.TestData, op domain.OperationID) *domain.Claimed {
	c, ok := s.claims[op]
	if !ok {
		d.Fatalf(t, "%s: %s has no claim yet", d.Cmd, op)
	}
	return c
}

// reconciler builds a reconciler whose provider the step names: the
// simulator, or a wrapper that changes what a read answers.
func (s *scenario) reconciler(t *testing.T, o *opts) *recovery.Reconciler {
	f := s.f
	effect := func() domain.ProviderEffect {
		return domain.ProviderEffect{Reference: o.str("ref", "re_found"), OperationID: domain.OperationID(o.str("op", "")),
			IdempotencyKey: domain.IdempotencyKey(o.str("key", "")), State: domain.EffectState(o.str("state", string(domain.EffectApplied))),
			AmountMinor: int64(o.int("amount", 0)), Currency: o.str("currency", ""), Detail: o.str("detail", "")}
	}
	var p domain.Provider = f.client
	switch kind := o.str("provider", "sim"); kind {
	case "sim":
	case "lagging-lookup":
		p = laggingLookup{f.client}
	case "failing-lookup":
		p = failingLookup{f.client, o.str("text", "lookup failed")}
	case "fixed-lookup":
		p = fixedLookup{f.client, []domain.ProviderEffect{effect()}}
	case "fixed-retrieve", "lagging-lookup+fixed-retrieve":
		e := effect()
		if e.IdempotencyKey == "" { // the key of the claim being reconciled
			for _, c := range s.claims {
				e.IdempotencyKey = c.IdempotencyKey
			}
		}
		var under domain.Provider = f.client
		if kind != "fixed-retrieve" {
			under = laggingLookup{f.client}
		}
		p = fixedRetrieve{under, &e}
	default:
		o.d.Fatalf(t, "reconciler: no provider %s", kind)
	}
	profile := o.profile(f.profile)
	exports := o.bool("exports")
	batch := o.int("batch", 0)
	return f.reconciler(func(c *recovery.ReconcilerConfig) {
		c.Provider, c.Profile = p, profile
		if batch > 0 {
			c.BatchSize = batch
		}
		if exports {
			if s.export == nil {
				s.export = f.exports()
			}
			c.Exports, c.ExportProfile = s.export, provider.ExportsV1
		}
	})
}

func writeCounters(b *strings.Builder, what string, c sim.Counters) {
	fmt.Fprintf(b, "%s: %d received, %d created, %d declined, %d lookups, %d export requests, %d exports delivered\n",
		what, c.RequestsReceived, c.RefundsCreated, c.RefundsDeclined, c.Lookups, c.ExportRequests, c.ExportsDelivered)
}

func writeItem(b *strings.Builder, it setaside.Item) {
	fmt.Fprintf(b, "%s %s of %s: %s after %d attempt(s)", it.Role, it.Item, it.OperationID, it.Reason, it.Attempts)
	if it.SetAside {
		b.WriteString(", set aside")
	}
	fmt.Fprintf(b, "\n  %s\n", it.Detail)
}
