package kafka

import "sync/atomic"

// ConsumerStats counts what one Consumer did since it was made, for
// /metrics. The durable counts are elsewhere: the messages being retried
// across the whole group are the set-aside store's RoleKafka items
// (setaside.Store.Counts), and the dead letters are the dead-letter topic's
// (DeadLetters.Count).
type ConsumerStats struct {
	// DeadLettered counts messages this consumer wrote to the dead-letter
	// topic: bad input, and Exhausted.
	DeadLettered int64
	// Exhausted counts messages dead-lettered because their failed
	// attempts reached the policy's MaxAttempts.
	Exhausted int64
	// Failures counts failed attempts counted against messages (each
	// recorded in the set-aside store).
	Failures int64
	// Outages counts retries of outages (the ledger's store unavailable,
	// the set-aside store unreachable, a dead-letter write failed), which
	// are not counted against any message.
	Outages int64
	// BackingOff is how many partitions wait out a failing message's
	// back-off right now.
	BackingOff int64
}

type consumerStats struct {
	deadLettered, exhausted, failures, outages, backingOff atomic.Int64
}

// Stats returns the consumer's counters. Safe for concurrent use.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{
		DeadLettered: c.stats.deadLettered.Load(), Exhausted: c.stats.exhausted.Load(),
		Failures: c.stats.failures.Load(), Outages: c.stats.outages.Load(), BackingOff: c.stats.backingOff.Load(),
	}
}
