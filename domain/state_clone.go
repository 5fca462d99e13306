package domain

import "maps"

// Clone returns a deep copy of o, equal to it (a nil slice stays nil, and
// what o marks as shared the copy marks too, though it shares nothing):
// either may be evolved without touching the other. Fork is the cheap
// copy of a state to fold events into; Clone is for keeping one as it is.
func (o *Operation) Clone() *Operation {
	c := *o
	c.Decisions = append([]Decision(nil), o.Decisions...)
	c.Capabilities = make(map[CapabilityID]*Capability, len(o.Capabilities))
	for id, capability := range o.Capabilities {
		cp := *capability
		c.Capabilities[id] = &cp
	}
	if o.Executions != nil {
		c.Executions = make([]*Execution, len(o.Executions))
	}
	for i, x := range o.Executions {
		cx := *x
		cx.HeldLeases = append([]HeldLease(nil), x.HeldLeases...)
		c.Executions[i] = &cx
	}
	c.Messages = maps.Clone(o.Messages)
	if c.Messages == nil {
		c.Messages = map[MessageID]struct{}{}
	}
	return &c
}
