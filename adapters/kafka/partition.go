package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/transport"
)

// partition consumes one assigned partition for one generation, one message
// at a time, until ctx ends (a stop), gctx ends (a rebalance), or it gives
// the partition back (returning ends the generation: the group rejoins and
// the partition is read again from its committed offset).
func (c *Consumer) partition(ctx, gctx context.Context, gen *kafkago.Generation, a kafkago.PartitionAssignment, handle transport.HandleFunc) {
	log := c.cfg.Logger.With("topic", c.cfg.Topic, "partition", a.ID, "generation", gen.ID, "worker", c.cfg.WorkerID)
	// fetching stops on either a stop or the generation's end
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(gctx, cancel)()

	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: c.cfg.Brokers, Dialer: c.cfg.Dialer, Topic: c.cfg.Topic, Partition: a.ID,
		MinBytes: 1, MaxBytes: c.cfg.MaxBytes, MaxWait: c.cfg.MaxWait, QueueCapacity: c.cfg.QueueCapacity,
	})
	defer r.Close()
	if err := r.SetOffset(a.Offset); err != nil {
		log.ErrorContext(ctx, "cannot seek to the committed offset; giving the partition back", "offset", a.Offset, "err", err)
		return
	}
	for failures := 0; ; {
		m, err := r.FetchMessage(fctx)
		if fctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if failures >= c.cfg.MaxRetries {
				log.ErrorContext(ctx, "fetching keeps failing; giving the partition back", "err", err)
				return
			}
			log.WarnContext(ctx, "fetch failed", "err", err, "failures", failures)
			if !pause(fctx, c.backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		if !c.process(ctx, fctx, gen, m, handle, log) {
			return
		}
	}
}

// process handles one message until it can be committed, and commits it.
// It reports false when the partition must be given back or fetching
// stopped: the message is then not committed, and is read again.
func (c *Consumer) process(ctx, fctx context.Context, gen *kafkago.Generation, m kafkago.Message, handle transport.HandleFunc, log *slog.Logger) bool {
	log = log.With("offset", m.Offset)
	hctx, cancel := transport.DrainContext(ctx, c.cfg.DrainTimeout)
	defer cancel()
	in := transport.Inbound{
		Key: m.Key, Value: m.Value, Headers: headerMap(m.Headers),
		Origin: transport.Origin{Transport: "kafka", Topic: m.Topic, Partition: m.Partition, Offset: m.Offset},
	}
	for attempt := 1; ; attempt++ {
		d := handle(hctx, in)
		switch d.Action {
		case transport.ActionAck:
			return c.commit(hctx, gen, m, log)
		case transport.ActionDeadLetter:
			if err := c.deadLetter(hctx, in, m, d); err != nil {
				log.WarnContext(ctx, "dead-letter write failed; handling the message again", "err", err, "attempt", attempt)
				break
			}
			return c.commit(hctx, gen, m, log)
		default:
			log.WarnContext(ctx, "delivery not recorded; handling it again", "action", d.Action, "err", d.Err, "attempt", attempt)
		}
		if attempt >= c.cfg.MaxRetries {
			log.ErrorContext(ctx, "giving the partition back: the message could not be settled", "attempts", attempt)
			return false
		}
		if !pause(fctx, c.backoff(attempt)) {
			return false // stopping or rebalancing: the next owner reads it again
		}
	}
}

// deadLetter writes the message, its reason and where it came from to the
// dead-letter topic.
func (c *Consumer) deadLetter(ctx context.Context, in transport.Inbound, m kafkago.Message, d transport.Disposition) error {
	h := make(map[string]string, len(in.Headers)+7)
	for k, v := range in.Headers {
		h[k] = v
	}
	h[transport.HeaderDeadReason] = string(d.Reason)
	h[transport.HeaderDeadDetail] = d.Detail
	h[transport.HeaderOriginalTopic] = m.Topic
	h[transport.HeaderOriginalPart] = strconv.Itoa(m.Partition)
	h[transport.HeaderOriginalOffset] = strconv.FormatInt(m.Offset, 10)
	h[transport.HeaderDeadLetteredBy] = c.cfg.WorkerID
	h[transport.HeaderDeadLetteredAt] = time.Now().UTC().Format(time.RFC3339Nano)
	err := c.dlq.Publish(ctx, []transport.Outbound{{
		Topic: c.cfg.DeadLetterTopic, Key: string(m.Key), MessageID: in.Headers[transport.HeaderMessageID], Value: m.Value, Headers: h,
	}})
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", in.Origin, err)
	}
	return nil
}

// commit commits the offset after m. A failure (the generation ended, the
// coordinator moved) gives the partition back.
func (c *Consumer) commit(ctx context.Context, gen *kafkago.Generation, m kafkago.Message, log *slog.Logger) bool {
	err := gen.CommitOffsets(map[string]map[int]int64{m.Topic: {m.Partition: m.Offset + 1}})
	if err != nil {
		log.WarnContext(ctx, "commit failed; giving the partition back, the message will be read again", "err", err)
		return false
	}
	return true
}

func (c *Consumer) backoff(attempt int) time.Duration {
	b := c.cfg.RetryBackoff
	for i := 1; i < attempt && b < c.cfg.MaxRetryBackoff; i++ {
		b *= 2
	}
	return min(b, c.cfg.MaxRetryBackoff)
}

// pause waits d, or less if ctx ends (then it reports false).
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
