package simworld

import (
	"strings"
	"time"
)

// swarm is which faults one schedule switches on, and how often each
// strikes: a random subset of the spec's kinds at random rates, so that
// across schedules every combination gets its turn (swarm testing).
type swarm struct {
	enabled FaultSet
	rate    map[Fault]float64
	// weight of the faults the scheduler offers as actions of their own
	weight map[Fault]float64
	// scheduling (not faults): how often a store call hands the baton back,
	// and how often a provider call stops before sending or after the answer
	preempt, pause float64
}

// Base rates, per opportunity (a store call, a request, a publish, ...).
var baseRate = map[Fault]float64{
	FaultStoreReadFail: 0.04, FaultStoreWriteFail: 0.04, FaultStoreCommitLost: 0.05,
	FaultProviderLoseResponse: 0.15, FaultProviderHold: 0.12, FaultProvider5xxBefore: 0.12, FaultProvider5xxAfter: 0.15,
	FaultProviderReject: 0.12, FaultProviderDelay: 0.08, FaultProviderDrop: 0.12, FaultProviderDecline: 0.1,
	FaultNetDialRefused: 0.1, FaultNetLostRequest: 0.1, FaultNetLostResponse: 0.12, FaultNetSlow: 0.15,
	FaultMsgDuplicate: 0.15, FaultMsgAckLost: 0.1, FaultMsgDelay: 0.1, FaultMsgReorder: 0.3,
	FaultPublishFail: 0.08, FaultPublishLost: 0.08, FaultCheckpointFail: 0.08,
	FaultAgentRevoke: 0.15, FaultAgentSecondCap: 0.25,
}

// Action faults: offered by the scheduler as steps of their own, with these
// weights (a delivery weighs 6, a due timer 8).
var baseWeight = map[Fault]float64{
	FaultStoreOutage: 0.12, FaultMsgRedeliver: 0.2, FaultMsgMalformed: 0.08, FaultMsgUnreadable: 0.08, FaultMsgReplay: 0.2,
	FaultDLQResubmit: 0.2, FaultWorkerCrash: 0.15, FaultWorkerFreeze: 0.2, FaultServeRestart: 0.08, FaultClockJump: 0.1,
	FaultAgentForgedWrite: 0.2, FaultStoreFailover: 0.08, FaultStoreFailoverLossy: 0.1,
	FaultHostileFlood: 0.1,
}

// lateKinds are the kinds from which on the swarm's draws come from a
// stream of their own (lateSeed), so that a schedule in which none of them
// is on draws what it drew before they existed: the specs the docs quote
// replay unchanged.
var lateKinds = faultIndex(FaultHostileFlood)

// lateSeed derives the late kinds' stream from the schedule's seed.
func lateSeed(seed uint64) uint64 { return seed ^ 0xbb67ae8584caa73b }

func newSwarm(g, late *rng, allowed FaultSet) swarm {
	s := swarm{rate: map[Fault]float64{}, weight: map[Fault]float64{}}
	for i, f := range Faults {
		// Both draws are made for every kind, allowed or not, so that a
		// spec allowing fewer kinds (a shrunk one) draws the same for the
		// rest.
		src := g
		if i >= lateKinds {
			src = late
		}
		on, scale := src.chance(0.6), 0.3+1.5*src.r.Float64()
		if !allowed.Has(f) || !on {
			continue
		}
		s.enabled = s.enabled.With(f)
		if w, ok := baseWeight[f]; ok {
			s.weight[f], s.rate[f] = w*scale, 1
		} else if r, ok := baseRate[f]; ok {
			s.rate[f] = min(r*scale, 0.9)
		} else {
			s.rate[f] = 1 // behaviour switched on or off as a whole (agent-redecide)
		}
	}
	if g.chance(0.7) {
		s.preempt = 0.05 + 0.35*g.r.Float64()
	}
	if g.chance(0.5) {
		s.pause = 0.05 + 0.25*g.r.Float64()
	}
	return s
}

func (s swarm) on(f Fault) bool { return s.enabled.Has(f) }

func (s swarm) describe() string {
	if s.enabled == 0 {
		return "none"
	}
	var names []string
	for _, f := range s.enabled.List() {
		names = append(names, string(f))
	}
	return strings.Join(names, ",")
}

// clockJump draws how far time leaps: mostly minutes, sometimes past the
// stripe-v1 key retention (24 h).
func clockJump(g *rng) time.Duration {
	if g.chance(0.3) {
		return g.between(24*time.Hour, 30*time.Hour)
	}
	return g.between(time.Minute, 20*time.Minute)
}
