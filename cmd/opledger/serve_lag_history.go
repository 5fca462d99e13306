package main

import (
	"context"
	"log/slog"
	"time"

	"opledger/adapters/transport"
	"opledger/domain/clock"
	"opledger/projections"
)

// lagSampleEvery is how often serve records the projector's and the relays'
// lag into the read models' lag_samples (the console's pictures of the last
// hour and day): one row per source and minute, whichever serve is first.
const lagSampleEvery = time.Minute

// lagHistory samples the lag this serve can measure: the projection's
// always, each relay's where the relay runs here.
type lagHistory struct {
	reads     *projections.Reads
	projector func(context.Context) (projections.Lag, error)
	relays    []*transport.Relay
	clock     clock.Clock
	log       *slog.Logger
}

// run samples at start and every lagSampleEvery until ctx ends. A sample
// that cannot be measured or written is logged and left out: the picture
// shows a gap, and nothing else waits on it.
func (h *lagHistory) run(ctx context.Context) {
	t := time.NewTicker(lagSampleEvery)
	defer t.Stop()
	for {
		h.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *lagHistory) once(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, lagSampleEvery/2)
	defer cancel()
	var samples []projections.LagSample
	if lag, err := h.projector(ctx); err == nil {
		samples = append(samples, projections.LagSample{Source: projections.LagSourceProjector, Events: lag.Events, Capped: lag.Capped, Behind: lag.Behind})
	} else if ctx.Err() == nil {
		h.log.Warn("lag history: the projection's lag", "err", err)
	}
	for _, r := range h.relays {
		if lag, err := r.Lag(ctx); err == nil {
			samples = append(samples, projections.LagSample{Source: "relay:" + r.Name(), Events: lag.Events, Capped: lag.Capped, Behind: lag.Behind})
		} else if ctx.Err() == nil {
			h.log.Warn("lag history: a relay's lag", "relay", r.Name(), "err", err)
		}
	}
	if err := h.reads.RecordLag(ctx, h.clock.Now(), samples); err != nil && ctx.Err() == nil {
		h.log.Warn("lag history: not recorded", "err", err)
	}
}
