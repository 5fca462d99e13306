package domain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEvidenceStreamNames(t *testing.T) {
	require.Equal(t, "evidence-OP-4471", EvidenceStreamOf("OP-4471"))
	op, ok := OperationIDFromEvidenceStream("evidence-OP-4471")
	require.True(t, ok)
	require.Equal(t, OperationID("OP-4471"), op)
	for _, s := range []string{"evidence-unattributed", "evidence-unattributed-2026-11-26", "evidence-OP-", "operation-OP-1", "evidence-op-1"} {
		_, ok := OperationIDFromEvidenceStream(s)
		require.False(t, ok, s)
	}
	day := UnattributedStreamFor(time.Date(2026, 11, 26, 23, 59, 59, 0, time.FixedZone("x", -3600)))
	require.Equal(t, "evidence-unattributed-2026-11-27", day, "the day in UTC")
	require.True(t, IsUnattributedStream(day))
	require.True(t, IsUnattributedStream(EvidenceStream))
	require.False(t, IsUnattributedStream("evidence-unattributed-x"))
	require.False(t, IsUnattributedStream("evidence-OP-1"))

	for stream, want := range map[string][2]any{
		"operation-OP-1": {OperationID("OP-1"), false}, "evidence-OP-1": {OperationID("OP-1"), true},
	} {
		op, evidence, ok := OperationOfStream(stream)
		require.True(t, ok)
		require.Equal(t, want[0], op)
		require.Equal(t, want[1], evidence)
	}
	_, _, ok = OperationOfStream(day)
	require.False(t, ok)
}

func refusedWrite(x ExecutionID, check SecretCheck, at time.Time) WriteRefused {
	return WriteRefused{ExecutionID: x, Command: CommandRecordOutcome, Reason: ReasonLeaseNotHeld, SecretCheck: check, RefusedAt: at}
}

// TestEvidenceLogKeepsTheBound: per key and per stream, per window of the
// ledger's clock; the holder's refused writes are a key of their own;
// summaries count nothing toward it; a late refusal counts in a window kept
// and cannot reopen a bound.
func TestEvidenceLogKeepsTheBound(t *testing.T) {
	b := EvidenceBound{Window: time.Hour, PerKey: 3, PerStream: 5}
	require.NoError(t, b.Check())
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	l := NewEvidenceLog("evidence-OP-1", b)
	admit := func(e Event, at time.Time) (bool, EvidenceKey) {
		key, _, ok := EvidenceKeyOf(e, false)
		require.True(t, ok)
		one, sk, window := l.Admit(key, at)
		require.Equal(t, b.WindowOf(at), window)
		if one {
			require.NoError(t, l.Evolve(e))
		}
		return one, sk
	}
	forged := EvidenceKey{ScopeExecution, "EXE-1.1"}
	for i := range 3 {
		one, _ := admit(refusedWrite("EXE-1.1", SecretWrong, t0.Add(time.Duration(i)*time.Minute)), t0.Add(time.Duration(i)*time.Minute))
		require.True(t, one, "refusal %d of the key", i+1)
	}
	one, key := admit(refusedWrite("EXE-1.1", SecretMissing, t0.Add(10*time.Minute)), t0.Add(10*time.Minute))
	require.False(t, one)
	require.Equal(t, forged, key)
	one, key = admit(refusedWrite("EXE-1.1", SecretHeld, t0.Add(11*time.Minute)), t0.Add(11*time.Minute))
	require.True(t, one, "the holder's own refused writes are not counted with anyone else's")
	require.Equal(t, EvidenceKey{ScopeHolder, "EXE-1.1"}, key)
	require.NoError(t, l.Evolve(RefusalsSummarized{Scope: ScopeExecution, ScopeID: "EXE-1.1", Count: 100}))
	perKey, total, kept := l.Recorded(forged, t0)
	require.Equal(t, []any{3, 4, true}, []any{perKey, total, kept}, "a summary counts nothing toward the bound")

	dup := DeliveryDuplicated{MessageID: "MSG-1", CapabilityID: "CAP-1.1", SeenAt: t0.Add(20 * time.Minute)}
	one, _ = admit(dup, dup.SeenAt)
	require.True(t, one, "the stream's fifth")
	rej := PresentationRejected{Reason: ReasonCapabilityAlreadyConsumed, MessageID: "MSG-2", CapabilityID: "CAP-1.1", OperationID: "OP-1", RejectedAt: t0.Add(21 * time.Minute)}
	one, key = admit(rej, rej.RejectedAt)
	require.False(t, one)
	require.Equal(t, StreamKey, key, "past the stream's bound, every key is the stream's")

	next := t0.Add(time.Hour)
	one, _ = admit(refusedWrite("EXE-1.1", SecretWrong, next), next)
	require.True(t, one, "a new window, a new bound")
	late := refusedWrite("EXE-1.1", SecretWrong, t0.Add(59*time.Minute))
	one, key = admit(late, late.RefusedAt)
	require.False(t, one, "a refusal stamped in the closed window is judged there: its bound was reached")
	require.Equal(t, StreamKey, key)

	c := l.Clone()
	require.NoError(t, c.Evolve(refusedWrite("EXE-1.2", SecretWrong, next)))
	n, _, _ := l.Recorded(EvidenceKey{ScopeExecution, "EXE-1.2"}, next)
	require.Zero(t, n, "a clone shares nothing")

	for w := range 4 {
		require.NoError(t, l.Evolve(refusedWrite("EXE-1.3", SecretWrong, t0.Add(time.Duration(w+2)*time.Hour))))
	}
	_, _, kept = l.Recorded(forged, t0)
	require.False(t, kept, "only the latest windows are kept")
	ancient := refusedWrite("EXE-1.9", SecretWrong, t0)
	one, _, window := l.Admit(EvidenceKey{ScopeExecution, "EXE-1.9"}, ancient.RefusedAt)
	require.True(t, one)
	require.Equal(t, t0.Add(3*time.Hour), window, "a refusal older than every window kept counts in the oldest kept")
	require.Error(t, l.Evolve(LeaseRenewed{}), "an evidence stream holds evidence only")
}

func TestUnattributedEvidenceIsKeptPerOperationNamed(t *testing.T) {
	rej := PresentationRejected{Reason: ReasonOperationUnknown, MessageID: "MSG-1", CapabilityID: "CAP-9.1", OperationID: "OP-9", RejectedAt: time.Now()}
	key, _, ok := EvidenceKeyOf(rej, true)
	require.True(t, ok)
	require.Equal(t, EvidenceKey{ScopeOperation, "OP-9"}, key)
	key, _, _ = EvidenceKeyOf(rej, false)
	require.Equal(t, EvidenceKey{ScopeCapability, "CAP-9.1"}, key)
	rej.CapabilityID = ""
	key, _, _ = EvidenceKeyOf(rej, false)
	require.Equal(t, EvidenceKey{ScopeOperation, "OP-9"}, key)
}

// TestSummaryCountsEveryRefusalWithinItsSize: counts per reason and per
// principal add up to the count however many are counted; samples and
// principals stay within their bounds; hostile text is escaped and cut.
func TestSummaryCountsEveryRefusalWithinItsSize(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	b := NewSummaryBuilder("OP-1", EvidenceKey{ScopeExecution, "EXE-1.1"}, t0, DefaultEvidenceBound)
	const n = 1000
	for i := range n {
		w := refusedWrite("EXE-1.1", SecretWrong, t0.Add(time.Duration(n-i)*time.Second))
		w.Detail = "\u202egnp.exe\x00" + strings.Repeat("x", 400)
		if i%3 == 0 {
			w.Reason = ReasonCommandInvalid
		}
		require.NoError(t, b.Add(w, fmt.Sprintf("worker-%d", i%20)))
	}
	require.Error(t, b.Add(LeaseRenewed{}, "x"))
	s := b.Summary(t0.Add(time.Hour - time.Second))
	require.Equal(t, int64(n), s.Count)
	require.Equal(t, t0.Add(time.Second), s.FirstAt)
	require.Equal(t, t0.Add(n*time.Second), s.LastAt)
	require.Equal(t, []ReasonCount{{TypeWriteRefused, ReasonCommandInvalid, 334}, {TypeWriteRefused, ReasonLeaseNotHeld, 666}}, s.Reasons)
	require.Len(t, s.Principals, MaxSummaryPrincipals)
	var sum int64
	for _, p := range s.Principals {
		sum += p.Count
	}
	require.Equal(t, int64(n), sum+s.OtherPrincipals)
	require.Equal(t, int64(4*50), s.OtherPrincipals, "worker-16..19, 50 each")
	require.Len(t, s.Samples, MaxSummarySamples)
	for _, smp := range s.Samples {
		require.LessOrEqual(t, len(smp.Detail), maxSampleDetail)
		require.True(t, strings.HasPrefix(smp.Detail, `\u202egnp.exe\x00`), smp.Detail)
		require.Equal(t, []string{"detail"}, smp.Escaped)
	}
	require.Equal(t, t0, s.WindowStart)
	require.Equal(t, t0.Add(time.Hour), s.WindowEnd)
	require.Equal(t, []any{16, 256}, []any{s.BoundPerKey, s.BoundPerStream})
	s.Samples[0].Detail = "changed"
	require.NotEqual(t, "changed", b.Summary(t0).Samples[0].Detail, "a summary shares nothing with its builder")
}

// TestLostEffectsBelongInUnattributedStreamsOnly: a lost effect of an
// operation that is gone is kept in the day's unattributed stream beside
// the refusals, counting nothing toward their bound; an operation's
// evidence stream holds refusals only.
func TestLostEffectsBelongInUnattributedStreamsOnly(t *testing.T) {
	b := EvidenceBound{Window: time.Hour, PerKey: 3, PerStream: 5}
	t0 := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	lost := LostEffectEscalated{OperationID: "OP-1", IdempotencyKey: "refund-OP-1-a1", ProviderReference: "re_1", FoundAt: t0}
	day := NewEvidenceLog(UnattributedStreamFor(t0), b)
	require.NoError(t, day.Evolve(lost))
	one, _, _ := day.Admit(EvidenceKey{ScopeOperation, "OP-1"}, t0)
	require.True(t, one, "a lost effect counts nothing toward the bound")
	require.Error(t, NewEvidenceLog(EvidenceStreamOf("OP-1"), b).Evolve(lost))
}
