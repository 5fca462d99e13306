package kafka

import (
	"fmt"
	"time"
)

// The consumer group's timings, and what they trade. A worker that dies
// without leaving the group (SIGKILL, a lost machine) holds its partitions
// until the coordinator misses its heartbeats for SessionTimeout; the
// group then rebalances, and the other members take them over once each
// has finished its message in flight and rejoined. With these defaults
// consumption of a dead worker's partitions resumes within about
// SessionTimeout plus HeartbeatInterval plus a join (measured with kfake:
// TestKilledWorkerPartitionsResume), where kafka-go's defaults (30 s
// session, 60 s rebalance) stalled them for half a minute.
const (
	// DefaultHeartbeatInterval: how often a member tells the coordinator it
	// lives, and learns that a rebalance began. Shorter: rebalances noticed
	// sooner, more requests to the coordinator. At most a third of the
	// session timeout, so that one lost heartbeat does not cost the
	// membership.
	DefaultHeartbeatInterval = time.Second
	// DefaultSessionTimeout: how long the coordinator waits for a silent
	// member before it takes its partitions away. Shorter: a dead worker's
	// partitions move sooner; a live worker that pauses longer (a GC or
	// SIGSTOP pause, a network blip, a stop draining a slow provider call:
	// kafka-go does not heartbeat while it drains) loses them too, and
	// the message it was handling is read again by the next owner, which
	// the ledger's inbox records as a DuplicateDelivery and executes
	// nothing. 6 s is Kafka's default group.min.session.timeout.ms: a
	// broker refuses less unless configured otherwise.
	DefaultSessionTimeout = 6 * time.Second
	// DefaultRebalanceTimeout: how long the coordinator waits, once a
	// rebalance began, for every member to rejoin; one that has not is
	// dropped from the generation and rejoins after (another rebalance).
	// Longer: a member slow to finish its message in flight keeps its
	// partitions, while every partition of the group waits. Shorter: the
	// group moves on without it. It bounds the join request too: kafka-go
	// waits this long plus its own timeout for the answer.
	DefaultRebalanceTimeout = 10 * time.Second
)

// CheckGroupTiming checks timings against each other: the heartbeat at
// most a third of the session, the session at least a second, the
// rebalance timeout at least the heartbeat.
func CheckGroupTiming(heartbeat, session, rebalance time.Duration) error {
	switch {
	case heartbeat <= 0 || session < time.Second || rebalance < heartbeat:
		return fmt.Errorf("group timing: want a positive heartbeat interval (%s), a session timeout of at least 1s (%s) and a rebalance timeout of at least the heartbeat (%s)",
			heartbeat, session, rebalance)
	case 3*heartbeat > session:
		return fmt.Errorf("group timing: the heartbeat interval %s is more than a third of the session timeout %s: one late heartbeat would cost the membership",
			heartbeat, session)
	}
	return nil
}
