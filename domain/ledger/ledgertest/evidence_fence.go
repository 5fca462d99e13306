package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/ledger"
	"opledger/eventstore"
)

// The tests of evidence decided on a history the log then lost: a failover
// between the decision and the evidence's append (the store loses the
// latest events just before the append reaches it). Evidence is kept
// beside the operation's stream, so its append is fenced by the event it
// was decided on (eventstore.Fence), and a duplicate by the refusal it
// names: what the log no longer holds is never the basis of a record.

// losingBeforeAppend is a store that, once armed, runs lose just before
// the next append to stream.
type losingBeforeAppend struct {
	eventstore.Store
	stream string
	armed  atomic.Bool
	lose   func()
}

func (s *losingBeforeAppend) Append(ctx context.Context, stream string, expected eventstore.ExpectedVersion, events []eventstore.EventData) (eventstore.AppendResult, error) {
	if stream == s.stream && s.armed.CompareAndSwap(true, false) {
		s.lose()
	}
	return s.Store.Append(ctx, stream, expected, events)
}

// losingBefore returns a store over the harness's that, once armed, makes
// stream shortened end at version keep just before the next append to
// stream appended.
func (h *Harness) losingBefore(b Backend, appended, shortened string, keep int64) *losingBeforeAppend {
	s := &losingBeforeAppend{Store: h.Store, stream: appended}
	s.lose = func() { b.Shorten(h.T, h.Store, shortened, keep) }
	return s
}

// evidenceOnALostClaim: a replay of spent authority is decided on the
// claim that spent it; the log loses the claim (and the capability) before
// the refusal is appended. The refusal "already consumed, replay
// suspected" is not recorded beside a history without that claim: the
// presentation is decided again on what the log holds and recorded so.
func evidenceOnALostClaim(t *testing.T, b Backend) {
	requireShorten(t, b)
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	claimed := h.Claim(h.H, "MSG-1", capID, "worker-a")
	require.Equal(t, domain.StatusClaimed, claimed.Status)
	stream, evidence := h.Op.StreamName(), domain.EvidenceStreamOf(h.Op)
	seen := h.lastEvent(stream)

	losing := h.losingBefore(b, evidence, stream, 1) // the capability and the claim are gone
	losing.armed.Store(true)
	out := h.Claim(h.Handler(losing), "MSG-REPLAY", capID, "worker-b")

	require.False(t, losing.armed.Load(), "the log lost the claim between the decision and the append")
	require.NotEqual(t, domain.ReasonCapabilityAlreadyConsumed, out.Reason, "decided again on the log without the claim")
	events, err := h.Store.ReadStream(context.Background(), evidence, 0, 100)
	require.NoError(t, err)
	require.Len(t, events, 1, "one refusal recorded, decided on what the log holds")
	require.Equal(t, domain.TypePresentationRejected, events[0].Type)
	require.NotContains(t, string(events[0].Data), `"replay_suspected":true`)
	h.requireOneRegression(stream, 3, 1, seen.ID)
}

// duplicateOfALostRefusal: a message refused before is delivered again
// and decided a duplicate of that refusal; the log loses the refusal
// before the duplicate is appended. No duplicate of a presentation the log
// no longer holds is recorded: the message is decided again, and refused
// again.
func duplicateOfALostRefusal(t *testing.T, b Backend) {
	requireShorten(t, b)
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	require.Equal(t, domain.StatusClaimed, h.Claim(h.H, "MSG-1", capID, "worker-a").Status)
	evidence := domain.EvidenceStreamOf(h.Op)
	first := h.Claim(h.H, "MSG-X", capID, "worker-b")
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, first.Reason)
	require.Equal(t, 1, h.CountEvents(domain.TypePresentationRejected))

	losing := h.losingBefore(b, evidence, evidence, eventstore.NoStreamVersion) // the refusal is gone
	lh := h.Handler(losing)
	losing.armed.Store(true)
	again := h.Claim(lh, "MSG-X", capID, "worker-b")

	require.False(t, losing.armed.Load(), "the log lost the refusal between the decision and the append")
	require.Equal(t, domain.ReasonCapabilityAlreadyConsumed, again.Reason, "refused again, not answered a duplicate of what is gone")
	require.Zero(t, h.CountEvents(domain.TypeDeliveryDuplicated))
	require.Equal(t, 1, h.CountEvents(domain.TypePresentationRejected), "the refusal, recorded again")
	regs := h.Regressions.Seen()
	require.Len(t, regs, 1, "the evidence stream that went back is told, once")
	require.Equal(t, evidence, regs[0].Stream)
	require.Equal(t, int64(0), regs[0].SeenVersion, "the version the handler's evidence fold ended at")
	require.Equal(t, eventstore.NoStreamVersion, regs[0].HeldVersion, "where the stream ended when it was read again")
}

// summaryOfALostBound: refusals of one capability reach the bound, the
// next one is counted into a summary; the log loses the refusals recorded
// one by one before the summary is appended. A summary of refusals past a
// bound the stream no longer reaches is not recorded: the refusal is
// decided again, and recorded one by one.
func summaryOfALostBound(t *testing.T, b Backend) {
	requireShorten(t, b)
	h := NewHarness(t, b)
	h.Allow(OKFacts)
	capID := h.Issue()
	require.Equal(t, domain.StatusClaimed, h.Claim(h.H, "MSG-1", capID, "worker-a").Status)
	evidence := domain.EvidenceStreamOf(h.Op)
	bound := domain.EvidenceBound{Window: time.Hour, PerKey: 2, PerStream: 100}
	losing := h.losingBefore(b, evidence, evidence, eventstore.NoStreamVersion) // the refusals are gone
	lh := h.HandlerWith(losing, func(c *ledger.Config) { c.EvidenceBound = bound })
	h.replays(lh, capID, "MSG-R", 0, bound.PerKey)
	require.Equal(t, bound.PerKey, h.CountEvents(domain.TypePresentationRejected), "within the bound: one by one")

	losing.armed.Store(true)
	h.replays(lh, capID, "MSG-R", bound.PerKey, bound.PerKey+1)

	require.False(t, losing.armed.Load(), "the log lost the refusals between the summary's decision and its append")
	events, err := h.Store.ReadStream(context.Background(), evidence, 0, 100)
	require.NoError(t, err)
	require.Len(t, events, 1, "the refusal, recorded one by one on the stream as it is")
	require.Equal(t, domain.TypePresentationRejected, events[0].Type)
	var rejected domain.PresentationRejected
	require.NoError(t, json.Unmarshal(events[0].Data, &rejected))
	require.Equal(t, domain.MessageID(fmt.Sprintf("MSG-R-%d", bound.PerKey)), rejected.MessageID)
}
