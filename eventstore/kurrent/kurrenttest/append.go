package kurrenttest

import (
	"errors"
	"fmt"
	"io"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// maxAppendSize is KurrentDB's default MaxAppendSize: the bytes of data and
// metadata one append may carry.
const maxAppendSize = 1 << 20

// maxAppendEvents bounds how many proposed messages one append may stream,
// so a runaway client cannot grow the server without end (KurrentDB's bound
// is the byte size alone; every event costs at least its overhead here).
const maxAppendEvents = maxAppendSize / 16

// Append implements the Streams.Append call: an options message, then the
// proposed events, then the client half-closes and gets one response.
func (s *streamsService) Append(srv streams.Streams_AppendServer) error {
	first, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "append: the first message must carry options")
	}
	stream := string(opts.GetStreamIdentifier().GetStreamName())
	if stream == "" {
		return badRequest("stream name is empty")
	}
	expected, err := expectedRevision(opts)
	if err != nil {
		return err
	}
	var (
		events []proposed
		size   int
	)
	for range maxAppendEvents + 1 {
		msg, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			return srv.SendAndClose(appendResponse(s.log.append(stream, expected, events), expected))
		}
		if err != nil {
			return err
		}
		p, err := proposedEvent(msg.GetProposedMessage())
		if err != nil {
			return err
		}
		size += len(p.data) + len(p.metadata)
		if size > maxAppendSize {
			srv.SetTrailer(metadata.Pairs("exception", "maximum-append-size-exceeded"))
			return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", maxAppendSize)
		}
		events = append(events, p)
	}
	return status.Errorf(codes.InvalidArgument, "append: more than %d events", maxAppendEvents)
}

func expectedRevision(opts *streams.AppendReq_Options) (int64, error) {
	switch r := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		if r.Revision > 1<<62 {
			return 0, badRequest(fmt.Sprintf("expected revision %d out of range", r.Revision))
		}
		return int64(r.Revision), nil
	case *streams.AppendReq_Options_NoStream:
		return expectedNoStream, nil
	case *streams.AppendReq_Options_Any:
		return expectedAny, nil
	case *streams.AppendReq_Options_StreamExists:
		return expectedStreamExists, nil
	}
	return 0, badRequest("expected stream revision missing")
}

// proposedEvent checks one proposed message the way KurrentDB does: the
// "type" and "content-type" metadata are required.
func proposedEvent(m *streams.AppendReq_ProposedMessage) (proposed, error) {
	if m == nil {
		return proposed{}, status.Error(codes.InvalidArgument, "append: expected a proposed message")
	}
	id, err := fromProtoUUID(m.GetId())
	if err != nil {
		return proposed{}, badRequest(fmt.Sprintf("event id: %v", err))
	}
	typ, ok := m.GetMetadata()[metadataType]
	if !ok {
		return proposed{}, requiredMetadataMissing(metadataType)
	}
	contentType, ok := m.GetMetadata()[metadataContentType]
	if !ok {
		return proposed{}, requiredMetadataMissing(metadataContentType)
	}
	return proposed{id: id, eventType: typ, contentType: contentType, data: m.GetData(), metadata: m.GetCustomMetadata()}, nil
}

func appendResponse(o outcome, expected int64) *streams.AppendResp {
	if o.kind == wrongVersion {
		return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{
			WrongExpectedVersion: wrongExpectedVersion(o.current, expected),
		}}
	}
	success := &streams.AppendResp_Success{}
	if o.last < 0 {
		success.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
		success.PositionOption = &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}
	} else {
		success.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: uint64(o.last)}
		success.PositionOption = &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: o.pos, PreparePosition: o.pos,
		}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: success}}
}

// wrongExpectedVersion fills both the current fields and the 20.6.0 ones,
// as KurrentDB does.
func wrongExpectedVersion(current, expected int64) *streams.AppendResp_WrongExpectedVersion {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if current < 0 {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: uint64(current)}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: uint64(current)}
	}
	switch expected {
	case expectedAny:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	case expectedStreamExists:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	case expectedNoStream:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: uint64(expected)}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: uint64(expected)}
	}
	return w
}

func badRequest(msg string) error {
	return status.Error(codes.InvalidArgument, msg)
}

func requiredMetadataMissing(key string) error {
	return status.Errorf(codes.InvalidArgument, "Required Metadata Property '%s' is missing", key)
}
