package sim

import (
	"io"
	"maps"
	"slices"
	"time"
)

// Counters are the ledger's counts, in total or for one operation.
type Counters struct {
	// RequestsReceived counts refund-creation requests as received, replays,
	// rejections and dropped connections included.
	RequestsReceived int `json:"requests_received"`
	// RefundsCreated counts refunds committed that took effect.
	RefundsCreated int `json:"refunds_created"`
	// RefundsDeclined counts refunds committed as declined (FaultDecline):
	// recorded by the provider, nothing moved.
	RefundsDeclined int `json:"refunds_declined,omitempty"`
	// Lookups counts the reads: GET /v1/refunds and GET /v1/refunds/{id}
	// (Stripe), GET /v3/refund-requests/by-request-id/{key} and
	// /v3/refund-requests/{id} (Meridian), and the export-delivery
	// service's GET /v1/export_deliveries and /by-key/{key}.
	Lookups int `json:"lookups"`
	// ExportRequests counts delivery requests to the export-delivery
	// service as received, replays and refusals included;
	// ExportsDelivered the deliveries committed that delivered the export.
	ExportRequests   int `json:"export_requests,omitempty"`
	ExportsDelivered int `json:"exports_delivered,omitempty"`
}

// RequestResult is what the simulator did with one refund-creation request.
type RequestResult string

const (
	ResultPending   RequestResult = "pending"   // still being handled
	ResultCreated   RequestResult = "created"   // executed; refund committed and answered 2xx
	ResultDeclined  RequestResult = "declined"  // executed; refund committed as declined (nothing moved), answered 2xx
	ResultReplayed  RequestResult = "replayed"  // answered from the key's saved result
	ResultRejected  RequestResult = "rejected"  // 4xx; nothing executed (see the status)
	ResultConflict  RequestResult = "conflict"  // 409: the key is in progress
	ResultMismatch  RequestResult = "mismatch"  // 400 idempotency_error: different parameters
	ResultFailed    RequestResult = "failed"    // executed and answered 5xx
	ResultDropped   RequestResult = "dropped"   // connection closed on arrival; nothing executed
	ResultLost      RequestResult = "lost"      // executed, refund committed, connection closed
	ResultAbandoned RequestResult = "abandoned" // client left (or Close) during a delay; nothing executed
)

// ReceivedRequest is one refund-creation request in the ledger's log.
type ReceivedRequest struct {
	Seq            int64         `json:"seq"`
	ReceivedAt     time.Time     `json:"received_at"` // simulated clock
	IdempotencyKey string        `json:"idempotency_key"`
	OperationID    string        `json:"operation_id,omitempty"`
	Faults         []FaultKind   `json:"faults,omitempty"` // faults applied, in order
	Status         int           `json:"status"`           // 0: no response was written
	Replayed       bool          `json:"replayed"`
	RefundID       string        `json:"refund_id,omitempty"` // the refund this request created
	Result         RequestResult `json:"result"`
}

// Ledger is what the simulator observed. Totals and per-operation counters
// are exact; Requests holds the most recent Config.RequestLogSize requests,
// oldest first, and RequestsForgotten how many older ones were dropped.
type Ledger struct {
	Counters
	ByOperation       map[string]Counters `json:"by_operation"`
	Requests          []ReceivedRequest   `json:"requests"`
	RequestsForgotten int                 `json:"requests_forgotten"`
	// DeliveriesByKey counts the exports delivered under each key of the
	// export-delivery service (at most one: a key is one use).
	DeliveriesByKey map[string]int `json:"deliveries_by_key,omitempty"`
}

// Ledger returns a copy of the ledger.
func (s *Simulator) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Ledger{
		Counters:          s.totals,
		ByOperation:       make(map[string]Counters, len(s.byOperation)),
		Requests:          make([]ReceivedRequest, 0, len(s.requestLog)),
		RequestsForgotten: s.requestsForgotten,
	}
	for op, c := range s.byOperation {
		l.ByOperation[op] = *c
	}
	if len(s.deliveriesByKey) > 0 {
		l.DeliveriesByKey = maps.Clone(s.deliveriesByKey)
	}
	for _, r := range s.requestLog {
		c := *r
		c.Faults = slices.Clone(r.Faults)
		l.Requests = append(l.Requests, c)
	}
	return l
}

// WriteLedgerExport writes every refund created (declined ones included),
// in creation order, in the provider's export format: JSON lines of
// ExportedRefund for the Stripe profiles, a CSV settlement report
// (MeridianExportHeader) for Meridian.
func (s *Simulator) WriteLedgerExport(w io.Writer) error {
	s.mu.Lock()
	refunds := make([]refund, 0, len(s.refunds))
	for _, r := range s.refunds {
		refunds = append(refunds, *r)
	}
	s.mu.Unlock() // do not hold the lock while writing to a slow writer
	return s.dia.export(w, refunds)
}

// countersLocked returns the counters of operationID, creating them.
func (s *Simulator) countersLocked(operationID string) *Counters {
	c, ok := s.byOperation[operationID]
	if !ok {
		c = &Counters{}
		s.byOperation[operationID] = c
	}
	return c
}

// receiveLocked counts a refund-creation request and opens its log entry.
func (s *Simulator) receiveLocked(key, operationID string) *ReceivedRequest {
	s.totals.RequestsReceived++
	if operationID != "" {
		s.countersLocked(operationID).RequestsReceived++
	}
	s.nextRequest++
	entry := &ReceivedRequest{
		Seq: s.nextRequest, ReceivedAt: s.clock.now(), IdempotencyKey: key, OperationID: operationID,
		Result: ResultPending,
	}
	if len(s.requestLog) >= s.cfg.RequestLogSize {
		s.requestLog = s.requestLog[1:]
		s.requestsForgotten++
	}
	s.requestLog = append(s.requestLog, entry)
	return entry
}

// lookupLocked counts a lookup.
func (s *Simulator) lookupLocked(operationID string) {
	s.totals.Lookups++
	if operationID != "" {
		s.countersLocked(operationID).Lookups++
	}
}

func cloneMetadata(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}
