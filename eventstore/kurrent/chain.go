package kurrent

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// The hash chain on KurrentDB. A KurrentDB event has no field of ours
// besides its data and custom metadata, and its hash must not cover itself,
// so the custom metadata stored is an envelope around the port's metadata:
//
//	{"metadata":<the port's metadata, as given>,"opledger_chain":{"hash":"<hex>","prev":"<hex>"}}
//
// ("metadata" is left out when the event has none). The hash covers the
// port's metadata, not the envelope. Reads unwrap it, returning the port's
// metadata byte for byte (KurrentDB keeps bytes as given) and the two
// hashes. An event whose custom metadata is not such an envelope was
// stored before hashing began (or by another writer): it is returned as it
// is, without hashes, and the audit reports it.
const chainMember = "opledger_chain"

// envelope is the stored custom metadata.
type envelope struct {
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Chain    *struct {
		Hash string `json:"hash"`
		Prev string `json:"prev"`
	} `json:"opledger_chain"`
}

// wrapMetadata builds the envelope for metadata and the event's link.
func wrapMetadata(metadata []byte, prev, hash chain.Hash) []byte {
	b := make([]byte, 0, len(metadata)+200)
	b = append(b, '{')
	if len(metadata) > 0 {
		b = append(b, `"metadata":`...)
		b = append(b, metadata...)
		b = append(b, ',')
	}
	b = append(b, `"`+chainMember+`":{"hash":"`...)
	b = hex.AppendEncode(b, hash[:])
	b = append(b, `","prev":"`...)
	b = hex.AppendEncode(b, prev[:])
	return append(b, `"}}`...)
}

// unwrapMetadata splits stored custom metadata into the port's metadata and
// the event's link; ok is false for metadata that is no envelope (returned
// as it is).
func unwrapMetadata(stored []byte) (metadata, prev, hash []byte, ok bool) {
	if !bytes.Contains(stored, []byte(`"`+chainMember+`"`)) {
		return stored, nil, nil, false
	}
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Chain == nil || dec.More() {
		return stored, nil, nil, false
	}
	p, err1 := hex.DecodeString(env.Chain.Prev)
	h, err2 := hex.DecodeString(env.Chain.Hash)
	if err1 != nil || err2 != nil {
		// Malformed hex is kept as such: the audit reports a malformed hash.
		p, h = []byte(env.Chain.Prev), []byte(env.Chain.Hash)
	}
	return nilIfEmpty(env.Metadata), p, h, true
}

// maxAnyScan bounds how far back an append with expected version Any looks
// for its own events (a retry of an append whose acknowledgement was lost).
// KurrentDB's own check for Any is its bounded cache of recent ids; past
// the bound this store refuses Any rather than risk writing twice.
const maxAnyScan = 10_000

// maxAnyAttempts bounds how often an append with expected version Any
// retries after losing the race for the version it found: each lost race
// means another append to the stream succeeded.
const maxAnyAttempts = 100

// head is where a stream ends, as an append must know it to hash: the
// version of its last event and the hash to link to.
type head struct {
	version int64
	hash    chain.Hash
}

// linkOf is the hash an event's successor links to: its own, or Genesis
// when it carries none (stored before hashing began).
func linkOf(e eventstore.RecordedEvent) chain.Hash {
	if h, ok, err := chain.FromBytes(e.Hash); ok && err == nil {
		return h
	}
	return chain.Genesis
}

// headAt reads the event at version v of stream, the head an exact append
// at v links to. found is false when the stream holds no event v: the
// stream is not at v, and its actual version is returned instead.
func (s *Store) headAt(ctx context.Context, stream string, v int64) (h head, found bool, actual int64, err error) {
	page, err := s.readPage(ctx, "read the head of "+stream, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(uint64(v))}, 1)
	if err != nil {
		return head{}, false, 0, err
	}
	if len(page) == 1 && page[0].Version == v {
		return head{version: v, hash: linkOf(page[0])}, true, 0, nil
	}
	actual, err = s.lastVersion(ctx, stream)
	return head{}, false, actual, err
}

// scanForRetry reads stream backwards, at most maxAnyScan events, for the
// ids of an Any append. It returns the stream's head (version -1 and
// Genesis for no stream) and where any of the ids sit (id -> version).
func (s *Store) scanForRetry(ctx context.Context, stream string, ids []string) (head, map[string]int64, error) {
	h := head{version: eventstore.NoStreamVersion, hash: chain.Genesis}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	found := map[string]int64{}
	const page = 500
	from := esdb.StreamPosition(esdb.End{})
	for scanned := 0; scanned < maxAnyScan; {
		events, err := s.readPage(ctx, "scan "+stream, stream, esdb.ReadStreamOptions{Direction: esdb.Backwards, From: from}, page)
		if err != nil {
			return head{}, nil, err
		}
		if scanned == 0 && len(events) > 0 {
			h = head{version: events[0].Version, hash: linkOf(events[0])}
		}
		for _, e := range events {
			if want[e.ID] {
				found[e.ID] = e.Version
			}
		}
		scanned += len(events)
		last := events
		if len(events) < page || len(found) == len(ids) || last[len(last)-1].Version == 0 {
			return h, found, nil
		}
		from = esdb.Revision(uint64(last[len(last)-1].Version - 1))
	}
	return head{}, nil, fmt.Errorf("append %s: %w: expected version Any on a stream of more than %d events cannot rule out a retry here; append at an exact version", stream, eventstore.ErrInvalidAppend, maxAnyScan)
}
