package audit

import (
	"strings"

	"opledger/domain"
)

// The checks on presentations that did not open an execution: duplicate
// deliveries and refusals (invariant 7).

// deliveryDuplicated: a duplicate is a message this operation has seen; a
// new message recorded as a duplicate is a presentation nobody judged (I7).
func (v *verifier) deliveryDuplicated(ev domain.DeliveryDuplicated) {
	st := v.st
	m := v.hash.of(string(ev.MessageID))
	if !st.presented.has(m) {
		v.emit(I7RefusalRecorded, nil, "message %s is recorded as a duplicate delivery but was never presented to this operation: a new presentation is judged and its refusal recorded",
			ev.MessageID)
	}
	if ev.ExecutionID != "" {
		v.execution(ev.ExecutionID)
	}
	if st.duplicated.get(m) == nil {
		st.duplicated.put(m, ev.SeenAt.UnixNano())
	}
}

// presentationRejected: I7 (fields; replay suspected for spent authority on
// a new message). A refusal decided before the claim that spent the
// capability may be appended after it: the evidence stream is fenced by
// the operation's event it was decided on, not by the operation's later
// ones (a worker that froze between its decision and its append). A
// refusal decided after the capability was spent is the violation; one
// decided at the very time of the spending claim cannot be ordered by the
// ledger's clock and is taken as decided before it (the simulator's
// virtual clock makes such ties common).
func (v *verifier) presentationRejected(ev domain.PresentationRejected) {
	st := v.st
	v.refusalFields(ev)
	if ev.OperationID != v.op {
		v.emit(I7RefusalRecorded, nil, "refusal names operation %s on the stream of %s", ev.OperationID, v.op)
	}
	m := v.hash.of(string(ev.MessageID))
	if c := st.caps.get(v.hash.of(string(ev.CapabilityID))); c != nil && c.state == capConsumed && c.at < ev.RejectedAt.UnixNano() &&
		!st.presented.has(m) && !ev.ReplaySuspected {
		v.emit(I7RefusalRecorded, []int64{c.version}, "spent capability %s presented on new message %s is not marked replay_suspected",
			ev.CapabilityID, ev.MessageID)
	}
	st.presented.add(m)
}

// refusalFields checks what every recorded refusal carries (I7). The one
// refusal that may lack a capability is a malformed delivery from which none
// could be read (not JSON, no capability_id, a member refused before it):
// its evidence carries what could be read, and the message id.
func (v *verifier) refusalFields(ev domain.PresentationRejected) {
	var missing []string
	if ev.CapabilityID == "" && ev.Reason != domain.ReasonDeliveryMalformed {
		missing = append(missing, "capability")
	}
	if ev.MessageID == "" {
		missing = append(missing, "message")
	}
	if ev.Reason == "" {
		missing = append(missing, "reason")
	}
	if len(missing) > 0 {
		v.emit(I7RefusalRecorded, nil, "refusal recorded without its %s", strings.Join(missing, ", "))
	}
	if ev.ExecutionAttempted {
		v.emit(I7RefusalRecorded, nil, "refusal of message %s records execution_attempted=true: a refused presentation executes nothing", ev.MessageID)
	}
}
