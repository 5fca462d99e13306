package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/worker"
)

// Worker is the worker role: *worker.Worker implements it. Its contract:
// an error means the delivery's result could not be recorded (do not
// acknowledge), except worker.ErrMalformedDelivery (the ledger refused an
// identifier as malformed: dead-letter); otherwise the result was recorded.
type Worker interface {
	Handle(ctx context.Context, d worker.Delivery) (worker.Result, error)
}

// Evidence records evidence that cannot be tied to an operation:
// *ledger.Handler implements it.
type Evidence interface {
	RecordUnattributed(ctx context.Context, ev domain.PresentationRejected, by ledger.Cause) error
}

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	Worker   Worker   // required
	Evidence Evidence // required
	WorkerID string   // required: the actor of the evidence it records
	Clock    clock.Clock
	Logger   *slog.Logger
}

// Dispatcher turns one inbound message into a Disposition. Safe for
// concurrent use.
type Dispatcher struct{ cfg DispatcherConfig }

// NewDispatcher validates cfg.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	if cfg.Worker == nil || cfg.Evidence == nil || cfg.WorkerID == "" {
		return nil, errors.New("transport: dispatcher config: Worker, Evidence and WorkerID are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Dispatcher{cfg: cfg}, nil
}

// maxDetail bounds the evidence detail copied from bad input.
const maxDetail = 512

// Handle implements HandleFunc:
//   - a value that does not decode, or lacks or malforms an identifier:
//     evidence (delivery.malformed) in the unattributed stream, DeadLetter;
//   - the worker refused an identifier as malformed: the same;
//   - the worker could not record the result: Retry;
//   - the operation does not exist: DeadLetter (operation.unknown); the
//     ledger already recorded the evidence;
//   - anything else, every refusal included (a duplicate, spent authority):
//     the result is recorded, Ack. A refusal is final for that presentation.
//
// If the evidence of bad input cannot be recorded, the answer is Retry: bad
// input never disappears, not even from the ledger.
func (d *Dispatcher) Handle(ctx context.Context, in Inbound) Disposition {
	log := d.cfg.Logger.With("origin", in.Origin.String())
	req, err := DecodeRefundRequest(in.Value)
	if err != nil {
		return d.malformed(ctx, in, req, err, log)
	}
	res, err := d.cfg.Worker.Handle(ctx, req.Delivery())
	switch {
	case errors.Is(err, worker.ErrMalformedDelivery):
		return d.malformed(ctx, in, req, err, log)
	case err != nil:
		log.WarnContext(ctx, "delivery not recorded; it will be offered again", "message_id", req.MessageID, "err", err)
		return Disposition{Action: ActionRetry, Err: err}
	case res.Claim.Reason == domain.ReasonOperationUnknown:
		log.WarnContext(ctx, "dead-lettering: no such operation", "message_id", req.MessageID, "operation_id", req.OperationID)
		return Disposition{Action: ActionDeadLetter, Reason: domain.ReasonOperationUnknown, Detail: "no such operation " + truncate(string(req.OperationID)), Result: res, Handled: true}
	}
	return Disposition{Action: ActionAck, Result: res, Handled: true}
}

// malformed records bad input as evidence and dead-letters it.
func (d *Dispatcher) malformed(ctx context.Context, in Inbound, req RefundRequest, cause error, log *slog.Logger) Disposition {
	msg := req.MessageID
	if _, err := domain.ParseMessageID(string(msg)); err != nil {
		// The message names itself badly or not at all: name it by where it
		// was read, which finds it again in the dead-letter queue.
		msg = domain.MessageID(in.Origin.String())
	}
	detail := truncate(cause.Error())
	ev := domain.UnattributedPresentation(domain.OperationID(truncate(string(req.OperationID))), msg,
		domain.CapabilityID(truncate(string(req.CapabilityID))), d.cfg.WorkerID, ReasonDeliveryMalformed, detail, d.cfg.Clock.Now())
	by := ledger.Cause{Actor: d.cfg.WorkerID, CausationID: string(msg)}
	if _, err := domain.ParseCorrelationID(string(req.CorrelationID)); err == nil {
		by.CorrelationID = req.CorrelationID
	}
	if err := d.cfg.Evidence.RecordUnattributed(ctx, ev, by); err != nil {
		log.WarnContext(ctx, "evidence of a malformed delivery not recorded; it will be offered again", "err", err)
		return Disposition{Action: ActionRetry, Err: fmt.Errorf("record malformed delivery %s: %w", in.Origin, err)}
	}
	log.WarnContext(ctx, "dead-lettering a malformed delivery", "detail", detail)
	return Disposition{Action: ActionDeadLetter, Reason: ReasonDeliveryMalformed, Detail: detail}
}

func truncate(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail] + "..."
}
