package kurrent

import (
	"context"
	"errors"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// maxSkippedMessages bounds the messages one ReadAll takes without keeping
// them (checkpoints, system events in our streams) on top of the events it
// keeps. The call timeout bounds the time; this bounds the count.
const maxSkippedMessages = 1_000_000

// ReadAll implements eventstore.Store: up to limit events of the store's
// streams strictly after position after (nil: from the start), in $all
// order. The client library reads $all only unfiltered, so ReadAll opens a
// catch-up subscription with the server-side filter (see naming.filter) and
// ends it after limit events or at the server's caught-up message, whichever
// comes first; a server that never sends caught-up (EventStoreDB before
// 23.10) makes every ReadAll time out. KurrentDB exposes an event in $all
// only once it is committed, in log order, so a reader checkpointing the
// last position it received never skips one.
//
// after must be nil or a Position of this package (else
// eventstore.ErrInvalidPosition). A limit of zero or less reads nothing.
func (s *Store) ReadAll(ctx context.Context, after eventstore.Position, limit int) ([]eventstore.RecordedEvent, error) {
	from, err := subscribeFrom(after)
	if err != nil {
		return nil, fmt.Errorf("read all: %w", err)
	}
	if limit <= 0 {
		return nil, nil
	}
	var out []eventstore.RecordedEvent
	err = s.call(ctx, "read all", func(ctx context.Context, es *esdb.Client) error {
		opts := esdb.SubscribeToAllOptions{From: from, Filter: s.names.filter(), Deadline: &s.cfg.CallTimeout}
		sub, err := es.SubscribeToAll(ctx, opts)
		if err != nil {
			return err
		}
		defer sub.Close()
		for range limit + maxSkippedMessages {
			m := sub.Recv()
			switch {
			case m.SubscriptionDropped != nil:
				return dropped(m.SubscriptionDropped)
			case m.CaughtUp != nil:
				return nil
			case m.EventAppeared != nil:
				e := m.EventAppeared.OriginalEvent()
				stream, ok := s.names.inLog(e)
				if !ok {
					continue
				}
				rec, err := recorded(stream, e)
				if err != nil {
					return err
				}
				out = append(out, rec)
				if len(out) == limit {
					return nil
				}
			}
		}
		return fmt.Errorf("no caught-up after %d messages", limit+maxSkippedMessages)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dropped is the error of a subscription the client reports dropped.
func dropped(d *esdb.SubscriptionDropped) error {
	if d.Error == nil {
		return errors.New("subscription dropped")
	}
	return fmt.Errorf("subscription dropped: %w", d.Error)
}
