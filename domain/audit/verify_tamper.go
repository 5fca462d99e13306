package audit

import (
	"context"
	"errors"
	"fmt"

	"opledger/domain"
	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// tamperChecks are Verify's tamper-evidence checks: every stream's hash
// chain, the store's stream heads, and the log against the digests given.
type tamperChecks struct {
	v           *verifier
	chain       *chainChecker
	digests     []*digestChecker
	consistency *consistency
}

// validateDigests checks the digest options and the digests' signatures.
func (o *VerifyOptions) validateDigests() error {
	if o.Digest == nil {
		if o.Previous != nil {
			return errors.New("audit: verify options: Previous needs Digest (the later digest it must extend)")
		}
		return nil
	}
	if o.From != nil || o.To != nil {
		return errors.New("audit: verify options: a digest is checked against the log from its start: From and To cannot be set with Digest")
	}
	if err := o.Digest.CheckSignature(o.DigestKey); err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if o.Previous != nil {
		if err := o.Previous.CheckSignature(o.DigestKey); err != nil {
			return fmt.Errorf("previous digest: %w", err)
		}
		if o.Previous.TreeSize > o.Digest.TreeSize {
			return fmt.Errorf("audit: verify options: the previous digest covers %d events, more than the later one's %d: swap them", o.Previous.TreeSize, o.Digest.TreeSize)
		}
	}
	return nil
}

func newTamperChecks(v *verifier, opts VerifyOptions) (*tamperChecks, error) {
	t := &tamperChecks{v: v, chain: newChainChecker(v)}
	if opts.Digest != nil {
		t.digests = append(t.digests, newDigestChecker(opts.Digest, "digest"))
	}
	if opts.Previous != nil {
		t.digests = append(t.digests, newDigestChecker(opts.Previous, "previous"))
		c, err := newConsistency(opts.Previous.TreeSize, opts.Digest.TreeSize)
		if err != nil {
			return nil, err
		}
		t.consistency = c
	}
	return t, nil
}

// check runs the chain check on one event of the range and feeds it to
// the digest comparisons.
func (t *tamperChecks) check(ctx context.Context, rec *eventstore.RecordedEvent, d decodedEvent) error {
	suspect, err := t.chain.check(ctx, rec, d)
	if err != nil {
		return err
	}
	if len(t.digests) == 0 {
		return nil
	}
	// An event whose hash cannot be recomputed takes a leaf no digest has.
	recomputed, stored := d.link.Hash, d.link.Hash
	if d.linkErr != nil {
		recomputed, stored = chain.Hash{}, chain.Hash{}
	} else if d.link.Hashed {
		stored = d.link.Stored
	}
	for _, dc := range t.digests {
		dc.add(rec, recomputed, stored, suspect)
	}
	if t.consistency != nil {
		t.consistency.add(recomputed)
	}
	return nil
}

// finish runs the checks that need the whole range: stream heads, and the
// verdict on each digest.
func (t *tamperChecks) finish(ctx context.Context) error {
	if err := t.chain.checkHeads(ctx); err != nil {
		return err
	}
	results := make([]DigestCheck, len(t.digests))
	for i, dc := range t.digests {
		results[i] = dc.finish()
		if dep := results[i].Departure; dep != nil {
			t.v.emitDigest(D1MatchesDigest, dep, "the log departs from the %s of %d events (%s, key %s): %s", roleLabel(dc.role), dc.d.TreeSize, dc.d.Time, dc.d.KeyID, dep.Message)
		}
	}
	if t.consistency != nil {
		cur, prev := &results[0], &results[1]
		switch {
		case cur.Matches && prev.Matches:
			p, err := t.consistency.prove(t.digests[1].d.root, t.digests[0].d.root)
			ok := err == nil
			prev.Extends, prev.ConsistencyProof = &ok, p
			if !ok {
				t.v.emitDigest(D2DigestsConsistent, nil, "the log matches both digests but no consistency proof between them verifies: %v", err)
			}
		case cur.Matches:
			no := false
			prev.Extends = &no
			t.v.emitDigest(D2DigestsConsistent, prev.Departure, "the later digest (%d events, %s) does not extend the previous one (%d events, %s): the log the later one covers was rewritten before it was signed",
				cur.TreeSize, cur.Time, prev.TreeSize, prev.Time)
		}
	}
	t.v.report.Digests = results
	return nil
}

// emitFor records a violation by rec (not necessarily an operation event).
func (v *verifier) emitFor(rec *eventstore.RecordedEvent, inv Invariant, msg string) {
	op, _ := domain.OperationIDFromStream(rec.StreamID)
	v.addViolation(Violation{Invariant: inv.ID, Name: inv.Name, Operation: op, Stream: rec.StreamID,
		Position: rec.Position.String(), Version: rec.Version, Event: rec.Type, Message: msg})
}

// emitHead records an H3 violation about a stream's recorded head.
func (v *verifier) emitHead(stream string, version int64, format string, args ...any) {
	op, _ := domain.OperationIDFromStream(stream)
	v.addViolation(Violation{Invariant: H3HeadsMatch.ID, Name: H3HeadsMatch.Name, Operation: op, Stream: stream,
		Version: version, Event: "(stream head)", Message: fmt.Sprintf(format, args...)})
}

// emitDigest records a D1 or D2 violation, placed at dep when there is one.
func (v *verifier) emitDigest(inv Invariant, dep *Departure, format string, args ...any) {
	viol := Violation{Invariant: inv.ID, Name: inv.Name, Event: "(digest)", Message: fmt.Sprintf(format, args...)}
	if dep != nil {
		viol.Stream, viol.Version, viol.Position = dep.Stream, dep.Version, dep.FromPosition
	}
	v.addViolation(viol)
}

// addViolation counts a violation and lists it, up to MaxViolations.
func (v *verifier) addViolation(viol Violation) {
	v.report.ViolationCount++
	v.report.ByInvariant[viol.Invariant]++
	if len(v.report.Violations) < v.opts.MaxViolations {
		v.report.Violations = append(v.report.Violations, viol)
	}
}
