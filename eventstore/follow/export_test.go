package follow

import "time"

// SetMarkSpacing sets the least time between the marks c's follower
// remembers (regression.go).
func SetMarkSpacing[T any](c *Config[T], d time.Duration) { c.markSpacing = d }
