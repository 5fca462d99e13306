package clock

import (
	"context"
	"time"
)

// Sleep waits d of real time, or less when ctx ends first; it reports
// whether it waited the whole of d. It is for the back-offs of loops that
// talk to real components (a database, a broker); what the ledger decides
// reads its Clock instead.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
