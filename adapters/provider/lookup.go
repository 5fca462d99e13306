package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"opledger/domain"
)

// LookupByReference returns the effects the provider holds under our own
// reference op (possibly none), for a profile with a ReferenceField; other
// profiles get domain.ErrReadUnsupported and nothing is sent. It has no side
// effect, so a failed lookup is retried like a send (bounded by
// MaxAttempts, ctx honoured). Any failure is an error, never an empty
// answer: the caller must read an error as "the provider could not tell".
func (c *Client) LookupByReference(ctx context.Context, op domain.OperationID) ([]domain.ProviderEffect, error) {
	if op == "" {
		return nil, errors.New("look up by reference: empty operation id")
	}
	path := c.wire.lookupPath(op)
	if path == "" {
		return nil, fmt.Errorf("look up by reference: profile %s: %w", c.profile.Name, domain.ErrReadUnsupported)
	}
	var effects []domain.ProviderEffect
	err := c.read(ctx, Send{Kind: SendLookup, OperationID: op}, c.target(path), func(status int, body []byte) (string, bool, readVerdict) {
		var v readVerdict
		effects, v = c.wire.readLookup(op, status, body)
		return fmt.Sprintf("%d effects", len(effects)), len(effects) > 0, v
	})
	if err != nil {
		return nil, fmt.Errorf("look up effects of %s: %w", op, err)
	}
	return effects, nil
}

// RetrieveByKey returns the effect the provider made under key, and found =
// false when it answers, as documented, that it holds none; for a profile
// without RetrieveByKey it returns domain.ErrReadUnsupported and sends
// nothing. Retried and bounded like LookupByReference; any failure is an
// error, never "not found".
func (c *Client) RetrieveByKey(ctx context.Context, key domain.IdempotencyKey) (domain.ProviderEffect, bool, error) {
	if key == "" {
		return domain.ProviderEffect{}, false, errors.New("retrieve by key: empty idempotency key")
	}
	path := c.wire.retrievePath(key)
	if path == "" {
		return domain.ProviderEffect{}, false, fmt.Errorf("retrieve by key: profile %s: %w", c.profile.Name, domain.ErrReadUnsupported)
	}
	var (
		effect domain.ProviderEffect
		found  bool
	)
	err := c.read(ctx, Send{Kind: SendRetrieve, IdempotencyKey: key}, c.target(path), func(status int, body []byte) (string, bool, readVerdict) {
		var v readVerdict
		effect, found, v = c.wire.readRetrieve(key, status, body)
		if !found {
			return "none under the key", false, v
		}
		return fmt.Sprintf("%s: %s", effect.Reference, effect.State), true, v
	})
	if err != nil {
		return domain.ProviderEffect{}, false, fmt.Errorf("retrieve by key %s: %w", key, err)
	}
	return effect, found, nil
}

// read asks target with GET until an answer parses or a failure is not
// worth another try, at most MaxAttempts times; every try is reported as s
// (parse says whether the answer held what was asked for).
func (c *Client) read(ctx context.Context, s Send, target string, parse func(status int, body []byte) (string, bool, readVerdict)) error {
	header := c.baseHeader()
	var lastErr error
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		if attempt > 1 {
			if err := c.wait(ctx, c.backoff(attempt-1)); err != nil {
				return fmt.Errorf("%w (after: %w)", err, lastErr)
			}
		}
		if err := ctx.Err(); err != nil {
			return errors.Join(err, lastErr)
		}
		start := c.cfg.Now()
		x := c.exchange(ctx, http.MethodGet, target, nil, header)
		var v readVerdict
		detail, found := "", false
		if x.fail != nil {
			v = readVerdict{err: errors.New(x.fail.detail), retryable: x.fail.retryable}
		} else {
			detail, found, v = parse(x.status, x.body)
		}
		sent := s
		sent.Attempt, sent.Outcome, sent.StatusCode, sent.Retryable = attempt, domain.Completed, x.status, v.retryable
		sent.Latency, sent.Detail, sent.NotFound = c.cfg.Now().Sub(start), detail, !found
		if v.err != nil {
			sent.Outcome, sent.Detail, sent.NotFound = domain.Unknown, v.err.Error(), false
			if x.fail != nil {
				sent.Outcome, sent.StatusCode = x.fail.outcome, x.fail.status
			}
		}
		c.report(ctx, sent)
		if v.err == nil {
			return nil
		}
		lastErr = v.err
		if !v.retryable {
			break
		}
	}
	return lastErr
}
