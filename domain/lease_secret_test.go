package domain

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// leased returns a fixture whose EXE-1 was claimed (epoch 1, the holder's
// secret secretOf("EXE-1")) and, when lapsed, whose lease then lapsed
// (Unknown, epoch 2).
func leased(t *testing.T, lapsed bool) *fixture {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.claim("MSG-1", "CAP-1", "EXE-1", t0)
	if lapsed {
		f.apply(f.op.LapseLease(LapseLease{ExecutionID: "EXE-1"}, t0.Add(DefaultLeaseDuration)))
	}
	return f
}

// executorWrite is one executor command, built from what it presents.
type executorWrite struct {
	name   string
	lapsed bool // the command's case runs on the lapsed (Unknown) execution
	run    func(o *Operation, epoch int64, secret, ref, detail string) ([]Event, error)
	// ok is the event type the right secret at the right epoch records.
	ok string
	// stale is the epoch a holder presents that its lease does not allow.
	stale int64
}

var executorWrites = []executorWrite{
	{
		name: CommandRenewLease, ok: TypeLeaseRenewed, stale: 2,
		run: func(o *Operation, epoch int64, secret, _, detail string) ([]Event, error) {
			// A renewal carries no detail: the worker id is its free text.
			worker := "worker-a"
			if detail != "" {
				worker = detail
			}
			return o.RenewLease(RenewLease{ExecutionID: "EXE-1", LeaseEpoch: epoch, LeaseSecret: secret, WorkerID: worker}, t0.Add(time.Second))
		},
	},
	{
		name: CommandRecordOutcome, ok: TypeOutcomeRecorded, stale: 2,
		run: func(o *Operation, epoch int64, secret, ref, detail string) ([]Event, error) {
			return o.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: epoch, LeaseSecret: secret, Outcome: Completed, ProviderReference: ref, Detail: detail}, t0.Add(time.Second))
		},
	},
	{
		// Late evidence: the lease lapsed (epoch 1 -> 2); epoch 2 was never
		// held by anyone.
		name: CommandRecordLateOutcome, lapsed: true, ok: TypeLateOutcomeRecorded, stale: 2,
		run: func(o *Operation, epoch int64, secret, ref, detail string) ([]Event, error) {
			return o.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: epoch, LeaseSecret: secret, Outcome: Completed, ProviderReference: ref, Detail: detail}, t0.Add(DefaultLeaseDuration+time.Second))
		},
	},
}

// TestExecutorWritesNeedTheLeaseSecret: every executor command, with the
// holder's secret, a wrong one, none, a stale epoch and hostile text. Only
// the holder's well-formed write at its epoch is accepted; every other is
// refused with its reason and recorded as WriteRefused, changing nothing.
func TestExecutorWritesNeedTheLeaseSecret(t *testing.T) {
	holder := secretOf("EXE-1")
	cases := []struct {
		name          string
		epoch         int64 // 0: the command's stale epoch
		secret        string
		ref, detail   string
		reason        Reason // "" for accepted
		check         SecretCheck
		field         string
		escaped       []string
		keptRef, kept string // what the evidence keeps
	}{
		{name: "right secret", epoch: 1, secret: holder, ref: "re_1"},
		{name: "wrong secret", epoch: 1, secret: "guessed", ref: "re_1", reason: ReasonLeaseNotHeld, check: SecretWrong, keptRef: "re_1"},
		{name: "another execution's secret", epoch: 1, secret: secretOf("EXE-2"), reason: ReasonLeaseNotHeld, check: SecretWrong},
		{name: "missing secret", epoch: 1, secret: "", reason: ReasonLeaseNotHeld, check: SecretMissing},
		{name: "stale epoch", secret: holder, reason: ReasonLeaseLost, check: SecretHeld},
		{name: "epoch never valid", epoch: 0, secret: holder, reason: ReasonCommandInvalid, check: SecretHeld, field: "lease_epoch"},
		{name: "hostile text, right secret", epoch: 1, secret: holder, ref: "re_\x00", detail: "evil\u202e\x1b[31m",
			reason: ReasonCommandInvalid, check: SecretHeld, field: "provider_reference", escaped: []string{"provider_reference", "detail"},
			keptRef: `re_\x00`, kept: `evil\u202e\x1b[31m`},
		{name: "hostile text, no secret", epoch: 1, secret: "", detail: "nul\x00",
			reason: ReasonCommandInvalid, check: SecretMissing, field: "detail", escaped: []string{"detail"}, kept: `nul\x00`},
	}
	for _, w := range executorWrites {
		for _, c := range cases {
			t.Run(w.name+"/"+c.name, func(t *testing.T) {
				f := leased(t, w.lapsed)
				epoch := c.epoch
				if c.name == "stale epoch" {
					epoch = w.stale
				}
				before := *f.op.Execution("EXE-1")
				field, escaped := c.field, c.escaped
				if w.name == CommandRenewLease && c.detail != "" && c.reason == ReasonCommandInvalid {
					field, escaped = "worker_id", []string{"worker_id"} // a renewal's free text is its worker id
				}
				events, err := w.run(f.op, epoch, c.secret, c.ref, c.detail)
				if c.reason == "" {
					require.NoError(t, err)
					require.Len(t, events, 1)
					require.Equal(t, w.ok, events[0].EventType())
					f.record(events)
					return
				}
				var r *Refusal
				require.True(t, errors.As(err, &r), "want %s, got %v", c.reason, err)
				require.Equal(t, c.reason, r.Reason, r.Detail)
				require.Len(t, events, 1, "a refused executor write is recorded")
				ev, ok := events[0].(WriteRefused)
				require.True(t, ok, "%T", events[0])
				require.Equal(t, w.name, ev.Command)
				require.Equal(t, c.reason, ev.Reason)
				require.Equal(t, c.check, ev.SecretCheck)
				require.Equal(t, epoch, ev.LeaseEpoch)
				require.Equal(t, before.LeaseEpoch, ev.CurrentEpoch)
				require.NotEmpty(t, ev.RefusalDetail)
				if field != "" {
					require.Equal(t, field, r.Field)
					require.Equal(t, field, ev.Field)
				}
				require.Equal(t, escaped, ev.Escaped)
				if w.name != CommandRenewLease {
					require.Equal(t, c.keptRef, ev.ProviderReference)
					require.Equal(t, c.kept, ev.Detail)
				} else if c.detail != "" {
					safe, altered := EvidenceText(c.detail, MaxIDLength)
					require.True(t, altered)
					require.Equal(t, safe, ev.WorkerID)
				}
				require.NotContains(t, ev.RefusalDetail, holder, "the secret is never recorded")
				data := mustEncode(t, ev)
				require.NotContains(t, string(data), holder)
				require.Nil(t, CheckText("detail", ev.Detail, MaxTextLength, false), "the evidence is storable")
				require.Nil(t, CheckText("provider_reference", ev.ProviderReference, MaxProviderReferenceLength, false))
				require.Nil(t, CheckText("worker_id", ev.WorkerID, MaxIDLength, false))
				f.record(events)
				require.Equal(t, before, *f.op.Execution("EXE-1"), "a refused write changes nothing")
			})
		}
	}
}

// mustEncode returns the JSON the codec stores for e: version 1 of every
// type is encoding/json's (domain/codec; TestGolden there holds the bytes to
// the fixtures, and round-trips every type).
func mustEncode(t *testing.T, e Event) []byte {
	t.Helper()
	data, err := json.Marshal(e)
	require.NoError(t, err)
	return data
}

// TestUnboundExecutionAcceptsNoExecutorWrite: an execution claimed before
// leases were bound to their holder (a Claimed without a digest) accepts no
// executor write, whatever it presents; its lease still lapses to Unknown
// and reconciliation (which needs no lease) resolves it.
func TestUnboundExecutionAcceptsNoExecutorWrite(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	f.record([]Event{Claimed{ExecutionID: "EXE-1", CapabilityID: "CAP-1", MessageID: "MSG-1", WorkerID: "worker-a", Attempt: 1,
		LeaseEpoch: 1, LeaseExpiresAt: t0.Add(DefaultLeaseDuration), IdempotencyKey: "refund-OP-4471-a1", ClaimedAt: t0}})
	require.Empty(t, f.op.Execution("EXE-1").HeldLeases)
	for _, secret := range []string{"", "anything", secretOf("EXE-1")} {
		ev, err := f.op.RenewLease(RenewLease{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secret}, t0)
		requireReason(t, err, ReasonLeaseNotHeld)
		require.Equal(t, SecretUnbound, ev[0].(WriteRefused).SecretCheck)
		ev, err = f.op.RecordOutcome(RecordOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secret, Outcome: NotApplied}, t0)
		requireReason(t, err, ReasonLeaseNotHeld)
		f.record(ev)
	}
	require.Equal(t, ExecExecuting, f.op.Execution("EXE-1").State)
	f.apply(f.op.LapseLease(LapseLease{ExecutionID: "EXE-1"}, t0.Add(DefaultLeaseDuration)))
	_, err := f.op.RecordLateOutcome(RecordLateOutcome{ExecutionID: "EXE-1", LeaseEpoch: 1, LeaseSecret: secretOf("EXE-1"), Outcome: Completed}, t0)
	requireReason(t, err, ReasonLeaseNotHeld)
	f.apply(f.op.Reconcile(Reconcile{ExecutionID: "EXE-1", Outcome: Completed, Method: MethodProviderLookup, ProviderReference: "re_1"}, t0))
	require.Equal(t, ExecCompleted, f.op.Execution("EXE-1").State)
}

// TestRefuseWriteRecordsWhatAnEdgeRefused: an edge's refusal becomes the
// same evidence, hostile fields escaped; it names an executor command and
// carries its refusal, and for an unknown execution records nothing.
func TestRefuseWriteRecordsWhatAnEdgeRefused(t *testing.T) {
	f := leased(t, false)
	refusal := &Refusal{Reason: ReasonCommandInvalid, Field: "Lease_Epoch\x00", Detail: "unknown field"}
	ev, err := f.op.RefuseWrite(RefuseWrite{ExecutionID: "EXE-1", Command: CommandRecordOutcome, LeaseSecret: "nope", Refusal: refusal}, t0)
	require.Same(t, refusal, err)
	w := ev[0].(WriteRefused)
	require.Equal(t, `Lease_Epoch\x00`, w.Field)
	require.Equal(t, []string{"field"}, w.Escaped)
	require.Equal(t, SecretWrong, w.SecretCheck)
	require.Equal(t, "unknown field", w.RefusalDetail)

	_, err = f.op.RefuseWrite(RefuseWrite{ExecutionID: "EXE-1", Command: "Reconcile", Refusal: refusal}, t0)
	requireReason(t, err, ReasonCommandInvalid)
	_, err = f.op.RefuseWrite(RefuseWrite{ExecutionID: "EXE-1", Command: CommandRenewLease}, t0)
	requireReason(t, err, ReasonCommandInvalid)
	ev, err = f.op.RefuseWrite(RefuseWrite{ExecutionID: "EXE-9", Command: CommandRenewLease, Refusal: refusal}, t0)
	requireReason(t, err, ReasonExecutionUnknown)
	require.Empty(t, ev)
}

func TestClaimNeedsALeaseSecretDigest(t *testing.T) {
	f := newFixture(t)
	f.allow("DEC-1", "")
	f.issue("CAP-1", t0)
	for _, d := range []string{"", "abc", LeaseSecretDigest("x")[:63] + "G", "ABCDEF" + LeaseSecretDigest("x")[6:]} {
		_, err := f.op.Claim(Claim{MessageID: "MSG-1", CapabilityID: "CAP-1", WorkerID: "w", ExecutionID: "EXE-1", LeaseSecretDigest: d}, t0)
		requireReason(t, err, ReasonCommandInvalid)
		var r *Refusal
		require.ErrorAs(t, err, &r)
		require.Equal(t, "lease_secret_digest", r.Field)
	}
	require.Len(t, LeaseSecretDigest("x"), LeaseSecretDigestLength)
	require.Equal(t, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", LeaseSecretDigest("x"), "SHA-256, lower-case hex")
}
