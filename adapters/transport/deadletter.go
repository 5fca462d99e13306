package transport

import (
	"context"
	"errors"
	"time"

	"opledger/domain"
)

// HeaderDeadAttempts is the dead-letter header with the number of failed
// attempts at the message before it was dead-lettered (on
// delivery.attempts-exhausted; absent for bad input, which is dead-lettered
// at once).
const HeaderDeadAttempts = "opledger-dlq-attempts"

// DeadLetter is one message in a dead-letter queue.
type DeadLetter struct {
	// ID names the dead letter for the tooling: "DL-<partition>-<offset>"
	// of the Kafka dead-letter topic, "DL-<row id>" on Postgres.
	ID        string
	Reason    domain.Reason
	Detail    string
	Origin    Origin           // where the original was read
	MessageID domain.MessageID // the original's message id, when it had a readable one
	Key       []byte
	Value     []byte
	Headers   map[string]string
	DeadAt    time.Time
	// Resubmitted is set once the dead letter was resubmitted.
	Resubmitted *Resubmission
}

// Resubmission records one dead letter resubmitted under a new message id.
type Resubmission struct {
	DeadLetterID string
	MessageID    domain.MessageID // ResubmissionMessageID(DeadLetterID)
	By           string
	At           time.Time
	Published    bool // false while the copy may not have reached the topic yet
}

// ResubmitRequest selects dead letters to resubmit: All (every one not yet
// resubmitted, oldest first, at most Limit) or the named IDs.
type ResubmitRequest struct {
	All   bool
	IDs   []string
	By    string // the operator, recorded with each resubmission
	Limit int    // bounds All (default DefaultResubmitLimit)
}

// DefaultResubmitLimit bounds one "resubmit --all".
const DefaultResubmitLimit = 1000

// ErrDeadLetterNotFound is returned for an id that names no dead letter.
var ErrDeadLetterNotFound = errors.New("no such dead letter")

// ErrAlreadyResubmitted is returned when a named dead letter was
// resubmitted before: the copy is already on the topic under its new id.
var ErrAlreadyResubmitted = errors.New("dead letter already resubmitted")

// DeadLetterQueue is the operators' view of a transport's dead letters:
// `opledger dlq list` and `opledger dlq resubmit`.
//
// Resubmit republishes each selected dead letter to TopicRefundRequests
// under a NEW message id (ResubmissionMessageID), as operators' tools do.
// The transport does not judge the copies: the ledger does. A copy carrying
// spent authority is refused there (capability.already-consumed, replay
// suspected) and raises a security signal. A resubmission interrupted by a
// crash is completed by the next Resubmit under the same new id.
type DeadLetterQueue interface {
	ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, error)
	Resubmit(ctx context.Context, req ResubmitRequest) ([]Resubmission, error)
}

// ResubmissionLog persists resubmissions for a dead-letter queue that cannot
// mark its own entries (a Kafka topic). Begin records the intent before the
// copy is published and returns the existing record if there is one; Done
// marks it published. adapters/pgqueue implements it.
type ResubmissionLog interface {
	Begin(ctx context.Context, r Resubmission) (Resubmission, bool, error)
	Done(ctx context.Context, deadLetterID string) error
	Lookup(ctx context.Context, ids []string) (map[string]Resubmission, error)
}

// ResubmissionHeaders returns the headers of a resubmitted copy: the
// original's, without the dead-letter annotations, naming the new message
// id, the dead letter it copies and the message id it had.
func ResubmissionHeaders(original map[string]string, deadLetterID, previousMessageID string, id domain.MessageID) map[string]string {
	h := make(map[string]string, len(original)+3)
	for k, v := range original {
		switch k {
		case HeaderDeadReason, HeaderDeadDetail, HeaderDeadLetteredBy, HeaderDeadLetteredAt, HeaderDeadAttempts,
			HeaderOriginalTopic, HeaderOriginalPart, HeaderOriginalOffset:
			continue
		}
		h[k] = v
	}
	h[HeaderMessageID] = string(id)
	h[HeaderResubmittedFrom] = deadLetterID
	if previousMessageID != "" {
		h[HeaderPreviousMessage] = previousMessageID
	}
	return h
}
