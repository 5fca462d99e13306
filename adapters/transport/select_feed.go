package transport

import (
	"context"
	"encoding/json"
	"fmt"

	"opledger/domain/feed"
	"opledger/eventstore"
)

// TopicOperationFeed carries the operation feed (domain/feed): one
// feed.Entry per log event that changes an operation's state, keyed by
// operation id, so that one operation's changes stay in order in their
// partition. Its message id is the entry's event id.
const TopicOperationFeed = "opledger.operation-feed"

// SelectOperationFeed maps every log event that changes an operation's
// state to its feed entry on TopicOperationFeed (JSON, as GET /v1/feed
// answers it): key = operation id, message id = the event's id (what a
// consumer deduplicates on), correlation id in the headers. r supplies the
// operation's amount and references (its first event, read through ctx
// when r has not met it). Other events map to nothing.
func SelectOperationFeed(r *feed.Reader) Selector {
	return func(ctx context.Context, rec eventstore.RecordedEvent) ([]Outbound, error) {
		entries, err := r.Entries(ctx, []eventstore.RecordedEvent{rec})
		if err != nil || len(entries) == 0 {
			return nil, err
		}
		e := entries[0]
		value, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode feed entry %s: %w", e.EventID, err)
		}
		headers := map[string]string{HeaderMessageID: e.EventID, HeaderEventID: e.EventID}
		if e.CorrelationID != "" {
			headers[HeaderCorrelationID] = string(e.CorrelationID)
		}
		return []Outbound{{Topic: TopicOperationFeed, Key: string(e.OperationID), MessageID: e.EventID, Value: value, Headers: headers}}, nil
	}
}
