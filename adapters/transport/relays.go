package transport

import (
	"log/slog"

	"opledger/eventstore"
)

// StandardRelays returns the relays every deployment runs over the log,
// publishing through pub and checkpointed in checks:
//   - RelayRefundRequests: one RefundRequest per CapabilityIssued;
//   - RelaySecuritySignals: one SecuritySignal per replay-suspected
//     refusal. Following the log rather than publishing from the worker
//     means a signal is not lost when a worker dies between recording the
//     refusal and publishing: the refusal is in the log, so the signal
//     follows, at least once (its id, SignalIDForEvent, is stable).
//
// Run each with Run on its own goroutine; one instance of each per
// deployment is enough (a second publishes the same ids again, which is
// harmless but wasted work).
func StandardRelays(store eventstore.Store, checks Checkpoints, pub Publisher, log *slog.Logger) ([]*Relay, error) {
	var out []*Relay
	for _, c := range []struct {
		name string
		sel  Selector
	}{
		{RelayRefundRequests, SelectRefundRequests},
		{RelaySecuritySignals, SelectSecuritySignals},
	} {
		r, err := NewRelay(RelayConfig{Name: c.name, Store: store, Checkpoints: checks, Publisher: pub, Select: c.sel, Logger: log})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
