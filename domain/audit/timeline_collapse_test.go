package audit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/domain"
	"opledger/domain/audit"
)

// TestTimelineCollapsesRunsOfEvidence: state-changing events are entries of
// their own, whatever surrounds them; each run of evidence is one counted
// group (its reasons, actors and replay signals tallied, a bounded sample
// kept); a run of up to GroupSamples is kept whole; rows out of order are
// refused.
func TestTimelineCollapsesRunsOfEvidence(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 14, 2, 0, 0, time.UTC)
	var rows []audit.TimelineRow
	add := func(event, actor, reason, detail string) {
		rows = append(rows, audit.TimelineRow{Version: int64(len(rows)), Time: t0.Add(time.Duration(len(rows)) * time.Second),
			Event: event, Actor: actor, Reason: reason, Detail: detail})
	}
	add(domain.TypeOperationRequested, "alice", "", "refund")
	add(domain.TypeClaimed, "worker-a", "", "capability consumed")
	for i := range 5000 {
		add(domain.TypeWriteRefused, fmt.Sprintf("worker-%02d", i%20), string(domain.ReasonLeaseNotHeld), "outcome refused")
	}
	add(domain.TypeOutcomeRecorded, "worker-a", "", "provider reference re_1")
	for range 2 {
		add(domain.TypePresentationRejected, "worker-z", string(domain.ReasonCapabilityAlreadyConsumed), "execution not attempted; replay suspected")
	}
	summary := audit.TimelineRow{Event: domain.TypePresentationRejected, Actor: "worker-z", Reason: string(domain.ReasonCapabilityAlreadyConsumed),
		Detail: "replay suspected", Count: 40}
	summary.Version, summary.Time = int64(len(rows)), t0.Add(time.Hour)
	rows = append(rows, summary) // a summary event counts what it stands for

	tl, err := audit.CollapseTimeline(rows)
	require.NoError(t, err)
	require.EqualValues(t, len(rows), tl.Events)
	require.Len(t, tl.Entries, 5)
	require.Equal(t, domain.TypeOperationRequested, tl.Entries[0].Row.Event)
	require.Equal(t, domain.TypeClaimed, tl.Entries[1].Row.Event)
	g := tl.Entries[2].Group
	require.NotNil(t, g)
	require.EqualValues(t, 2, g.From)
	require.EqualValues(t, 5001, g.To)
	require.EqualValues(t, 5000, g.Events)
	require.EqualValues(t, 5000, g.Refusals)
	require.Equal(t, []audit.Tally{{Name: domain.TypeWriteRefused, Count: 5000}}, g.Types)
	require.Len(t, g.Actors, 8, "at most 8 actors named")
	require.True(t, g.MoreActors)
	require.Len(t, g.Samples, audit.GroupSamples)
	require.False(t, g.Whole())
	require.Equal(t, "5,000 refusals (#2–#5,001: WriteRefused ×5,000)", g.Summary())
	require.Equal(t, domain.TypeOutcomeRecorded, tl.Entries[3].Row.Event, "the genuine outcome stands on its own")
	last := tl.Entries[4].Group
	require.EqualValues(t, 3, last.Events)
	require.EqualValues(t, 42, last.Refusals)
	require.EqualValues(t, 42, last.ReplaySuspected)
	require.True(t, last.Whole(), "a short run is kept whole")

	seq := audit.SequenceOfTimeline(tl)
	var labels []string
	for _, s := range seq.Steps {
		labels = append(labels, s.Label)
	}
	joined := strings.Join(labels, "\n")
	require.Contains(t, joined, "OutcomeRecorded")
	require.Contains(t, joined, "5,000 refusals")
	require.Less(t, len(seq.Steps), 20, "the run is one step")

	bad := &audit.Timeline{}
	require.NoError(t, bad.Add(rows[0]))
	require.Error(t, bad.Add(rows[2]), "a gap")
	require.Error(t, bad.Add(rows[0]), "a version seen before")
}
