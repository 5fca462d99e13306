package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// stateFormatVersion is bumped whenever what a stream folds into changes
// meaning without domain.Operation changing shape (Evolve treating an event
// differently, say): snapshots written before then are ignored and
// rebuilt. A change of shape needs no bump: the format carries a
// fingerprint of the type.
const stateFormatVersion = 1

// snapshotFormat names the encoding of the snapshots this build writes and
// reads: JSON of domain.Operation, this file's version, and a fingerprint
// of the type's fields and of the codec's registry (every event type with
// its current version: an upcaster added reads old events anew). A
// snapshot of any other format is ignored.
var snapshotFormat = fmt.Sprintf("operation-json/v%d/%s", stateFormatVersion, formatFingerprint())

func formatFingerprint() string {
	h := sha256.New()
	h.Write([]byte(typeFingerprint(reflect.TypeFor[domain.Operation]())))
	for _, k := range codec.Kinds() {
		fmt.Fprintf(h, "|%s@%d", k.Type, k.Current)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// DefaultSnapshotEvery is how many events a load must fold before the
// handler keeps a snapshot of the result (Config.SnapshotEvery): most
// operations have a few dozen events and never get one.
const DefaultSnapshotEvery = 500

// typeFingerprint hashes t's shape: every field's name and type, through
// structs, pointers, slices and maps.
func typeFingerprint(t reflect.Type) string {
	h := sha256.New()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		fmt.Fprintf(h, "%s/%s(", t.Kind(), t.String())
		defer h.Write([]byte(")"))
		if seen[t] {
			return
		}
		seen[t] = true
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				fmt.Fprintf(h, "%s:", f.Name)
				walk(f.Type)
			}
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		}
	}
	walk(t)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func encodeState(o *domain.Operation) ([]byte, error) { return json.Marshal(o) }

func decodeState(b []byte) (*domain.Operation, error) {
	o := domain.NewOperation()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		return nil, err
	}
	if o.Capabilities == nil {
		o.Capabilities = map[domain.CapabilityID]*domain.Capability{}
	}
	if o.Messages == nil {
		o.Messages = map[domain.MessageID]struct{}{}
	}
	return o, nil
}

// snapshotPage loads stream's snapshot of format when one is kept past
// version have (what the caller folded already), decodes it with decode,
// and reads the stream from the snapshot's version, one page. It reports
// false (and the caller folds on from the events) when there is no
// snapshot or none past have, it is of another format or does not decode,
// or it does not match the stream: the event at its version must be there
// and carry the hash the snapshot was taken at, and the id decode names
// (when it names one) — a log that was rewritten, restored or tampered
// with does not. Errors reading the snapshot are not the command's: they
// are logged and the events used.
func snapshotPage[T any](ctx context.Context, h *Handler, stream, format string, have int64, decode func(eventstore.Snapshot) (T, string, error)) (T, eventstore.Snapshot, []eventstore.RecordedEvent, bool) {
	var none T
	if h.snapshots == nil || h.cfg.SnapshotEvery < 0 {
		return none, eventstore.Snapshot{}, nil, false
	}
	snap, ok, err := h.snapshots.LoadSnapshot(ctx, stream)
	if err != nil {
		h.cfg.Logger.WarnContext(ctx, "snapshot not read; folding the stream from its start", "stream", stream, "err", err)
		return none, eventstore.Snapshot{}, nil, false
	}
	if !ok || snap.Format != format || snap.Version <= have {
		return none, eventstore.Snapshot{}, nil, false
	}
	v, lastID, err := decode(snap)
	if err != nil {
		h.cfg.Logger.WarnContext(ctx, "snapshot does not decode; folding the stream from its start", "stream", stream, "version", snap.Version, "err", err)
		return none, eventstore.Snapshot{}, nil, false
	}
	page, err := h.cfg.Store.ReadStream(ctx, stream, snap.Version, h.cfg.ReadPage)
	if err != nil {
		return none, eventstore.Snapshot{}, nil, false // the fold from the start meets the same error and reports it
	}
	if len(page) == 0 || page[0].Version != snap.Version || (lastID != "" && page[0].ID != lastID) || len(snap.Hash) == 0 || !bytes.Equal(page[0].Hash, snap.Hash) {
		h.cfg.Logger.WarnContext(ctx, "snapshot does not match its stream; folding the stream from its start", "stream", stream, "version", snap.Version)
		return none, eventstore.Snapshot{}, nil, false
	}
	return v, snap, page, true
}

// fromSnapshot loads stream from its snapshot and the events after it,
// when a snapshot matching the stream is kept past version have (see
// snapshotPage).
func (h *Handler) fromSnapshot(ctx context.Context, stream string, have int64) (*folding, bool) {
	state, snap, page, ok := snapshotPage(ctx, h, stream, snapshotFormat, have, func(s eventstore.Snapshot) (*domain.Operation, string, error) {
		state, err := decodeState(s.State)
		if err == nil && state.Version != s.Version {
			err = fmt.Errorf("a state at version %d", state.Version)
		}
		return state, "", err
	})
	if !ok {
		return nil, false
	}
	f := &folding{state: state, lastID: page[0].ID, lastHash: snap.Hash}
	if err := h.foldPage(stream, f, page[1:]); err != nil {
		h.cfg.Logger.WarnContext(ctx, "events after the snapshot do not follow it; folding the stream from its start", "stream", stream, "err", err)
		return nil, false
	}
	if len(page) == h.cfg.ReadPage {
		if err := h.catchUp(ctx, stream, f); err != nil {
			return nil, false
		}
	}
	return f, true
}

// keepSnapshot saves f's state when the load that made it folded at least
// SnapshotEvery events. A failure is logged, never the command's: the
// snapshot is only a shortcut.
func (h *Handler) keepSnapshot(ctx context.Context, stream string, f *folding) {
	if h.snapshots == nil || h.cfg.SnapshotEvery < 0 || f.folded < h.cfg.SnapshotEvery || len(f.lastHash) == 0 || !f.state.Exists() {
		return
	}
	b, err := encodeState(f.state)
	if err == nil {
		err = h.snapshots.SaveSnapshot(ctx, eventstore.Snapshot{StreamID: stream, Version: f.state.Version, Hash: f.lastHash, Format: snapshotFormat, State: b})
	}
	if err != nil {
		h.cfg.Logger.WarnContext(ctx, "snapshot not kept", "stream", stream, "version", f.state.Version, "err", err)
	}
}
