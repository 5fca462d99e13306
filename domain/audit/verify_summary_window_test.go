package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore/memory"
)

// A summary may hold refusals stamped outside its window when their own
// window is one the stream does not keep (a clock that leapt, a batch
// recorded late: domain.EvidenceLog.Admit counts them in a kept window),
// never refusals of another window the stream keeps (I14).
func TestASummaryHoldsLateRefusalsOnlyFromWindowsNotKept(t *testing.T) {
	w1 := time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC)
	bound := domain.EvidenceBound{Window: time.Hour, PerKey: 1, PerStream: 256}
	stream := domain.UnattributedStreamFor(w1)
	rejected := func(n int, at time.Time) domain.Event {
		return domain.PresentationRejected{Status: domain.StatusInvalid, Reason: domain.ReasonOperationUnknown, MessageID: domain.MessageID(fmt.Sprintf("MSG-%d", n)),
			OperationID: "OP-X", RejectedAt: at}
	}
	summary := func(refusedAt time.Time) domain.Event {
		return domain.RefusalsSummarized{Scope: domain.ScopeOperation, ScopeID: "OP-X", WindowStart: w1, WindowEnd: w1.Add(time.Hour),
			BoundPerKey: bound.PerKey, BoundPerStream: bound.PerStream, Count: 1,
			Reasons:    []domain.ReasonCount{{Type: domain.TypePresentationRejected, Reason: domain.ReasonOperationUnknown, Count: 1}},
			Principals: []domain.PrincipalCount{{Principal: "caller", Count: 1}}, Samples: []domain.RefusalSample{},
			FirstAt: refusedAt, LastAt: refusedAt, SummarizedAt: w1.Add(30 * time.Minute)}
	}
	notWithin := func(events ...domain.Event) []audit.Violation {
		t.Helper()
		store := memory.New(nil)
		h := newHistory(t, store, "")
		h.stream = stream // the history's helpers, on an unattributed evidence stream
		h.add(events...)
		var out []audit.Violation
		for _, v := range verify(t, store, int64(len(events)), audit.VerifyOptions{EvidenceBound: bound}).Violations {
			if v.Invariant == "I14" && strings.Contains(v.Message, "not within its window") {
				out = append(out, v)
			}
		}
		return out
	}

	// Refused a day before the window, in a window the stream never kept.
	require.Empty(t, notWithin(rejected(1, w1.Add(10*time.Minute)), summary(w1.Add(-26*time.Hour))))
	// Refused in the hour before, a window the stream keeps (it recorded a
	// refusal one by one there): counted there, never in this summary.
	require.Len(t, notWithin(rejected(0, w1.Add(-50*time.Minute)), rejected(1, w1.Add(10*time.Minute)), summary(w1.Add(-40*time.Minute))), 1)
	// Within its window.
	require.Empty(t, notWithin(rejected(1, w1.Add(10*time.Minute)), summary(w1.Add(20*time.Minute))))
}
