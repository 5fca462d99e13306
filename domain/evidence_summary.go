package domain

import (
	"fmt"
	"time"
)

// What one RefusalsSummarized keeps of its refusals beyond their counts.
const (
	// MaxSummarySamples is how many refusals a summary keeps as samples:
	// enough to see what was tried, few enough that a summary's size does
	// not grow with the volume it counts.
	MaxSummarySamples = 4
	// MaxSummaryPrincipals is how many principals a summary names with
	// their counts; the refusals of any further ones are counted together.
	MaxSummaryPrincipals = 16
	// maxSampleDetail bounds a sample's detail (the event's own may be up
	// to MaxTextLength).
	maxSampleDetail = 256
)

// SummaryBuilder counts refusals into one RefusalsSummarized. It is pure:
// the command handler feeds it a batch of refusals past the bound and
// appends what Summary returns. Its size is bounded by the samples and
// principals it keeps, whatever it counts.
type SummaryBuilder struct {
	s          RefusalsSummarized
	reasons    map[ReasonCount]int // index in s.Reasons, keyed without Count
	principals map[string]int      // index in s.Principals
}

// NewSummaryBuilder starts the summary of key's refusals about op in the
// window starting at window, under bound b.
func NewSummaryBuilder(op OperationID, key EvidenceKey, window time.Time, b EvidenceBound) *SummaryBuilder {
	return &SummaryBuilder{
		s: RefusalsSummarized{
			Scope: key.Scope, ScopeID: key.ID, OperationID: op, WindowStart: window.UTC(), WindowEnd: window.UTC().Add(b.Window),
			BoundPerKey: b.PerKey, BoundPerStream: b.PerStream, Reasons: []ReasonCount{}, Principals: []PrincipalCount{},
			Samples: []RefusalSample{},
		},
		reasons: map[ReasonCount]int{}, principals: map[string]int{},
	}
}

// Count reports how many refusals the builder has counted.
func (b *SummaryBuilder) Count() int64 { return b.s.Count }

// Add counts refusal e (PresentationRejected, DeliveryDuplicated or
// WriteRefused), caused by principal.
func (b *SummaryBuilder) Add(e Event, principal string) error {
	sample, err := sampleOf(e)
	if err != nil {
		return err
	}
	sample.Principal = keepText(&sample, "principal", principal, MaxIDLength)
	s := &b.s
	s.Count++
	if s.Count == 1 || sample.At.Before(s.FirstAt) {
		s.FirstAt = sample.At
	}
	if sample.At.After(s.LastAt) {
		s.LastAt = sample.At
	}
	rk := ReasonCount{Type: sample.Type, Reason: sample.Reason}
	if i, ok := b.reasons[rk]; ok {
		s.Reasons[i].Count++
	} else {
		b.reasons[rk] = len(s.Reasons)
		rk.Count = 1
		s.Reasons = append(s.Reasons, rk)
	}
	switch i, ok := b.principals[sample.Principal]; {
	case ok:
		s.Principals[i].Count++
	case len(s.Principals) < MaxSummaryPrincipals:
		b.principals[sample.Principal] = len(s.Principals)
		s.Principals = append(s.Principals, PrincipalCount{Principal: sample.Principal, Count: 1})
	default:
		s.OtherPrincipals++
	}
	if len(s.Samples) < MaxSummarySamples {
		s.Samples = append(s.Samples, sample)
	}
	return nil
}

// Summary returns the summary of what was counted, recorded at.
func (b *SummaryBuilder) Summary(at time.Time) RefusalsSummarized {
	s := b.s
	s.Reasons = append([]ReasonCount{}, b.s.Reasons...)
	s.Principals = append([]PrincipalCount{}, b.s.Principals...)
	s.Samples = append([]RefusalSample{}, b.s.Samples...)
	s.SummarizedAt = at
	return s
}

// sampleOf is refusal e as a summary's sample, its text kept escaped and cut.
func sampleOf(e Event) (RefusalSample, error) {
	var r RefusalSample
	switch ev := e.(type) {
	case PresentationRejected:
		r = RefusalSample{Type: TypePresentationRejected, Reason: ev.Reason, At: ev.RejectedAt, MessageID: ev.MessageID,
			CapabilityID: ev.CapabilityID, ExecutionID: ev.ExecutionID}
		r.WorkerID = keepText(&r, "worker_id", ev.WorkerID, MaxIDLength)
		r.Detail = keepText(&r, "detail", ev.Detail, maxSampleDetail)
	case DeliveryDuplicated:
		r = RefusalSample{Type: TypeDeliveryDuplicated, Reason: ReasonDeliveryDuplicate, At: ev.SeenAt, MessageID: ev.MessageID,
			CapabilityID: ev.CapabilityID, ExecutionID: ev.ExecutionID}
		r.WorkerID = keepText(&r, "worker_id", ev.WorkerID, MaxIDLength)
	case WriteRefused:
		r = RefusalSample{Type: TypeWriteRefused, Reason: ev.Reason, At: ev.RefusedAt, ExecutionID: ev.ExecutionID}
		r.WorkerID = keepText(&r, "worker_id", ev.WorkerID, MaxIDLength)
		r.Command = keepText(&r, "command", ev.Command, maxOutcomeLength)
		r.Detail = keepText(&r, "detail", ev.Detail, maxSampleDetail)
	default:
		return RefusalSample{}, fmt.Errorf("summary: %s is not a refusal", e.EventType())
	}
	r.MessageID = MessageID(keepText(&r, "message_id", string(r.MessageID), MaxIDLength))
	r.CapabilityID = CapabilityID(keepText(&r, "capability_id", string(r.CapabilityID), MaxIDLength))
	r.ExecutionID = ExecutionID(keepText(&r, "execution_id", string(r.ExecutionID), MaxIDLength))
	return r, nil
}

// keepText is s as EvidenceText keeps it, naming field in r.Escaped when it
// had to be escaped or cut.
func keepText(r *RefusalSample, field, s string, max int) string {
	safe, altered := EvidenceText(s, max)
	if altered {
		r.Escaped = append(r.Escaped, field)
	}
	return safe
}
