package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Outcome is what an execution's one request amounted to.
type Outcome string

const (
	// Completed: the executor reports the effect happened.
	Completed Outcome = "Completed"
	// NotApplied: affirmative evidence the effect did not happen (a
	// documented rejection before execution, or nothing sent).
	NotApplied Outcome = "NotApplied"
	// Unknown: it cannot be told. When in doubt, Unknown: the reconciler
	// asks the provider.
	Unknown Outcome = "Unknown"
)

// Definite reports whether o is Completed or NotApplied.
func (o Outcome) Definite() bool { return o == Completed || o == NotApplied }

// Result is an executor's call classified.
type Result struct {
	Outcome Outcome
	// ProviderReference is the provider's id of the effect, when it gave one.
	ProviderReference string
	// Detail says why, in words.
	Detail string
}

// The API's bounds on what an outcome says (docs/api.md).
const (
	maxReferenceBytes = 256
	maxDetailBytes    = 2000
)

// ErrOutcomeMayBeRecorded wraps the refusal that answered an outcome sent
// again after an ambiguous answer (a 503, or none): the earlier send may
// have been recorded, and the refusal be the ledger's answer to the
// execution it ended. Nothing more is sent either way.
var ErrOutcomeMayBeRecorded = errors.New("an earlier send of this outcome may have been recorded")

// RecordOutcome records r under x's lease: POST /v1/executions/{id}/outcome
// with its epoch and secret. A 503, a 429 or no answer sends the same body
// again (capped back-off, Retry-After honoured up to RetryBackoffMax),
// renewing the lease every third of it meanwhile, while the lease's
// deadline has not passed and ctx lasts: a known result is worth the wait.
// At most LeaseDuration/RetryBackoff+1 sends. Never after a 409: the
// refusal is returned (errors.Is(err, ErrLeaseLost): send a definite result
// again with RecordLateOutcome; ErrLeaseNotHeld: the write was not yours,
// stop). Text that serve would refuse is escaped and cut first.
func (c *Client) RecordOutcome(ctx context.Context, x *Execution, r Result) error {
	secret, err := x.leaseSecret()
	if err != nil {
		return err
	}
	r = safeResult(r)
	body := mustJSON(map[string]any{
		"lease_epoch": x.LeaseEpoch, "lease_secret": secret, "outcome": r.Outcome,
		"provider_reference": r.ProviderReference, "detail": r.Detail,
	})
	var ambiguous error
	backoff := c.cfg.RetryBackoff
	for try := 1; ; try++ {
		err := c.do(ctx, "POST", "/v1/executions/"+x.ExecutionID+"/outcome", body, &struct{}{})
		switch {
		case err == nil:
			return nil
		case !retryable(err) || try >= c.maxTries():
			return recordErr(x, "outcome", err, ambiguous)
		}
		ambiguous = err
		if last := x.Deadline().Add(-c.cfg.LeaseDuration); c.cfg.Now().Sub(last) >= c.cfg.LeaseDuration/3 {
			if rerr := c.RenewLease(ctx, x); rerr != nil && !retryable(rerr) {
				return recordErr(x, "outcome", rerr, nil)
			}
		}
		if !c.cfg.Now().Before(x.Deadline()) {
			return fmt.Errorf("record outcome of %s: %w: %w", x.ExecutionID, ErrLeaseExpired, err)
		}
		c.log.WarnContext(ctx, "outcome not recorded yet; sending it again while the lease allows", "execution", x, "try", try, "err", err)
		if !c.wait(ctx, c.pauseFor(err, backoff)) {
			return fmt.Errorf("record outcome of %s: %w (last answer: %w)", x.ExecutionID, ctx.Err(), err)
		}
		backoff = min(2*backoff, c.cfg.RetryBackoffMax)
	}
}

// RecordLateOutcome hands in r as late evidence for x, whose lease was lost
// while its request was in flight: the same epoch and secret, late:true.
// Only a definite result is sent (an Unknown one is left to the reconciler).
// A Completed settles an Unknown or Escalated execution; a NotApplied is
// kept as evidence and refused (ErrLateOutcomeNotApplied). Sent again on a
// 503, a 429 or no answer, at most LeaseDuration/RetryBackoff+1 times while
// ctx lasts; never after a 409.
func (c *Client) RecordLateOutcome(ctx context.Context, x *Execution, r Result) error {
	if !r.Outcome.Definite() {
		return fmt.Errorf("record late outcome of %s: only a definite outcome is late evidence, not %q", x.ExecutionID, r.Outcome)
	}
	secret, err := x.leaseSecret()
	if err != nil {
		return err
	}
	r = safeResult(r)
	body := mustJSON(map[string]any{
		"lease_epoch": x.LeaseEpoch, "lease_secret": secret, "outcome": r.Outcome,
		"provider_reference": r.ProviderReference, "detail": r.Detail, "late": true,
	})
	var ambiguous error
	backoff := c.cfg.RetryBackoff
	for try := 1; ; try++ {
		err := c.do(ctx, "POST", "/v1/executions/"+x.ExecutionID+"/outcome", body, &struct{}{})
		switch {
		case err == nil:
			return nil
		case !retryable(err) || try >= c.maxTries():
			return recordErr(x, "late outcome", err, ambiguous)
		}
		ambiguous = err
		if !c.wait(ctx, c.pauseFor(err, backoff)) {
			return fmt.Errorf("record late outcome of %s: %w (last answer: %w)", x.ExecutionID, ctx.Err(), err)
		}
		backoff = min(2*backoff, c.cfg.RetryBackoffMax)
	}
}

// recordErr is the error of a write that ended on err; after an ambiguous
// earlier answer, a refusal may be the ledger's answer to that send's
// success, and says so.
func recordErr(x *Execution, what string, err, ambiguous error) error {
	var e *Error
	if ambiguous != nil && errors.As(err, &e) && e.Refusal() {
		return fmt.Errorf("record %s of %s: %w (%w: %v)", what, x.ExecutionID, err, ErrOutcomeMayBeRecorded, ambiguous)
	}
	return fmt.Errorf("record %s of %s: %w", what, x.ExecutionID, err)
}

// maxTries bounds every sending loop whatever the clock says: each pause is
// at least RetryBackoff, and recording under a lease stops at its deadline,
// so no more sends than this fit in one lease.
func (c *Client) maxTries() int { return int(c.cfg.LeaseDuration/c.cfg.RetryBackoff) + 1 }

// Recorded says how an outcome entered the ledger.
type Recorded string

const (
	NotRecorded     Recorded = ""
	RecordedOutcome Recorded = "outcome"
	RecordedLate    Recorded = "late-outcome"
)

// Record records r as the protocol says (docs/api.md, "A worker in any
// language", step 4): under the lease (RecordOutcome); when the lease is
// lost (lost, from Lease.Stop, is a lease.lost refusal, or RecordOutcome is
// refused lease.lost), a definite result as late evidence
// (RecordLateOutcome); an Unknown one is left to the reconciler, and a
// lease.not-held means the write was not ours: nothing more is sent.
func (c *Client) Record(ctx context.Context, x *Execution, r Result, lost error) (Recorded, error) {
	var e *Error
	if lost == nil || !errors.As(lost, &e) || !e.Refusal() {
		err := c.RecordOutcome(ctx, x, r)
		if err == nil {
			return RecordedOutcome, nil
		}
		if !errors.Is(err, ErrLeaseLost) {
			return NotRecorded, err
		}
		lost = err
	}
	if !errors.Is(lost, ErrLeaseLost) || !r.Outcome.Definite() {
		return NotRecorded, lost
	}
	if err := c.RecordLateOutcome(ctx, x, r); err != nil {
		if errors.Is(lost, ErrOutcomeMayBeRecorded) {
			err = fmt.Errorf("%w; before it: %w", err, lost)
		}
		return NotRecorded, err
	}
	return RecordedLate, nil
}

// safeResult escapes and cuts what serve would refuse in r's texts (control
// and format characters, invalid UTF-8, over-long text), so that a
// provider's hostile words never cost a definite outcome; the detail says
// when it did.
func safeResult(r Result) Result {
	ref, refAltered := evidenceText(r.ProviderReference, maxReferenceBytes)
	detail, detailAltered := evidenceText(r.Detail, maxDetailBytes)
	if refAltered || detailAltered {
		const note = "[provider text escaped] "
		detail, _ = evidenceText(r.Detail, maxDetailBytes-len(note))
		detail = note + detail
	}
	r.ProviderReference, r.Detail = ref, detail
	return r
}

// evidenceText is s with every rune serve refuses replaced by its Go escape
// (\x00, \u202e, \xff for a byte that is not UTF-8), cut to at most max
// bytes on a rune boundary; altered reports whether anything changed.
func evidenceText(s string, max int) (safe string, altered bool) {
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		piece := s[i : i+size]
		switch {
		case r == utf8.RuneError && size <= 1:
			piece, altered = fmt.Sprintf(`\x%02x`, s[i]), true
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || unicode.Is(unicode.Cf, r):
			piece, altered = strings.Trim(strconv.QuoteRuneToASCII(r), "'"), true
		}
		if b.Len()+len(piece) > max {
			return b.String(), true
		}
		b.WriteString(piece)
	}
	return b.String(), altered
}
