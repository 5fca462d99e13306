package kurrenttest

import (
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
)

// subscriptionPage bounds how many records a subscription takes from the
// log at once (KurrentDB reads its catch-up in pages, too).
const subscriptionPage = 256

// subscribeAll serves a catch-up subscription to $all, as KurrentDB does
// (Enumerators.AllSubscription / AllSubscriptionFiltered):
//
//  1. a confirmation carrying the subscription id;
//  2. the events after the start that pass the filter, in log order: from
//     the start of $all, or strictly after a position (the server reads the
//     first event at or after it and continues after that one), or from the
//     end;
//  3. with a filter, a checkpoint (the position of the last considered
//     event) every checkpointEvery considered events;
//  4. caught-up once the end of the log is reached;
//  5. then every event written later, as it is written, until the client
//     goes away.
//
// Live events come from the same log in the same order, so a subscriber
// sees each event once and never one out of order.
func (s *streamsService) subscribeAll(opts *streams.ReadReq_Options, srv streams.Streams_ReadServer) error {
	f, err := newFilter(opts)
	if err != nil {
		return err
	}
	ao := opts.GetAll()
	structured := structuredIDs(opts)
	next := 0
	switch {
	case ao.GetEnd() != nil:
		next = len(s.log.all())
	case ao.GetPosition() != nil:
		recs := s.log.all()
		next = firstAtOrAfter(recs, ao.GetPosition().GetCommitPosition())
		if next < len(recs) {
			next++ // the event at or after the position is where the subscription starts from, exclusive
		}
	}
	if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{
		Confirmation: &streams.ReadResp_SubscriptionConfirmation{SubscriptionId: uuid.NewString()},
	}}); err != nil {
		return err
	}
	ctx := srv.Context()
	considered, caughtUp := 0, false
	// Bounded by the client: the loop ends when the call's context does.
	for {
		recs, atEnd, changed := s.log.snapshot(next, subscriptionPage)
		for _, r := range recs {
			considered++
			if f.match(r) {
				if err := srv.Send(toReadEvent(r, structured)); err != nil {
					return err
				}
			}
			if f != nil && considered%f.checkpointEvery == 0 {
				if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{
					Checkpoint: &streams.ReadResp_Checkpoint{CommitPosition: r.pos, PreparePosition: r.pos},
				}}); err != nil {
					return err
				}
			}
		}
		next += len(recs)
		if !atEnd {
			continue
		}
		if !caughtUp {
			caughtUp = true
			if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{
				CaughtUp: &streams.ReadResp_CaughtUp{},
			}}); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
