package transport

import (
	"context"
	"fmt"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// SelectRefundRequests maps every CapabilityIssued event of an operation
// stream to one RefundRequest on TopicRefundRequests: key = operation id,
// message id = MessageIDForEvent(event id), correlation id from the event's
// metadata. Other events map to nothing, and so does the capability of a
// kind whose uses its holder presents (domain.EffectPolicy.PublishOnIssue
// false: an export download is delivered when it is asked for, one use per
// presentation, never because it was authorized).
func SelectRefundRequests(_ context.Context, rec eventstore.RecordedEvent) ([]Outbound, error) {
	if rec.Type != domain.TypeCapabilityIssued {
		return nil, nil
	}
	op, ok := domain.OperationIDFromStream(rec.StreamID)
	if !ok {
		return nil, nil // CapabilityIssued outside an operation stream: not ours to publish
	}
	d, err := codec.DecodeRecorded(rec)
	if err != nil {
		return nil, err
	}
	issued, ok := d.Event.(domain.CapabilityIssued)
	if !ok {
		return nil, fmt.Errorf("event type %s decoded as %T", rec.Type, d.Event)
	}
	if p, known := domain.PolicyOf(issued.Kind); !known || !p.PublishOnIssue {
		return nil, nil
	}
	req := RefundRequest{
		MessageID: MessageIDForEvent(rec.ID), CorrelationID: d.Meta.CorrelationID,
		OperationID: op, CapabilityID: issued.CapabilityID,
	}
	value, err := req.Encode()
	if err != nil {
		return nil, err
	}
	headers := map[string]string{HeaderMessageID: string(req.MessageID), HeaderEventID: rec.ID}
	if req.CorrelationID != "" {
		headers[HeaderCorrelationID] = string(req.CorrelationID)
	}
	return []Outbound{{Topic: TopicRefundRequests, Key: string(op), MessageID: string(req.MessageID), Value: value, Headers: headers}}, nil
}

// SelectSecuritySignals maps every PresentationRejected event with
// ReplaySuspected set to one SecuritySignal on TopicSecuritySignals, keyed by
// capability id, and every LogRegressed (the store lost acknowledged
// writes) to one of kind SignalLogRegressed, keyed by the stream that went
// back. Other events map to nothing.
func SelectSecuritySignals(_ context.Context, rec eventstore.RecordedEvent) ([]Outbound, error) {
	if rec.Type == domain.TypeLogRegressed {
		return selectRegression(rec)
	}
	if rec.Type != domain.TypePresentationRejected {
		return nil, nil
	}
	d, err := codec.DecodeRecorded(rec)
	if err != nil {
		return nil, err
	}
	rej, ok := d.Event.(domain.PresentationRejected)
	if !ok {
		return nil, fmt.Errorf("event type %s decoded as %T", rec.Type, d.Event)
	}
	if !rej.ReplaySuspected {
		return nil, nil
	}
	sig := SecuritySignal{
		SignalID: SignalIDForEvent(rec.ID), Kind: SignalReplaySuspected, EventID: rec.ID, Stream: rec.StreamID,
		CorrelationID: d.Meta.CorrelationID, OperationID: rej.OperationID, CapabilityID: rej.CapabilityID,
		MessageID: rej.MessageID, ExecutionID: rej.ExecutionID, WorkerID: rej.WorkerID, Status: rej.Status,
		Reason: rej.Reason, Detail: rej.Detail, ExecutionAttempted: rej.ExecutionAttempted, RejectedAt: rej.RejectedAt,
	}
	value, err := sig.Encode()
	if err != nil {
		return nil, err
	}
	headers := map[string]string{HeaderMessageID: sig.SignalID, HeaderEventID: rec.ID}
	if sig.CorrelationID != "" {
		headers[HeaderCorrelationID] = string(sig.CorrelationID)
	}
	return []Outbound{{Topic: TopicSecuritySignals, Key: string(rej.CapabilityID), MessageID: sig.SignalID, Value: value, Headers: headers}}, nil
}

// selectRegression maps a LogRegressed to its security signal.
func selectRegression(rec eventstore.RecordedEvent) ([]Outbound, error) {
	d, err := codec.DecodeRecorded(rec)
	if err != nil {
		return nil, err
	}
	ev, ok := d.Event.(domain.LogRegressed)
	if !ok {
		return nil, fmt.Errorf("event type %s decoded as %T", rec.Type, d.Event)
	}
	op, _, _ := domain.OperationOfStream(ev.Stream)
	detail, _ := domain.EvidenceText(fmt.Sprintf("%s of %s saw %s at version %d, the store holds version %d: %s",
		ev.Cache, ev.Noticer, cmpOr(ev.Stream, "the log"), ev.SeenVersion, ev.HeldVersion, ev.Detail), domain.MaxTextLength)
	worker, _ := domain.EvidenceText(ev.Noticer, domain.MaxIDLength)
	sig := SecuritySignal{
		SignalID: SignalIDForEvent(rec.ID), Kind: SignalLogRegressed, EventID: rec.ID, Stream: rec.StreamID,
		OperationID: op, WorkerID: worker, Reason: ReasonLogRegressed, Detail: detail, RejectedAt: ev.NoticedAt,
	}
	value, err := sig.Encode()
	if err != nil {
		return nil, err
	}
	key := cmpOr(ev.Stream, domain.RegressionStream)
	headers := map[string]string{HeaderMessageID: sig.SignalID, HeaderEventID: rec.ID}
	return []Outbound{{Topic: TopicSecuritySignals, Key: key, MessageID: sig.SignalID, Value: value, Headers: headers}}, nil
}

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
