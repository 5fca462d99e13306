package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// evidenceFormatVersion is bumped whenever what an evidence stream folds
// into changes meaning without evidenceSnapshot changing shape: snapshots
// written before then are ignored and rebuilt.
const evidenceFormatVersion = 1

// evidenceSnapshot is what a snapshot of an evidence fold keeps: the
// bound's counts, the message ids the stream's refusals and duplicates
// name (sorted), and the id of the event at the log's version.
type evidenceSnapshot struct {
	Log      domain.EvidenceLogState `json:"log"`
	Messages []domain.MessageID      `json:"messages"`
	LastID   string                  `json:"last_id"`
}

// evidenceSnapshotFormat names the encoding of the evidence snapshots this
// build writes and reads: JSON of evidenceSnapshot, this file's version,
// and a fingerprint of the type's fields and of the codec's registry. A
// snapshot of any other format is ignored.
var evidenceSnapshotFormat = fmt.Sprintf("evidence-json/v%d/%s", evidenceFormatVersion, evidenceFingerprint())

func evidenceFingerprint() string {
	h := sha256.New()
	h.Write([]byte(typeFingerprint(reflect.TypeFor[evidenceSnapshot]())))
	for _, k := range codec.Kinds() {
		fmt.Fprintf(h, "|%s@%d", k.Type, k.Current)
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func encodeEvidence(e evidenceEntry) ([]byte, error) {
	s := evidenceSnapshot{Log: e.log.State(), Messages: make([]domain.MessageID, 0, len(e.msgs)), LastID: e.lastID}
	for m := range e.msgs {
		s.Messages = append(s.Messages, m)
	}
	slices.Sort(s.Messages)
	return json.Marshal(s)
}

// decodeEvidence restores the entry b encodes, refusing one of another
// stream, version or bound than the caller's.
func decodeEvidence(b []byte, stream string, version int64, bound domain.EvidenceBound) (evidenceEntry, error) {
	var s evidenceSnapshot
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return evidenceEntry{}, err
	}
	if s.Log.Stream != stream || s.Log.Version != version || s.LastID == "" {
		return evidenceEntry{}, fmt.Errorf("a snapshot of %s@%d (last event %q)", s.Log.Stream, s.Log.Version, s.LastID)
	}
	if s.Log.Bound != bound {
		return evidenceEntry{}, fmt.Errorf("folded under the bound %+v, not %+v", s.Log.Bound, bound)
	}
	l, err := domain.EvidenceLogFromState(s.Log)
	if err != nil {
		return evidenceEntry{}, err
	}
	msgs := make(map[domain.MessageID]struct{}, len(s.Messages))
	for _, m := range s.Messages {
		msgs[m] = struct{}{}
	}
	return evidenceEntry{log: l, msgs: msgs, lastID: s.LastID, snapshotAt: version}, nil
}

// fromSnapshot starts a fold of stream from its snapshot, when one that
// matches the stream (snapshotPage: the event at its version carries the
// id and hash the snapshot was taken at) and was folded under the
// handler's bound is kept past version have, and folds the rest of the
// first page read after it.
func (w *evidenceWriter) fromSnapshot(ctx context.Context, stream string, have int64) (*evidenceFolding, bool) {
	e, snap, recs, ok := snapshotPage(ctx, w.h, stream, evidenceSnapshotFormat, have, func(s eventstore.Snapshot) (evidenceEntry, string, error) {
		e, err := decodeEvidence(s.State, stream, s.Version, w.h.cfg.EvidenceBound)
		return e, e.lastID, err
	})
	if !ok {
		return nil, false
	}
	h := w.h
	page := h.cfg.ReadPage
	f := &evidenceFolding{entry: e, ownMsgs: true, lastHash: snap.Hash}
	if err := f.foldPage(recs[1:]); err != nil {
		h.cfg.Logger.WarnContext(ctx, "events after the evidence snapshot do not follow it; folding the stream from its start", "stream", stream, "err", err)
		return nil, false
	}
	f.ended = len(recs) < page
	return f, true
}

// keepSnapshot saves f's entry when the stream is SnapshotEvery events
// past the newest snapshot the entry knows of (or past its start), and
// marks the entry with it, kept or not: the next try is SnapshotEvery
// events later. A failure is logged, never the command's: the snapshot is
// only a shortcut.
func (w *evidenceWriter) keepSnapshot(ctx context.Context, f *evidenceFolding) {
	h := w.h
	e := &f.entry
	if h.snapshots == nil || h.cfg.SnapshotEvery < 0 || e.log.Version-e.snapshotAt < int64(h.cfg.SnapshotEvery) || len(f.lastHash) == 0 {
		return
	}
	e.snapshotAt = e.log.Version
	b, err := encodeEvidence(*e)
	if err == nil {
		err = h.snapshots.SaveSnapshot(ctx, eventstore.Snapshot{StreamID: e.log.Stream, Version: e.log.Version, Hash: f.lastHash, Format: evidenceSnapshotFormat, State: b})
	}
	if err != nil {
		h.cfg.Logger.WarnContext(ctx, "evidence snapshot not kept", "stream", e.log.Stream, "version", e.log.Version, "err", err)
	}
}

// snapshotAppended keeps a snapshot of e, the entry an append of this
// handler left, when the stream is SnapshotEvery events past the newest
// snapshot e knows of: a handler that only appends (it folded once, then
// kept its entry up to date by its own appends) keeps the stream's
// snapshots too. It reads the event at e's version for its hash (one row,
// every SnapshotEvery events); when it is not e's last event (the stream
// moved on or went back) no snapshot is kept until SnapshotEvery events
// later.
func (w *evidenceWriter) snapshotAppended(ctx context.Context, e evidenceEntry) evidenceEntry {
	h := w.h
	if h.snapshots == nil || h.cfg.SnapshotEvery < 0 || e.log.Version-e.snapshotAt < int64(h.cfg.SnapshotEvery) {
		return e
	}
	recs, err := h.cfg.Store.ReadStream(ctx, e.log.Stream, e.log.Version, 1)
	if err != nil || len(recs) != 1 || recs[0].ID != e.lastID {
		e.snapshotAt = e.log.Version
		return e
	}
	f := &evidenceFolding{entry: e, lastHash: recs[0].Hash}
	w.keepSnapshot(ctx, f)
	return f.entry
}
