package projections

import (
	"context"

	"opledger/eventstore"
)

// header is implemented by stores that can tell the position of the last
// event ReadAll can return now (postgres.Store). MeasureLag then answers
// "caught up" without reading an event.
type header interface {
	Head(ctx context.Context) (eventstore.Position, error)
}
