package ledger

import (
	"context"
	"errors"
	"fmt"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
)

// An evidence stream grows by a bounded number of events an hour
// (domain.EvidenceLog), but without end while a flood lasts: ~12,500
// events an hour per operation at worst. So no fold of it reads the whole
// stream once it is long:
//
//   - A kept fold (evidenceEntry) is brought up to date from its last
//     event (catchUp): one read from that event on, which must still be
//     there, and the events after it. Two handlers appending evidence to
//     one stream each read, on a conflict, only what the other appended.
//   - A cold fold (fold) reads the stream's first page; a stream longer
//     than that starts from its snapshot (evidence_snapshot.go) when one
//     matches the stream, and folds the events after it. Handlers keep a
//     snapshot whenever the stream is SnapshotEvery events past the
//     newest they know of, whether they folded or appended those events.
//
// So a cold fold reads the snapshot, its event and the events after it:
// with snapshots on, about SnapshotEvery events per handler appending to
// the stream, whatever the stream's length. MaxStreamEvents bounds the
// events one fold reads after its snapshot (or from the stream's start
// without one), not the stream's version: a long evidence stream whose
// snapshots are kept stays loadable.

// evidenceFolding is an evidence fold under way: the entry it folds into,
// whether the entry's message ids are its own to add to (else shared with
// the handler's kept entry: copied before the first is added), the events
// this fold read (after its snapshot), the hash of the entry's last event
// (nil when not known), and whether the last page read ended the stream.
type evidenceFolding struct {
	entry    evidenceEntry
	ownMsgs  bool
	read     int
	lastHash []byte
	ended    bool
}

// newEvidenceFolding starts a fold of stream from its first event.
func (w *evidenceWriter) newEvidenceFolding(stream string) *evidenceFolding {
	return &evidenceFolding{
		entry:   evidenceEntry{log: domain.NewEvidenceLog(stream, w.h.cfg.EvidenceBound), msgs: map[domain.MessageID]struct{}{}, snapshotAt: -1},
		ownMsgs: true,
	}
}

// foldPage folds page into f; each event must follow the one before.
func (f *evidenceFolding) foldPage(page []eventstore.RecordedEvent) error {
	l := f.entry.log
	for _, rec := range page {
		if rec.Version != l.Version+1 {
			return fmt.Errorf("%w: %s: version %d follows %d", ErrCorruptStream, l.Stream, rec.Version, l.Version)
		}
		d, err := codec.DecodeRecorded(rec)
		if err != nil {
			return fmt.Errorf("%w: %s@%d: %w", ErrCorruptStream, l.Stream, rec.Version, err)
		}
		if err := l.Evolve(d.Event); err != nil {
			return fmt.Errorf("%w: %s@%d: %v", ErrCorruptStream, l.Stream, rec.Version, err)
		}
		if m := messageOf(d.Event); m != "" {
			if _, ok := f.entry.msgs[m]; !ok {
				if !f.ownMsgs {
					f.entry.msgs, f.ownMsgs = cloneMessages(f.entry.msgs), true
				}
				f.entry.msgs[m] = struct{}{}
			}
		}
		l.Version, f.entry.lastID, f.lastHash = rec.Version, rec.ID, rec.Hash
		f.read++
	}
	return nil
}

func cloneMessages(m map[domain.MessageID]struct{}) map[domain.MessageID]struct{} {
	c := make(map[domain.MessageID]struct{}, len(m)+1)
	for k := range m {
		c[k] = struct{}{}
	}
	return c
}

// errFoldTooLong refuses a fold that would read more than MaxStreamEvents
// events.
var errFoldTooLong = errors.New("evidence fold too long")

// foldOn folds the events of stream after f's, page by page, until the
// stream ends, refusing to read more than MaxStreamEvents events in one
// fold.
func (w *evidenceWriter) foldOn(ctx context.Context, stream string, f *evidenceFolding) error {
	page := w.h.cfg.ReadPage
	for !f.ended {
		if f.read >= w.h.cfg.MaxStreamEvents {
			return fmt.Errorf("load %s: %w: more than %d events to fold after its snapshot: refusing to load it", stream, errFoldTooLong, w.h.cfg.MaxStreamEvents)
		}
		recs, err := w.h.cfg.Store.ReadStream(ctx, stream, f.entry.log.Version+1, page)
		if err != nil {
			return fmt.Errorf("load %s: %w", stream, err)
		}
		if err := f.foldPage(recs); err != nil {
			return err
		}
		f.ended = len(recs) < page
	}
	return nil
}

// fold reads stream into a fresh entry. It reads the stream's first
// snapshotProbe events; when there are more, it starts from the stream's
// snapshot past them, if one matches the stream, and folds on from there
// (else from its first page). It keeps a snapshot when the stream is
// SnapshotEvery events past the one it started from (or past its start).
func (w *evidenceWriter) fold(ctx context.Context, stream string) (evidenceEntry, error) {
	f := w.newEvidenceFolding(stream)
	first := min(w.h.cfg.ReadPage, snapshotProbe)
	recs, err := w.h.cfg.Store.ReadStream(ctx, stream, 0, first)
	if err != nil {
		return evidenceEntry{}, fmt.Errorf("load %s: %w", stream, err)
	}
	if err := f.foldPage(recs); err != nil {
		return evidenceEntry{}, err
	}
	f.ended = len(recs) < first
	if !f.ended {
		if g, ok := w.fromSnapshot(ctx, stream, f.entry.log.Version); ok {
			f = g
		}
	}
	if err := w.foldOn(ctx, stream, f); err != nil {
		return evidenceEntry{}, err
	}
	w.keepSnapshot(ctx, f)
	return f.entry, nil
}

// catchUp brings e, a fold the handler kept, up to date with stream: it
// reads from e's last event on, and folds the events after it. The stream
// must still hold that very event at e's version; when it does not (the
// stream went back: a failover lost events), e is dropped, the stream
// folded afresh (fold) and the regression told (Config.Regressions), as it is when e is further behind than one fold
// may read (from its snapshot, then). e is not changed: what it shares with the kept
// entry is copied before anything is added.
func (w *evidenceWriter) catchUp(ctx context.Context, stream string, e evidenceEntry) (evidenceEntry, error) {
	if e.log.Version < 0 || e.lastID == "" {
		return w.fold(ctx, stream) // nothing to anchor on: the stream held no event
	}
	page := w.h.cfg.ReadPage + 1 // the anchor and a page after it
	recs, err := w.h.cfg.Store.ReadStream(ctx, stream, e.log.Version, page)
	if err != nil {
		return evidenceEntry{}, fmt.Errorf("load %s: %w", stream, err)
	}
	if len(recs) == 0 || recs[0].Version != e.log.Version || recs[0].ID != e.lastID {
		w.forget(stream)
		held, err := w.fold(ctx, stream)
		w.regressed(ctx, stream, e, recs, held, err)
		return held, err
	}
	e.log = e.log.Clone()
	f := &evidenceFolding{entry: e, lastHash: recs[0].Hash}
	if err := f.foldPage(recs[1:]); err != nil {
		return evidenceEntry{}, err
	}
	f.ended = len(recs) < page
	if err := w.foldOn(ctx, stream, f); err != nil {
		if errors.Is(err, errFoldTooLong) {
			// Further behind than one fold may read: start again from the
			// stream's snapshot.
			w.forget(stream)
			return w.fold(ctx, stream)
		}
		return evidenceEntry{}, err
	}
	w.keepSnapshot(ctx, f)
	return f.entry, nil
}
