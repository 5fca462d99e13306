package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/transport"
	"opledger/domain"
	"opledger/domain/clock"
	"opledger/domain/setaside"
)

// ReasonAttemptFailed is the set-aside reason of a failed attempt at a
// message (a Retry that is not an outage); the dead letter it ends in says
// delivery.attempts-exhausted.
const ReasonAttemptFailed = "delivery.failed"

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
	known := c.knownFailures(fctx, a.ID, a.Offset, log)
	offs := &offsets{}
	// Whatever was acknowledged is committed before the partition goes:
	// the generation may still allow it (a stop; a rebalance in progress).
	defer c.flush(ctx, gen, offs, log)
	for failures := 0; ; {
		// While commits wait, fetch no longer than until they are due: a
		// partition with nothing more to read commits at once.
		fetchCtx, cancelFetch := fctx, context.CancelFunc(func() {})
		if offs.waiting > 0 {
			fetchCtx, cancelFetch = context.WithTimeout(fctx, max(c.cfg.CommitInterval-time.Since(offs.since), time.Millisecond))
		}
		m, err := r.FetchMessage(fetchCtx)
		cancelFetch()
		if fctx.Err() != nil {
			return
		}
		if err != nil && offs.waiting > 0 && fetchCtx.Err() != nil {
			if !c.flush(ctx, gen, offs, log) {
				return
			}
			continue
		}
		if err != nil {
			failures++
			if failures >= c.cfg.MaxRetries {
				log.ErrorContext(ctx, "fetching keeps failing; giving the partition back", "err", err)
				return
			}
			log.WarnContext(ctx, "fetch failed", "err", err, "failures", failures)
			if !clock.Sleep(fctx, c.backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		if !c.process(ctx, fctx, gen, m, handle, known, offs, log) {
			return
		}
	}
}

// offsets is a partition's acknowledged messages whose offset is not
// committed yet: the offset to commit (the next to read), how many wait
// for it and since when.
type offsets struct {
	topic     string
	partition int
	next      int64
	waiting   int
	since     time.Time
}

// flush commits what waits; it reports false when the commit failed (the
// partition must be given back).
func (c *Consumer) flush(ctx context.Context, gen *kafkago.Generation, offs *offsets, log *slog.Logger) bool {
	if offs.waiting == 0 {
		return true
	}
	err := gen.CommitOffsets(map[string]map[int]int64{offs.topic: {offs.partition: offs.next}})
	offs.waiting = 0
	if err != nil {
		log.WarnContext(ctx, "commit failed; giving the partition back, its messages since the last commit will be read again", "err", err, "offset", offs.next)
		return false
	}
	return true
}

// itemName names a message in the set-aside store: stable wherever and
// whenever the message is read again (another member, after a restart).
func (c *Consumer) itemName(partition int, offset int64) string {
	return c.itemPrefix(partition) + strconv.FormatInt(offset, 10)
}

func (c *Consumer) itemPrefix(partition int) string {
	return c.cfg.GroupID + "/" + c.cfg.Topic + "/" + strconv.Itoa(partition) + "@"
}

// maxKnownPages bounds the set-aside pages read when a partition is
// assigned. A partition holds at most one failing message at a time (it
// waits on it), so a handful of items is the normal case; the bound keeps a
// damaged table from stalling the assignment.
const maxKnownPages = 10

// knownFailures returns the partition's messages with recorded failures, by
// offset: what an earlier owner (this process before a restart, or another
// member before a rebalance) counted. Entries below the committed offset
// are settled messages whose entry outlived them; they are cleared. Best
// effort: if the store cannot answer, failures still count on from the
// store's rows at the next failure (Fail increments what is there).
func (c *Consumer) knownFailures(ctx context.Context, partition int, committed int64, log *slog.Logger) map[int64]setaside.Item {
	prefix := c.itemPrefix(partition)
	out := map[int64]setaside.Item{}
	var after *setaside.Item
	for range maxKnownPages {
		items, err := c.cfg.SetAside.List(ctx, setaside.Query{Role: setaside.RoleKafka, After: after, Limit: setaside.MaxListLimit})
		if err != nil {
			log.WarnContext(ctx, "cannot read the partition's recorded failures", "err", err)
			return out
		}
		for _, it := range items {
			rest, ok := strings.CutPrefix(it.Item, prefix)
			off, err := strconv.ParseInt(rest, 10, 64)
			switch {
			case !ok || err != nil:
			case off < committed:
				if err := c.cfg.SetAside.Clear(ctx, setaside.RoleKafka, it.Item); err != nil {
					log.WarnContext(ctx, "cannot clear a settled message's failures", "item", it.Item, "err", err)
				}
			default:
				out[off] = it
			}
		}
		if len(items) < setaside.MaxListLimit {
			return out
		}
		after = &items[len(items)-1]
	}
	return out
}

// process handles one message until it can be committed, and commits it.
// It reports false when the partition must be given back or fetching
// stopped: the message is then not committed, and is read again.
//
// Per answer of handle: Ack commits. DeadLetter writes the dead letter and
// commits. A Retry that is an outage (transport.IsOutage) is handled again
// after a back-off, uncounted, for as long as the generation lives. Any
// other Retry is a failed attempt: counted in the set-aside store; the
// partition waits out the policy's back-off and handles it again, and once
// the count reaches MaxAttempts the message is dead-lettered
// (delivery.attempts-exhausted, with the attempts) and committed.
func (c *Consumer) process(ctx, fctx context.Context, gen *kafkago.Generation, m kafkago.Message, handle transport.HandleFunc,
	known map[int64]setaside.Item, offs *offsets, log *slog.Logger) bool {
	log = log.With("offset", m.Offset)
	item := c.itemName(m.Partition, m.Offset)
	hctx, cancel := transport.DrainContext(ctx, c.cfg.DrainTimeout)
	defer cancel()
	in := transport.Inbound{
		Key: m.Key, Value: m.Value, Headers: headerMap(m.Headers),
		Origin: transport.Origin{Transport: "kafka", Topic: m.Topic, Partition: m.Partition, Offset: m.Offset},
	}
	prior, failed := known[m.Offset]
	delete(known, m.Offset)
	if failed {
		in.Origin.Attempt = prior.Attempts + 1
		if prior.SetAside { // set aside before a restart or a rebalance, and not dead-lettered yet
			return c.exhaust(hctx, fctx, gen, in, m, item, prior, offs, log)
		}
		if !c.backOff(fctx, prior) {
			return false
		}
	}
	for outages, dlqFailures := 0, 0; ; {
		d := handle(hctx, in)
		switch {
		case d.Action == transport.ActionAck:
			return c.settle(hctx, gen, m, item, failed, offs, log)
		case d.Action == transport.ActionDeadLetter:
			if err := c.deadLetter(hctx, in, m, d.Reason, d.Detail, 0); err != nil {
				dlqFailures++
				c.stats.outages.Add(1)
				if dlqFailures >= c.cfg.MaxRetries {
					log.ErrorContext(ctx, "giving the partition back: the dead letter cannot be written", "err", err, "tries", dlqFailures)
					return false
				}
				log.WarnContext(ctx, "dead-letter write failed; handling the message again", "err", err, "tries", dlqFailures)
				if !clock.Sleep(fctx, c.backoff(dlqFailures)) {
					return false
				}
				continue
			}
			c.stats.deadLettered.Add(1)
			return c.settle(hctx, gen, m, item, failed, offs, log)
		case d.Action == transport.ActionRetry && transport.IsOutage(hctx, d):
			outages++
			c.stats.outages.Add(1)
			log.WarnContext(ctx, "outage: the delivery could not be recorded; handling it again, not counted against it", "err", d.Err, "outages", outages)
			if !clock.Sleep(fctx, c.backoff(outages)) {
				return false // stopping or rebalancing: the next owner reads it again
			}
			continue
		}
		it, err := c.fail(hctx, in, item, d)
		if err != nil {
			outages++
			c.stats.outages.Add(1)
			log.WarnContext(ctx, "cannot record a failed attempt; handling the message again, not counted", "err", err, "cause", d.Err)
			if !clock.Sleep(fctx, c.backoff(outages)) {
				return false
			}
			continue
		}
		failed = true
		c.stats.failures.Add(1)
		if it.SetAside {
			return c.exhaust(hctx, fctx, gen, in, m, item, it, offs, log)
		}
		log.WarnContext(ctx, "delivery failed; its partition waits, then handles it again", "err", d.Err, "attempts", it.Attempts,
			"max_attempts", c.cfg.Policy.MaxAttempts, "retry_at", it.RetryAt)
		if !c.backOff(fctx, it) {
			return false
		}
		in.Origin.Attempt = it.Attempts + 1
	}
}

// fail records one failed attempt at the message.
func (c *Consumer) fail(ctx context.Context, in transport.Inbound, item string, d transport.Disposition) (setaside.Item, error) {
	detail := fmt.Sprintf("handler answered %s without an error", d.Action)
	if d.Err != nil {
		detail = d.Err.Error()
	}
	op, _ := domain.ParseOperationID(string(in.Key))
	return c.cfg.SetAside.Fail(ctx, setaside.Failure{
		Role: setaside.RoleKafka, Item: item, OperationID: op, Reason: ReasonAttemptFailed, Detail: detail, At: c.cfg.Clock.Now(),
	}, c.cfg.Policy)
}

// backOff waits until it may be tried again (at most the policy's
// MaxBackoff), or less if fctx ends (then it reports false). The partition
// waits with it: its order holds.
func (c *Consumer) backOff(fctx context.Context, it setaside.Item) bool {
	wait := min(it.RetryAt.Sub(c.cfg.Clock.Now()), c.cfg.Policy.MaxBackoff)
	if wait <= 0 {
		return fctx.Err() == nil
	}
	c.stats.backingOff.Add(1)
	defer c.stats.backingOff.Add(-1)
	return clock.Sleep(fctx, wait)
}

// exhaust dead-letters a message whose failed attempts reached the bound,
// with the count and the last error, then commits it and clears its count
// (the dead letter is now its record).
func (c *Consumer) exhaust(ctx, fctx context.Context, gen *kafkago.Generation, in transport.Inbound, m kafkago.Message, item string, it setaside.Item, offs *offsets, log *slog.Logger) bool {
	detail := fmt.Sprintf("failed %d times; last error: %s", it.Attempts, it.Detail)
	for tries := 1; ; tries++ {
		err := c.deadLetter(ctx, in, m, transport.ReasonDeliveryAttemptsExhausted, detail, it.Attempts)
		if err == nil {
			break
		}
		c.stats.outages.Add(1)
		if tries >= c.cfg.MaxRetries {
			log.ErrorContext(ctx, "giving the partition back: the dead letter cannot be written", "err", err, "tries", tries)
			return false // the count stays set aside: the next owner dead-letters it
		}
		log.WarnContext(ctx, "dead-letter write failed; trying again", "err", err, "tries", tries)
		if !clock.Sleep(fctx, c.backoff(tries)) {
			return false
		}
	}
	c.stats.deadLettered.Add(1)
	c.stats.exhausted.Add(1)
	log.ErrorContext(ctx, "dead-lettered after its attempts were exhausted", "attempts", it.Attempts, "last_error", it.Detail)
	return c.settle(ctx, gen, m, item, true, offs, log)
}

// settle marks the message's offset for commit: committed with the next
// CommitEvery messages or CommitInterval (see ConsumerConfig), at once when
// it had recorded failures, which are then cleared. A failed clear leaves
// an entry below the committed offset, which the next assignment of the
// partition clears.
func (c *Consumer) settle(ctx context.Context, gen *kafkago.Generation, m kafkago.Message, item string, failed bool, offs *offsets, log *slog.Logger) bool {
	if offs.waiting == 0 {
		offs.since = time.Now()
	}
	offs.topic, offs.partition, offs.next = m.Topic, m.Partition, m.Offset+1
	offs.waiting++
	if !failed && offs.waiting < c.cfg.CommitEvery {
		return true
	}
	if !c.flush(ctx, gen, offs, log) {
		return false
	}
	if failed {
		if err := c.cfg.SetAside.Clear(ctx, setaside.RoleKafka, item); err != nil {
			log.WarnContext(ctx, "cannot clear a settled message's failures", "item", item, "err", err)
		}
	}
	return true
}

// deadLetter writes the message, its reason, where it came from and (when
// positive) its failed attempts to the dead-letter topic.
func (c *Consumer) deadLetter(ctx context.Context, in transport.Inbound, m kafkago.Message, reason domain.Reason, detail string, attempts int) error {
	h := make(map[string]string, len(in.Headers)+8)
	for k, v := range in.Headers {
		h[k] = v
	}
	h[transport.HeaderDeadReason] = string(reason)
	h[transport.HeaderDeadDetail] = detail
	h[transport.HeaderOriginalTopic] = m.Topic
	h[transport.HeaderOriginalPart] = strconv.Itoa(m.Partition)
	h[transport.HeaderOriginalOffset] = strconv.FormatInt(m.Offset, 10)
	h[transport.HeaderDeadLetteredBy] = c.cfg.WorkerID
	h[transport.HeaderDeadLetteredAt] = c.cfg.Clock.Now().UTC().Format(time.RFC3339Nano)
	if attempts > 0 {
		h[transport.HeaderDeadAttempts] = strconv.Itoa(attempts)
	}
	err := c.dlq.Publish(ctx, []transport.Outbound{{
		Topic: c.cfg.DeadLetterTopic, Key: string(m.Key), MessageID: in.Headers[transport.HeaderMessageID], Value: m.Value, Headers: h,
	}})
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", in.Origin, err)
	}
	return nil
}

func (c *Consumer) backoff(attempt int) time.Duration {
	b := c.cfg.RetryBackoff
	for i := 1; i < attempt && b < c.cfg.MaxRetryBackoff; i++ {
		b *= 2
	}
	return min(b, c.cfg.MaxRetryBackoff)
}
