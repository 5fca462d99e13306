package audit

import (
	"fmt"
	"strings"
	"time"

	"opledger/domain"
)

// The lane model: an operation's timeline as a sequence diagram, with one
// lane per party of the story (the agent and the API, the queue, each
// worker, the ledger, the sweeper, the reconciler, each operator, the
// provider) and one or more steps per event, as the README's Thursday and
// Friday read. The console draws it as SVG, `audit replay --format
// mermaid` prints it as a Mermaid sequence diagram; both read this model,
// so they show the same arrows.

// LaneKind is what kind of party a lane stands for.
type LaneKind string

// The lane kinds, in the order the lanes are drawn.
const (
	LaneAPI        LaneKind = "api"        // the agent and the refund API: requests, decisions
	LaneQueue      LaneKind = "queue"      // the transport: messages carrying capabilities
	LaneWorker     LaneKind = "worker"     // one lane per worker (the lease owner's name)
	LaneLedger     LaneKind = "ledger"     // the ledger: what was recorded, what was refused
	LaneSweeper    LaneKind = "sweeper"    // lapsed leases
	LaneReconciler LaneKind = "reconciler" // Unknown → a fact, or a person
	LaneOperator   LaneKind = "operator"   // one lane per person who resolved or revoked
	LaneProvider   LaneKind = "provider"   // the payment provider
)

var laneOrder = []LaneKind{LaneAPI, LaneQueue, LaneWorker, LaneLedger, LaneSweeper, LaneReconciler, LaneOperator, LaneProvider}

// Lane is one column of the diagram.
type Lane struct {
	ID    string // stable within one diagram: "api", "worker:worker-a", "operator:olga"
	Kind  LaneKind
	Title string // what the lane is called: "agent / API", "worker-a", "operator olga"
}

// StepStyle is how an arrow is drawn.
type StepStyle string

// The step styles.
const (
	StepCall     StepStyle = "call"     // a request or a recorded fact: a solid arrow
	StepReply    StepStyle = "reply"    // an answer: a dashed arrow
	StepRefused  StepStyle = "refused"  // an answer refusing: a solid arrow ending in a cross
	StepInferred StepStyle = "inferred" // implied by an event, not recorded itself: dashed, said so
)

// StepTone says how a step reads: the console colours it.
type StepTone string

// The tones.
const (
	ToneNormal StepTone = ""
	ToneOK     StepTone = "ok"    // a definite outcome that completed
	ToneWarn   StepTone = "warn"  // Unknown, a lapsed lease, an escalation
	ToneAlert  StepTone = "alert" // a refusal, a replay suspected
)

// Step is one arrow of the diagram, caused by one event.
type Step struct {
	Row     int   // index into the rows the diagram was built from
	Version int64 // the event's stream version
	Time    time.Time
	Event   string
	From    string // lane id
	To      string // lane id
	Label   string // what the arrow says, short
	Note    string // more, for a tooltip or a second line (may be long)
	Style   StepStyle
	Tone    StepTone
}

// Sequence is an operation's timeline as lanes and steps, in stream order.
type Sequence struct {
	Lanes []Lane
	Steps []Step
}

// Lane returns the lane with id, and whether there is one.
func (s Sequence) Lane(id string) (Lane, bool) {
	for _, l := range s.Lanes {
		if l.ID == id {
			return l, true
		}
	}
	return Lane{}, false
}

// SequenceOf builds the diagram of rows (from Replay). Only the lanes some
// step uses are kept, in laneOrder, workers and operators in the order
// they first appear.
func SequenceOf(rows []TimelineRow) Sequence {
	b := &sequenceBuilder{used: map[string]bool{}}
	for i, r := range rows {
		b.row(i, r)
	}
	return Sequence{Lanes: b.lanes(), Steps: b.steps}
}

type sequenceBuilder struct {
	steps     []Step
	used      map[string]bool
	workers   []string // lane ids, first appearance first
	operators []string
}

const (
	laneAPI        = "api"
	laneQueue      = "queue"
	laneLedger     = "ledger"
	laneSweeper    = "sweeper"
	laneReconciler = "reconciler"
	laneProvider   = "provider"
)

func (b *sequenceBuilder) worker(name string) string {
	if name == "" {
		name = "worker"
	}
	id := "worker:" + name
	if !b.used[id] {
		b.workers = append(b.workers, id)
	}
	return id
}

func (b *sequenceBuilder) operator(name string) string {
	if name == "" {
		name = "operator"
	}
	id := "operator:" + name
	if !b.used[id] {
		b.operators = append(b.operators, id)
	}
	return id
}

// add appends a step of row i.
func (b *sequenceBuilder) add(i int, r TimelineRow, from, to string, style StepStyle, tone StepTone, label, note string) {
	b.used[from], b.used[to] = true, true
	b.steps = append(b.steps, Step{Row: i, Version: r.Version, Time: r.Time, Event: r.Event, From: from, To: to,
		Label: label, Note: note, Style: style, Tone: tone})
}

func (b *sequenceBuilder) lanes() []Lane {
	var out []Lane
	for _, kind := range laneOrder {
		switch kind {
		case LaneWorker:
			for _, id := range b.workers {
				out = append(out, Lane{ID: id, Kind: kind, Title: strings.TrimPrefix(id, "worker:")})
			}
		case LaneOperator:
			for _, id := range b.operators {
				out = append(out, Lane{ID: id, Kind: kind, Title: "operator " + strings.TrimPrefix(id, "operator:")})
			}
		default:
			id := string(kind)
			if b.used[id] {
				out = append(out, Lane{ID: id, Kind: kind, Title: laneTitles[kind]})
			}
		}
	}
	return out
}

var laneTitles = map[LaneKind]string{
	LaneAPI: "agent / API", LaneQueue: "queue", LaneLedger: "ledger", LaneSweeper: "sweeper",
	LaneReconciler: "reconciler", LaneProvider: "provider",
}

// row turns one event into its steps.
func (b *sequenceBuilder) row(i int, r TimelineRow) {
	switch r.Event {
	case domain.TypeOperationRequested:
		what, _, _ := strings.Cut(r.Detail, ", correlation")
		b.add(i, r, laneAPI, laneLedger, StepCall, ToneNormal, "OperationRequested: "+what, r.Detail)
	case domain.TypeDecided:
		tone := ToneNormal
		if r.Outcome != string(domain.Allowed) {
			tone = ToneWarn
		}
		b.add(i, r, laneAPI, laneLedger, StepCall, tone, "Decided "+r.Outcome+attempt(r.Detail), r.Detail)
	case domain.TypeCapabilityIssued:
		b.add(i, r, laneLedger, laneQueue, StepCall, ToneNormal, "CapabilityIssued "+string(r.Capability)+", published", r.Detail)
	case domain.TypeCapabilityRevoked:
		b.add(i, r, b.operator(r.Actor), laneLedger, StepCall, ToneWarn, "CapabilityRevoked "+string(r.Capability), r.Detail)
	case domain.TypeClaimed:
		w := b.worker(r.Actor)
		b.add(i, r, laneQueue, w, StepCall, ToneNormal, "deliver "+string(r.Message), "")
		b.add(i, r, w, laneLedger, StepCall, ToneNormal,
			fmt.Sprintf("Claimed %s: %s, epoch %d", r.Capability, r.Execution, r.Epoch), r.Detail)
		if key := after(r.Detail, "provider key "); key != "" {
			b.add(i, r, w, laneProvider, StepInferred, ToneNormal, "POST refund, key "+key,
				"the claim hands the worker this key to call the provider with; the call itself is not an event")
		}
	case domain.TypeDeliveryDuplicated:
		w := b.worker(r.Actor)
		b.add(i, r, laneQueue, w, StepCall, ToneNormal, "redeliver "+string(r.Message), "")
		b.add(i, r, w, laneLedger, StepCall, ToneNormal, "DuplicateDelivery: recorded, nothing executed", r.Detail)
	case domain.TypePresentationRejected:
		w := b.worker(r.Actor)
		b.add(i, r, laneQueue, w, StepCall, ToneNormal, "deliver "+string(r.Message), "")
		b.add(i, r, w, laneLedger, StepCall, ToneNormal, "claim "+string(r.Capability), "")
		label := "refused: " + r.Outcome + " (" + r.Reason + ")"
		if strings.Contains(r.Detail, "replay suspected") {
			label += ", replay suspected"
		}
		b.add(i, r, laneLedger, w, StepRefused, ToneAlert, label, r.Detail)
	case domain.TypeLeaseRenewed:
		b.add(i, r, b.worker(r.Actor), laneLedger, StepCall, ToneNormal, fmt.Sprintf("LeaseRenewed, epoch %d", r.Epoch), r.Detail)
	case domain.TypeOutcomeRecorded:
		b.add(i, r, b.worker(r.Actor), laneLedger, StepCall, outcomeTone(r.Outcome), "OutcomeRecorded "+r.Outcome, r.Detail)
	case domain.TypeOutcomeUnknown:
		b.add(i, r, b.worker(r.Actor), laneLedger, StepCall, ToneWarn, "OutcomeUnknown", r.Detail)
	case domain.TypeLeaseLapsed:
		b.add(i, r, laneSweeper, laneLedger, StepCall, ToneWarn,
			fmt.Sprintf("LeaseLapsed: %s Unknown, epoch %d→%d", r.Execution, r.EpochFrom, r.Epoch), r.Detail)
	case domain.TypeLateOutcomeRecorded:
		b.add(i, r, b.worker(r.Actor), laneLedger, StepCall, outcomeTone(r.Outcome), "LateOutcomeRecorded "+r.Outcome, r.Detail)
	case domain.TypeReconciled:
		b.reconciled(i, r)
	case domain.TypeEscalated:
		b.add(i, r, laneReconciler, laneLedger, StepCall, ToneWarn, "Escalated: "+r.Reason, r.Detail)
	case domain.TypeWriteRefused:
		w := b.worker(r.Actor)
		command, _, _ := strings.Cut(r.Detail, " refused")
		b.add(i, r, w, laneLedger, StepCall, ToneNormal, fmt.Sprintf("%s, epoch %d", command, r.Epoch), "")
		b.add(i, r, laneLedger, w, StepRefused, ToneAlert, "WriteRefused ("+r.Reason+")", r.Detail)
	case domain.TypeRefusalsSummarized:
		b.add(i, r, laneLedger, laneLedger, StepRefused, ToneAlert, fmt.Sprintf("RefusalsSummarized: %d refusals counted (%s)", r.Count, r.Reason), r.Detail)
	default: // an event this build does not draw: on the ledger, named
		b.add(i, r, laneLedger, laneLedger, StepCall, ToneNormal, r.Event, r.Detail)
	}
}

func (b *sequenceBuilder) reconciled(i int, r TimelineRow) {
	label := "Reconciled " + r.Outcome
	ref := after(r.Detail, "provider reference ")
	if j := strings.IndexByte(ref, ';'); j >= 0 {
		ref = ref[:j]
	}
	switch domain.ReconcileMethod(r.Reason) {
	case domain.MethodOperator:
		b.add(i, r, b.operator(r.Actor), laneLedger, StepCall, outcomeTone(r.Outcome), label+" (operator's evidence)", r.Detail)
		return
	case domain.MethodProviderResend:
		b.add(i, r, laneReconciler, laneProvider, StepCall, ToneNormal, "resend under the original key", "")
	default:
		b.add(i, r, laneReconciler, laneProvider, StepCall, ToneNormal, "look up by operation id", "")
	}
	answer := "answer: " + r.Outcome
	if ref != "" {
		answer = "found " + ref
	}
	b.add(i, r, laneProvider, laneReconciler, StepReply, ToneNormal, answer, "")
	b.add(i, r, laneReconciler, laneLedger, StepCall, outcomeTone(r.Outcome), label+" ("+r.Reason+")", r.Detail)
}

func outcomeTone(outcome string) StepTone {
	if outcome == string(domain.Completed) {
		return ToneOK
	}
	return ToneNormal
}

// after returns the word that follows marker in s (up to a space, comma or
// semicolon), or "".
func after(s, marker string) string {
	_, rest, found := strings.Cut(s, marker)
	if !found {
		return ""
	}
	if j := strings.IndexAny(rest, " ,;"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// attempt reads " (attempt N)" out of a Decided row's detail.
func attempt(detail string) string {
	if n := after(detail, "for attempt "); n != "" {
		return " (attempt " + n + ")"
	}
	return ""
}
