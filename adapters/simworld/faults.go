package simworld

import (
	"fmt"
	"slices"
	"strings"
)

// Fault names one kind of fault (or adversarial behaviour) the world can
// inject. The names are stable: --faults lists, summaries and replay commands
// carry them.
type Fault string

// Store faults: the event store wrapped by a fault-injecting view.
const (
	FaultStoreReadFail   Fault = "store-read-fail"   // one read answers ErrUnavailable
	FaultStoreWriteFail  Fault = "store-write-fail"  // one append is not written and answers ErrUnavailable
	FaultStoreCommitLost Fault = "store-commit-lost" // one append is written, and answers ErrUnavailable
	FaultStoreOutage     Fault = "store-outage"      // every call fails for a while
	// A synchronous standby takes over: the calls in flight are reset (an
	// append in flight committed or not, its answer lost) and the store is
	// unreachable until the promote; nothing acknowledged is lost.
	FaultStoreFailover Fault = "store-failover"
	// An asynchronous standby takes over without the last 1–8 committed
	// transactions (events, and the relays' checkpoints saved after them):
	// the log goes back. The memory store only (memory.Store.LoseLast).
	FaultStoreFailoverLossy Fault = "store-failover-lossy"
)

// Provider faults: the provider simulator's own (adapters/provider/sim),
// armed for the request about to reach it.
const (
	FaultProviderLoseResponse = Fault("provider-lose-response-after-commit")
	FaultProviderHold         = Fault("provider-hold-response")
	FaultProvider5xxBefore    = Fault("provider-5xx-before-commit")
	FaultProvider5xxAfter     = Fault("provider-5xx-after-commit")
	FaultProviderReject       = Fault("provider-reject-validation")
	FaultProviderDelay        = Fault("provider-delay")
	FaultProviderDrop         = Fault("provider-drop-connection-before-read")
)

// Network faults: the in-memory round tripper between the provider client
// and the simulator.
const (
	FaultNetDialRefused  Fault = "net-dial-refused"  // nothing sent: a provable NotApplied
	FaultNetLostRequest  Fault = "net-lost-request"  // written, never reached the provider; the client sees a reset
	FaultNetLostResponse Fault = "net-lost-response" // the provider answered; the answer is lost
	FaultNetSlow         Fault = "net-slow"          // virtual latency on the way in or out, often past the send timeout
)

// Transport faults: the simulated transport between the relay and the
// workers, and the relay's own writes.
const (
	FaultMsgDuplicate     Fault = "msg-duplicate"       // a message offered twice
	FaultMsgRedeliver     Fault = "msg-redeliver"       // a message in flight offered again (visibility timeout)
	FaultMsgReorder       Fault = "msg-reorder"         // a later message of an operation delivered first
	FaultMsgAckLost       Fault = "msg-ack-lost"        // an acknowledgement lost: the message comes again
	FaultMsgDelay         Fault = "msg-delay"           // a message held back for a while
	FaultMsgMalformed     Fault = "msg-malformed"       // hostile input on the topic, naming a capability
	FaultMsgUnreadable    Fault = "msg-unreadable"      // input on the topic with no capability to read (not JSON, none named)
	FaultMsgReplay        Fault = "msg-replay"          // an operator's copy of an old message under a new id
	FaultDLQResubmit      Fault = "dlq-resubmit"        // dead letters resubmitted under new message ids
	FaultPublishFail      Fault = "publish-fail"        // a publish refused, nothing accepted
	FaultPublishLost      Fault = "publish-answer-lost" // a publish accepted, its answer lost: published again
	FaultCheckpointFail   Fault = "checkpoint-fail"     // the relay cannot save its checkpoint
	FaultWorkerCrash      Fault = "worker-crash"        // a worker process dies and restarts
	FaultWorkerFreeze     Fault = "worker-freeze"       // a worker process stops (often past its lease) and resumes
	FaultServeRestart     Fault = "serve-restart"       // relay, sweeper and reconciler die and restart
	FaultClockJump        Fault = "clock-jump"          // time leaps (minutes to past the key retention)
	FaultAgentRedecide    Fault = "agent-redecide"      // the agent decides again after NotApplied (sometimes on changed facts)
	FaultAgentRevoke      Fault = "agent-revoke"        // the agent revokes an unused capability
	FaultAgentSecondCap   Fault = "agent-second-capability"
	FaultAgentForgedWrite Fault = "agent-forged-write" // someone who read an execution id and epoch writes without the lease secret
)

// FaultProviderDecline: the provider commits the refund as declined (Stripe
// "failed", Meridian DECLINED): answered 2xx, nothing moved.
const FaultProviderDecline = Fault("provider-decline")

// FaultHostileFlood: for a few seconds someone presents 50 times a second
// against an operation a worker holds a lease on (hostile.go).
const FaultHostileFlood = Fault("hostile-flood")

// Faults lists every kind, in the order summaries give them.
var Faults = []Fault{
	FaultStoreReadFail, FaultStoreWriteFail, FaultStoreCommitLost, FaultStoreOutage,
	FaultProviderLoseResponse, FaultProviderHold, FaultProvider5xxBefore, FaultProvider5xxAfter,
	FaultProviderReject, FaultProviderDelay, FaultProviderDrop,
	FaultNetDialRefused, FaultNetLostRequest, FaultNetLostResponse, FaultNetSlow,
	FaultMsgDuplicate, FaultMsgRedeliver, FaultMsgReorder, FaultMsgAckLost, FaultMsgDelay,
	FaultMsgMalformed, FaultMsgUnreadable, FaultMsgReplay, FaultDLQResubmit, FaultPublishFail, FaultPublishLost,
	FaultCheckpointFail, FaultWorkerCrash, FaultWorkerFreeze, FaultServeRestart, FaultClockJump,
	FaultAgentRedecide, FaultAgentRevoke, FaultAgentSecondCap, FaultAgentForgedWrite,
	// Kinds added later go last: a spec's fault set names kinds by position.
	FaultProviderDecline,
	FaultStoreFailover, FaultStoreFailoverLossy,
	FaultHostileFlood,
}

// FaultSet is a set of fault kinds, one bit per index in Faults.
type FaultSet uint64

// AllFaults has every kind.
var AllFaults = FaultSet(1)<<len(Faults) - 1

func faultIndex(f Fault) int { return slices.Index(Faults, f) }

// Has reports whether f is in the set.
func (s FaultSet) Has(f Fault) bool {
	i := faultIndex(f)
	return i >= 0 && s&(1<<i) != 0
}

// With returns the set with f added.
func (s FaultSet) With(f Fault) FaultSet { return s | 1<<faultIndex(f) }

// Without returns the set with f removed.
func (s FaultSet) Without(f Fault) FaultSet { return s &^ (1 << faultIndex(f)) }

// List returns the kinds in the set, in Faults order.
func (s FaultSet) List() []Fault {
	var out []Fault
	for _, f := range Faults {
		if s.Has(f) {
			out = append(out, f)
		}
	}
	return out
}

// ParseFaults reads a comma-separated list of kinds. "all" (or "") is every
// kind, "none" none; a name may end in "*" to take every kind it starts
// ("store-*", "provider-*"), and a leading "-" removes kinds from what the
// list has so far ("all,-clock-jump").
func ParseFaults(list string) (FaultSet, error) {
	list = strings.TrimSpace(list)
	if list == "" || list == "all" {
		return AllFaults, nil
	}
	var s FaultSet
	for i, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		remove := strings.HasPrefix(item, "-")
		item = strings.TrimPrefix(item, "-")
		var matched FaultSet
		switch {
		case item == "all":
			matched = AllFaults
		case item == "none":
			matched = 0
		case strings.HasSuffix(item, "*"):
			for _, f := range Faults {
				if strings.HasPrefix(string(f), strings.TrimSuffix(item, "*")) {
					matched = matched.With(f)
				}
			}
			if matched == 0 {
				return 0, fmt.Errorf("faults: %q matches no fault kind", item)
			}
		case faultIndex(Fault(item)) >= 0:
			matched = matched.With(Fault(item))
		default:
			return 0, fmt.Errorf("faults: unknown fault kind %q (known: %s)", item, faultNames())
		}
		switch {
		case remove && i == 0:
			s = AllFaults &^ matched
		case remove:
			s &^= matched
		default:
			s |= matched
		}
	}
	return s, nil
}

func faultNames() string {
	names := make([]string, len(Faults))
	for i, f := range Faults {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}
