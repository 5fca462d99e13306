package transport

import (
	"errors"
	"fmt"
	"log/slog"

	"opledger/domain/clock"
	"opledger/domain/feed"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/eventstore/follow"
)

// RelaysConfig configures StandardRelays. Store, Checkpoints and Publisher
// are required; the rest is optional.
type RelaysConfig struct {
	Store       eventstore.Store
	Checkpoints Checkpoints
	Publisher   Publisher
	// SetAside keeps events a relay could not turn into messages (default:
	// one in-memory store for both relays).
	SetAside setaside.Store
	// Leader returns the lock relay name publishes under (pgstate.NewLeader
	// on PostgreSQL); nil when every relay always leads (one instance only).
	Leader func(name string) (follow.Leadership, error)
	// View, when set, returns the store relay name reads the log through
	// (default Store): the simulator gives each relay a view of its own.
	View func(name string) eventstore.Store
	// OperationFeed adds RelayOperationFeed: the operation feed on
	// TopicOperationFeed. Set it on Kafka only: the Postgres queue has no
	// consumer of that topic (services downstream read GET /v1/feed).
	OperationFeed bool
	// Regressions is told when the operation feed's cache of operations'
	// first events finds the log went back (default: nobody).
	Regressions eventstore.RegressionObserver
	// Tune, when set, adjusts each relay's configuration before it is
	// built (pauses, batch size, retry policy: tests, the simulator and the
	// benchmark tune them; serve takes the defaults).
	Tune   func(*RelayConfig)
	Clock  clock.Clock
	Logger *slog.Logger
}

// StandardRelays returns the relays every deployment runs over the log:
//   - RelayRefundRequests: one RefundRequest per CapabilityIssued;
//   - RelaySecuritySignals: one SecuritySignal per replay-suspected
//     refusal. Following the log rather than publishing from the worker
//     means a signal is not lost when a worker dies between recording the
//     refusal and publishing: the refusal is in the log, so the signal
//     follows, at least once (its id, SignalIDForEvent, is stable);
//   - with OperationFeed, RelayOperationFeed: the operation feed, one
//     feed.Entry per change of an operation's state, keyed by operation.
//
// Run each with Run on its own goroutine. Any number of instances may run
// when cfg.Leader is set: one leads each relay, the others stand by. Without
// it, run one instance per deployment (a second publishes the same ids
// again, which is harmless but wasted work).
func StandardRelays(cfg RelaysConfig) ([]*Relay, error) {
	if cfg.Store == nil || cfg.Checkpoints == nil || cfg.Publisher == nil {
		return nil, errors.New("transport: relays config: Store, Checkpoints and Publisher are required")
	}
	if cfg.SetAside == nil {
		cfg.SetAside = &setaside.Memory{}
	}
	type relay struct {
		name string
		sel  func(store eventstore.Store) (Selector, error)
	}
	fixed := func(sel Selector) func(eventstore.Store) (Selector, error) {
		return func(eventstore.Store) (Selector, error) { return sel, nil }
	}
	relays := []relay{{RelayRefundRequests, fixed(SelectRefundRequests)}, {RelaySecuritySignals, fixed(SelectSecuritySignals)}}
	if cfg.OperationFeed {
		relays = append(relays, relay{RelayOperationFeed, func(store eventstore.Store) (Selector, error) {
			r, err := feed.NewReader(feed.ReaderConfig{Store: store, Regressions: cfg.Regressions})
			if err != nil {
				return nil, err
			}
			return SelectOperationFeed(r), nil
		}})
	}
	var out []*Relay
	for _, c := range relays {
		var lead follow.Leadership
		if cfg.Leader != nil {
			l, err := cfg.Leader(c.name)
			if err != nil {
				return nil, fmt.Errorf("relay %s: leader: %w", c.name, err)
			}
			lead = l
		}
		store := cfg.Store
		if cfg.View != nil {
			store = cfg.View(c.name)
		}
		sel, err := c.sel(store)
		if err != nil {
			return nil, fmt.Errorf("relay %s: %w", c.name, err)
		}
		rc := RelayConfig{
			Name: c.name, Store: store, Checkpoints: cfg.Checkpoints, Publisher: cfg.Publisher, Select: sel,
			SetAside: cfg.SetAside, Leader: lead, Clock: cfg.Clock, Logger: cfg.Logger, Regressions: cfg.Regressions,
		}
		if cfg.Tune != nil {
			cfg.Tune(&rc)
		}
		r, err := NewRelay(rc)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
