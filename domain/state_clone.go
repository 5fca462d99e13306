package domain

import "maps"

// Clone returns a deep copy of o: nothing the copy holds is shared with o,
// so either may be evolved without touching the other. The command
// handler's state cache hands out clones.
func (o *Operation) Clone() *Operation {
	c := *o
	c.Decisions = append([]Decision(nil), o.Decisions...)
	c.Capabilities = make(map[CapabilityID]*Capability, len(o.Capabilities))
	for id, capability := range o.Capabilities {
		cp := *capability
		c.Capabilities[id] = &cp
	}
	c.Executions = make([]*Execution, len(o.Executions))
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
