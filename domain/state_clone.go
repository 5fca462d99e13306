package domain

import "maps"

// Clone returns a deep copy of o, equal to it (a nil slice stays nil):
// nothing the copy holds is shared with o, so either may be evolved
// without touching the other. The command handler clones a state it
// shares (its cache's) before folding events into it.
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
