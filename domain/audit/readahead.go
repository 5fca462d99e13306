package audit

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"opledger/domain"
	"opledger/domain/codec"
	"opledger/eventstore"
	"opledger/eventstore/chain"
)

// decodedEvent is a stored event's decoding: its metadata and event, or why
// it could not be decoded; and its chain hash recomputed from what the
// store returned, or why it could not be.
type decodedEvent struct {
	meta  domain.Metadata
	event domain.Event
	err   error
	// ignored names a member this build does not know (codec.Decoded.Ignored).
	ignored string

	link    chain.Recomputed
	linkErr error
}

// recompute is chain.Recompute of a recorded event.
func recompute(rec *eventstore.RecordedEvent) (chain.Recomputed, error) {
	return chain.Recompute(rec.StreamID, rec.ID, rec.Type, rec.Version, rec.Data, rec.Metadata, rec.PrevHash, rec.Hash)
}

// prepare is what readAhead does to each event off the checking goroutine:
// decode it and recompute its hash (verify), or only the latter (digests,
// proofs).
type prepare func(rec *eventstore.RecordedEvent) decodedEvent

func decodeAndLink(rec *eventstore.RecordedEvent) decodedEvent {
	d := decode(rec)
	d.link, d.linkErr = recompute(rec)
	return d
}

func linkOnly(rec *eventstore.RecordedEvent) decodedEvent {
	var d decodedEvent
	d.link, d.linkErr = recompute(rec)
	return d
}

// decode reads a stored event with the codec (metadata and payload parsed
// once each, the payload upcast to the current shape), keeping the
// metadata, which the checks read too.
func decode(rec *eventstore.RecordedEvent) decodedEvent {
	d, err := codec.DecodeRecorded(*rec)
	if err != nil {
		return decodedEvent{err: err}
	}
	return decodedEvent{meta: d.Meta, event: d.Event, ignored: d.Ignored}
}

// logPage is one page of the global log, decoded, or the error that ended
// the reading.
type logPage struct {
	events  []eventstore.RecordedEvent
	decoded []decodedEvent
	err     error
}

// maxDecoders bounds the goroutines decoding one page.
const maxDecoders = 8

// readAhead reads the global log after `after`, page by page, and prepares
// (decodes, rehashes) each page on up to GOMAXPROCS goroutines (that is
// most of Verify's work; the checks must run in log order, the decoding
// need not), handing pages over in order. Reading and preparing are stages
// of their own, so the server reads the next page while this process
// prepares the last one. At most three pages are in memory: one with each
// stage (being read or read and waiting, being prepared or prepared and
// waiting) and one being checked. It stops after the page that passes `to`, after
// a short page (the end of the log), after maxEvents events (then sending
// ErrLimitExceeded), or on a failed read (sending its error). stop cancels
// the reading and waits for it to end.
func readAhead(ctx context.Context, store eventstore.Store, after, to eventstore.Position, pageSize int, maxEvents int64, prep prepare) (pages <-chan logPage, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	read := make(chan logPage) // unbuffered: a page waits in its stage's hands, never in a channel
	out := make(chan logPage)
	send := func(ch chan<- logPage, p logPage) bool {
		select {
		case ch <- p:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(read)
		for n := int64(0); ; n += int64(pageSize) {
			if n >= maxEvents {
				send(read, logPage{err: fmt.Errorf("verify: %w: read %d events (MaxEvents) and the log goes on: set To to verify a fixed range", ErrLimitExceeded, n)})
				return
			}
			batch, err := store.ReadAll(ctx, after, pageSize)
			if err != nil {
				send(read, logPage{err: fmt.Errorf("verify: read the log after %s: %w", orStart(positionText(after)), err)})
				return
			}
			if !send(read, logPage{events: batch}) {
				return
			}
			if len(batch) < pageSize || to != nil && batch[len(batch)-1].Position.Compare(to) >= 0 {
				return
			}
			after = batch[len(batch)-1].Position
		}
	})
	wg.Go(func() {
		defer close(out)
		workers := min(runtime.GOMAXPROCS(0), maxDecoders)
		for p := range read {
			if p.err == nil {
				p.decoded = decodeAll(p.events, workers, prep)
			}
			if !send(out, p) {
				return
			}
		}
	})
	return out, func() { cancel(); wg.Wait() }
}

// decodedPages recycles the decoded halves of pages their reader released
// (logPage.release): a verify of a long log prepares every page into one of
// the few slices in flight rather than a fresh one.
var decodedPages sync.Pool

// release hands p's decoded slice back for a later page once its reader
// has checked every event of it; the page is not read after.
func (p *logPage) release() {
	if d := p.decoded; d != nil {
		p.decoded = nil
		clear(d)
		decodedPages.Put(&d)
	}
}

// decodeAll prepares a page on up to workers goroutines, each a contiguous
// share.
func decodeAll(batch []eventstore.RecordedEvent, workers int, prep prepare) []decodedEvent {
	var out []decodedEvent
	if reused, ok := decodedPages.Get().(*[]decodedEvent); ok && cap(*reused) >= len(batch) {
		out = (*reused)[:len(batch)]
	} else {
		out = make([]decodedEvent, len(batch))
	}
	const minShare = 64 // below it a goroutine costs more than it saves
	workers = max(1, min(workers, len(batch)/minShare))
	share := (len(batch) + workers - 1) / workers
	var wg sync.WaitGroup
	for from := 0; from < len(batch); from += share {
		to := min(from+share, len(batch))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from; i < to; i++ {
				out[i] = prep(&batch[i])
			}
		}()
	}
	wg.Wait()
	return out
}
