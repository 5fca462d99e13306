package follow

import "time"

// SetMarkSpacing sets the least time between remembered marks until the
// test ends (restore with the returned function).
func SetMarkSpacing(d time.Duration) (restore func()) {
	old := markSpacing
	markSpacing = d
	return func() { markSpacing = old }
}
