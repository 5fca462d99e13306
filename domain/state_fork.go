package domain

import "maps"

// Fork returns a state equal to o that shares everything o holds, for
// Evolve to fold events into while o stays as it is: Evolve never changes
// a record a state holds (a Capability, an Execution) but replaces it with
// a changed copy, and copies a slice or map the fork shares (the
// decisions, the capabilities, the executions, the message set) before
// its first change to it, sharing the rest. So a fork costs what its
// events change, never a copy of the whole state.
//
// o must be frozen, changed by no one after (the command handler forks
// the states its cache holds, which are): any number of forks of it may
// be taken and evolved at once, each by its own goroutine. Copy a state
// only with Fork or Clone, never by value: a copy by value does not know
// what it shares.
func (o *Operation) Fork() *Operation {
	f := *o
	f.shares = sharesAll
	return &f
}

// sharedParts marks the slices and maps of a state it may share with
// another (the state it was forked from, other forks of that): Evolve
// copies such a part before changing it, and owns the copy after.
type sharedParts uint8

const (
	sharesDecisions sharedParts = 1 << iota
	sharesCapabilities
	sharesExecutions
	sharesMessages

	sharesAll = sharesDecisions | sharesCapabilities | sharesExecutions | sharesMessages
)

// own reports whether o may change part in place, and marks it owned:
// the caller copies a shared part before changing it.
func (o *Operation) own(part sharedParts) bool {
	owned := o.shares&part == 0
	o.shares &^= part
	return owned
}

// addDecision appends d to the decisions.
func (o *Operation) addDecision(d Decision) {
	if !o.own(sharesDecisions) {
		o.Decisions = append(make([]Decision, 0, len(o.Decisions)+1), o.Decisions...)
	}
	o.Decisions = append(o.Decisions, d)
}

// putCapability holds c as its id's capability, in place of any before:
// c must be a record no state holds yet.
func (o *Operation) putCapability(c *Capability) {
	if !o.own(sharesCapabilities) || o.Capabilities == nil {
		m := make(map[CapabilityID]*Capability, len(o.Capabilities)+1)
		maps.Copy(m, o.Capabilities)
		o.Capabilities = m
	}
	o.Capabilities[c.ID] = c
}

// addExecution appends x to the executions: x must be a record no state
// holds yet.
func (o *Operation) addExecution(x *Execution) {
	if !o.own(sharesExecutions) {
		o.Executions = append(make([]*Execution, 0, len(o.Executions)+1), o.Executions...)
	}
	o.Executions = append(o.Executions, x)
}

// putExecution holds x as the i-th execution: x must be a record no state
// holds yet.
func (o *Operation) putExecution(i int, x *Execution) {
	if !o.own(sharesExecutions) {
		o.Executions = append([]*Execution(nil), o.Executions...)
	}
	o.Executions[i] = x
}

// addMessage adds id to the message set.
func (o *Operation) addMessage(id MessageID) {
	if _, ok := o.Messages[id]; ok {
		return
	}
	if !o.own(sharesMessages) || o.Messages == nil {
		m := make(map[MessageID]struct{}, len(o.Messages)+1)
		maps.Copy(m, o.Messages)
		o.Messages = m
	}
	o.Messages[id] = struct{}{}
}
