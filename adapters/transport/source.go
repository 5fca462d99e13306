package transport

import (
	"context"
	"errors"
	"fmt"

	"opledger/domain"
	"opledger/domain/worker"
	"opledger/eventstore"
)

// Source delivers messages of TopicRefundRequests to a HandleFunc. The Kafka
// consumer group (adapters/kafka) and the Postgres queue (adapters/pgqueue)
// implement it; the worker does not know which one feeds it.
//
// Contract every Source keeps:
//   - It calls handle for one message at a time per ordering unit (a Kafka
//     partition; an operation's key on the Postgres queue), in order, and
//     calls it concurrently only across units, never more than its
//     configured bound at once.
//   - It acknowledges a message (commits the offset, marks the row) only
//     after handle returned ActionAck, or after it durably moved the
//     message to the dead-letter queue when handle returned
//     ActionDeadLetter. On ActionRetry, or when it cannot acknowledge, the
//     message is offered again (at least once: the ledger's inbox absorbs
//     the copies).
//   - Bad input never stops it: dead letters are acknowledged and the next
//     message is handled.
//   - One failing message never stops it: a Retry that is not an outage
//     (see IsOutage) counts an attempt against the message; after a bounded
//     number of attempts, with a growing back-off between them, the message
//     is dead-lettered (delivery.attempts-exhausted) and the next one is
//     handled. An outage is retried without counting, for as long as the
//     context lives.
//   - Consume returns when ctx ends (ctx.Err()), after letting the messages
//     in flight finish within its drain timeout, or when the transport fails
//     beyond its retry bound (an error).
type Source interface {
	Consume(ctx context.Context, handle HandleFunc) error
}

// HandleFunc handles one message and says what to do with it. It must be
// safe for concurrent use. Dispatcher.Handle is the one every Source gets.
type HandleFunc func(ctx context.Context, in Inbound) Disposition

// Inbound is one message as a Source received it.
type Inbound struct {
	Key     []byte
	Value   []byte
	Headers map[string]string
	Origin  Origin
}

// Origin says where a message was read: enough to find it again.
type Origin struct {
	Transport string // "kafka" or "postgres"
	Topic     string
	Partition int   // Kafka partition; 0 on Postgres
	Offset    int64 // Kafka offset; the queue row's id on Postgres
	Attempt   int   // delivery attempt as counted by the transport (Postgres), 0 if unknown
}

// String renders the origin as "transport:topic/partition@offset".
func (o Origin) String() string {
	return fmt.Sprintf("%s:%s/%d@%d", o.Transport, o.Topic, o.Partition, o.Offset)
}

// Action is what a Source does with a handled message.
type Action int

const (
	// ActionAck: the ledger recorded the delivery's result; acknowledge.
	ActionAck Action = iota + 1
	// ActionDeadLetter: bad input, recorded as evidence; move it to the
	// dead-letter queue with Reason and Detail, then acknowledge.
	ActionDeadLetter
	// ActionRetry: nothing could be recorded (the store unavailable); do not
	// acknowledge, offer the message again after a back-off.
	ActionRetry
)

func (a Action) String() string {
	switch a {
	case ActionAck:
		return "ack"
	case ActionDeadLetter:
		return "dead-letter"
	case ActionRetry:
		return "retry"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Disposition is a HandleFunc's answer.
type Disposition struct {
	Action Action
	Reason domain.Reason // DeadLetter: why
	Detail string        // DeadLetter: what was wrong, for the operator
	Err    error         // Retry: what failed
	// Result is what the worker did, when it was called.
	Result  worker.Result
	Handled bool // the worker was called and returned a result
}

// IsOutage reports whether d, a Retry, failed for a reason outside the
// message: the ledger's store was unavailable (eventstore.ErrUnavailable:
// PostgreSQL restarting, say), or ctx, the context the message was handled
// on, ended (a stop or a rebalance cut it short). A Source retries an outage
// without counting it against the message, so healthy messages are never
// dead-lettered because the database restarted. Any other Retry (a corrupt
// stream, contention that outlasted the ledger's retries, an unexpected
// error) is the message's failure and is counted.
func IsOutage(ctx context.Context, d Disposition) bool {
	return errors.Is(d.Err, eventstore.ErrUnavailable) || ctx.Err() != nil
}
