package kurrent

import (
	"fmt"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// naming maps the port's stream names to the server's and decides which
// streams and events belong to the store.
type naming struct {
	namespace string
	prefixes  []string // as configured, without the namespace
}

// server is stream's name on the server.
func (n naming) server(stream string) string { return n.namespace + stream }

// local is the port's name of a server stream, false if it lies outside the
// namespace.
func (n naming) local(serverName string) (string, bool) {
	return strings.CutPrefix(serverName, n.namespace)
}

// owns reports whether stream (a port name) is in one of the store's
// categories.
func (n naming) owns(stream string) bool {
	for _, p := range n.prefixes {
		if strings.HasPrefix(stream, p) {
			return true
		}
	}
	return false
}

// checkStream refuses a stream name the store must not touch: a system
// stream ("$...") or, when writing, a stream outside the store's
// categories (its events would never appear in ReadAll).
func (n naming) checkStream(stream string, writing bool) error {
	if strings.HasPrefix(stream, "$") {
		return fmt.Errorf("stream %q: names starting with $ are KurrentDB system streams", stream)
	}
	if writing && !n.owns(stream) {
		return fmt.Errorf("stream %q is outside the store's categories %q: ReadAll would never return its events", stream, n.prefixes)
	}
	return nil
}

// filter is the server-side $all filter: the store's categories, on the
// stream name. It excludes system streams (their names start with $, no
// prefix does) and every other category.
func (n naming) filter() *esdb.SubscriptionFilter {
	prefixes := make([]string, len(n.prefixes))
	for i, p := range n.prefixes {
		prefixes[i] = n.namespace + p
	}
	return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: prefixes}
}

// inLog reports whether an event read from $all belongs in the store's
// global log, and its stream's port name. System event types ("$...": a
// tombstone, a link, stream metadata) are dropped even in our streams; a
// stream outside the categories cannot pass the server's filter, and is
// dropped too should it ever arrive.
func (n naming) inLog(e *esdb.RecordedEvent) (string, bool) {
	if strings.HasPrefix(e.EventType, "$") {
		return "", false
	}
	stream, ok := n.local(e.StreamID)
	if !ok || !n.owns(stream) {
		return "", false
	}
	return stream, true
}
