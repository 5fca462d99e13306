package kurrenttest

import (
	"regexp"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultSearchWindow is KurrentDB's ReadBatchSize, the search window when
// a filter asks for none ("count").
const defaultSearchWindow = 32

// filter is a server-side $all filter: on the stream name or on the event
// type, by prefixes (any may match) or by one regular expression.
type filter struct {
	onType   bool
	prefixes []string
	re       *regexp.Regexp
	// checkpointEvery is how many considered events separate two checkpoint
	// messages of a filtered subscription.
	checkpointEvery int
}

// newFilter decodes a request's filter; nil when it has none.
func newFilter(opts *streams.ReadReq_Options) (*filter, error) {
	fo := opts.GetFilter()
	if fo == nil {
		return nil, nil
	}
	var (
		f    filter
		expr *streams.ReadReq_Options_FilterOptions_Expression
	)
	switch x := fo.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		expr = x.StreamIdentifier
	case *streams.ReadReq_Options_FilterOptions_EventType:
		f.onType, expr = true, x.EventType
	default:
		return nil, status.Error(codes.InvalidArgument, "filter: neither stream nor event type")
	}
	switch {
	case expr.GetRegex() != "":
		re, err := regexp.Compile(expr.GetRegex())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "filter: %v", err)
		}
		f.re = re
	case len(expr.GetPrefix()) > 0:
		f.prefixes = expr.GetPrefix()
	default:
		return nil, status.Error(codes.InvalidArgument, "filter: no prefixes and no regex")
	}
	if fo.GetCheckpointIntervalMultiplier() == 0 {
		return nil, status.Error(codes.InvalidArgument, "filter: checkpoint interval multiplier must be positive")
	}
	window := defaultSearchWindow
	if m := fo.GetMax(); m > 0 {
		window = int(m)
	}
	f.checkpointEvery = window * int(fo.GetCheckpointIntervalMultiplier())
	return &f, nil
}

// match reports whether r passes the filter; a nil filter passes all.
func (f *filter) match(r *record) bool {
	if f == nil {
		return true
	}
	subject := r.stream
	if f.onType {
		subject = r.eventType
	}
	if f.re != nil {
		return f.re.MatchString(subject)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}
