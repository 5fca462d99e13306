package kurrenttest

import (
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read implements the Streams.Read call: a bounded read of one stream or of
// $all, or a subscription to $all.
func (s *streamsService) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	opts := req.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "read: options missing")
	}
	_, subscribe := opts.GetCountOption().(*streams.ReadReq_Options_Subscription)
	switch {
	case opts.GetStream() != nil && subscribe:
		return status.Error(codes.Unimplemented, "kurrenttest: stream subscriptions are not implemented")
	case opts.GetStream() != nil:
		return s.readStream(opts, srv)
	case opts.GetAll() != nil && subscribe:
		return s.subscribeAll(opts, srv)
	case opts.GetAll() != nil:
		return s.readAll(opts, srv)
	}
	return status.Error(codes.InvalidArgument, "read: neither a stream nor $all")
}

// readStream sends up to count events of one stream, forwards from a
// revision (inclusive) or backwards from one (inclusive), or a
// stream-not-found message when the stream holds no events.
func (s *streamsService) readStream(opts *streams.ReadReq_Options, srv streams.Streams_ReadServer) error {
	so := opts.GetStream()
	name := so.GetStreamIdentifier().GetStreamName()
	recs := s.log.stream(string(name))
	if len(recs) == 0 {
		return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{
			StreamNotFound: &streams.ReadResp_StreamNotFound{StreamIdentifier: &shared.StreamIdentifier{StreamName: name}},
		}})
	}
	structured := structuredIDs(opts)
	count := opts.GetCount()
	last := uint64(len(recs) - 1)
	if opts.GetReadDirection() == streams.ReadReq_Options_Backwards {
		from := last
		if _, ok := so.GetRevisionOption().(*streams.ReadReq_Options_StreamOptions_Revision); ok {
			from = min(so.GetRevision(), last)
		} else if so.GetStart() != nil {
			from = 0
		}
		for i, sent := int64(from), uint64(0); i >= 0 && sent < count; i, sent = i-1, sent+1 {
			if err := srv.Send(toReadEvent(recs[i], structured)); err != nil {
				return err
			}
		}
		return nil
	}
	var from uint64
	switch {
	case so.GetEnd() != nil:
		from = last + 1
	case so.GetStart() == nil:
		from = so.GetRevision()
	}
	for i, sent := from, uint64(0); i <= last && sent < count; i, sent = i+1, sent+1 {
		if err := srv.Send(toReadEvent(recs[i], structured)); err != nil {
			return err
		}
	}
	return nil
}

// readAll sends up to count events of $all that pass the filter: forwards
// from a position (inclusive, as KurrentDB reads are) or backwards from one
// (exclusive).
func (s *streamsService) readAll(opts *streams.ReadReq_Options, srv streams.Streams_ReadServer) error {
	f, err := newFilter(opts)
	if err != nil {
		return err
	}
	recs := s.log.all()
	ao := opts.GetAll()
	structured := structuredIDs(opts)
	count := opts.GetCount()
	sent := uint64(0)
	if opts.GetReadDirection() == streams.ReadReq_Options_Backwards {
		end := len(recs)
		switch {
		case ao.GetStart() != nil:
			end = 0
		case ao.GetPosition() != nil:
			end = firstAtOrAfter(recs, ao.GetPosition().GetCommitPosition())
		}
		for i := end - 1; i >= 0 && sent < count; i-- {
			if !f.match(recs[i]) {
				continue
			}
			if err := srv.Send(toReadEvent(recs[i], structured)); err != nil {
				return err
			}
			sent++
		}
		return nil
	}
	start := 0
	switch {
	case ao.GetEnd() != nil:
		start = len(recs)
	case ao.GetPosition() != nil:
		start = firstAtOrAfter(recs, ao.GetPosition().GetCommitPosition())
	}
	for i := start; i < len(recs) && sent < count; i++ {
		if !f.match(recs[i]) {
			continue
		}
		if err := srv.Send(toReadEvent(recs[i], structured)); err != nil {
			return err
		}
		sent++
	}
	return nil
}
