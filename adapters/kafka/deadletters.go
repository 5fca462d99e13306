package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/transport"
	"opledger/domain"
)

// DeadLettersConfig configures DeadLetters. Zero values take defaults.
type DeadLettersConfig struct {
	Brokers []string // required
	Dialer  *kafkago.Dialer
	// Topic is the dead-letter topic (default transport.TopicDeadLetters);
	// Target is where resubmitted copies go (default
	// transport.TopicRefundRequests).
	Topic, Target string
	// Log records resubmissions (required for Resubmit; List marks what it
	// finds there). A Kafka topic cannot mark its own entries.
	Log transport.ResubmissionLog
	// Publisher writes the copies (default: one on Brokers).
	Publisher transport.Publisher
	// MaxWait bounds a partition reader's fetch wait (default 200ms); ReadTimeout
	// bounds reading one partition's dead letters (default 30s).
	MaxWait, ReadTimeout time.Duration
	Logger               *slog.Logger
}

// DeadLetters is the transport.DeadLetterQueue over the dead-letter topic.
// A dead letter's id is "DL-<partition>-<offset>" in that topic.
type DeadLetters struct {
	cfg  DeadLettersConfig
	pub  transport.Publisher
	owns *Publisher
}

// NewDeadLetters validates cfg. It does no I/O.
func NewDeadLetters(cfg DeadLettersConfig) (*DeadLetters, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: dead letters config: Brokers is required")
	}
	cfg.Topic = cmp.Or(cfg.Topic, transport.TopicDeadLetters)
	cfg.Target = cmp.Or(cfg.Target, transport.TopicRefundRequests)
	cfg.MaxWait = cmp.Or(cfg.MaxWait, 200*time.Millisecond)
	cfg.ReadTimeout = cmp.Or(cfg.ReadTimeout, 30*time.Second)
	if cfg.Dialer == nil {
		cfg.Dialer = kafkago.DefaultDialer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &DeadLetters{cfg: cfg, pub: cfg.Publisher}
	if d.pub == nil {
		p, err := NewPublisher(PublisherConfig{Brokers: cfg.Brokers})
		if err != nil {
			return nil, err
		}
		d.pub, d.owns = p, p
	}
	return d, nil
}

// Close releases the publisher DeadLetters made.
func (d *DeadLetters) Close() error {
	if d.owns != nil {
		return d.owns.Close()
	}
	return nil
}

func deadLetterID(partition int, offset int64) string {
	return "DL-" + strconv.Itoa(partition) + "-" + strconv.FormatInt(offset, 10)
}

func parseDeadLetterID(s string) (int, int64, error) {
	rest, ok := strings.CutPrefix(s, "DL-")
	ps, os, ok2 := strings.Cut(rest, "-")
	p, err1 := strconv.Atoi(ps)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, 0, fmt.Errorf("%w: %q is not a Kafka dead letter id (DL-<partition>-<offset>)", transport.ErrDeadLetterNotFound, s)
	}
	return p, o, nil
}

// ListDeadLetters implements transport.DeadLetterQueue: the dead-letter
// topic's messages, partition by partition in offset order, at most limit
// (default transport.DefaultResubmitLimit), each marked with its
// resubmission when the log has one.
func (d *DeadLetters) ListDeadLetters(ctx context.Context, limit int) ([]transport.DeadLetter, error) {
	if limit <= 0 {
		limit = transport.DefaultResubmitLimit
	}
	parts, err := d.partitions(ctx)
	if err != nil {
		return nil, err
	}
	var out []transport.DeadLetter
	for _, p := range parts {
		if len(out) >= limit {
			break
		}
		first, last, err := d.offsets(ctx, p)
		if err != nil {
			return nil, err
		}
		got, err := d.read(ctx, p, first, min(last, first+int64(limit-len(out))))
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if d.cfg.Log != nil && len(out) > 0 {
		ids := make([]string, len(out))
		for i, dl := range out {
			ids[i] = dl.ID
		}
		done, err := d.cfg.Log.Lookup(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i := range out {
			if r, ok := done[out[i].ID]; ok {
				out[i].Resubmitted = &r
			}
		}
	}
	return out, nil
}

// Resubmit implements transport.DeadLetterQueue. Per dead letter: the log
// records the resubmission (new id ResubmissionMessageID), the copy is
// published to Target, and the log marks it published. A dead letter whose
// record is unpublished (an interrupted earlier run) is published again
// under the same id; --all skips published ones, a named one fails with
// ErrAlreadyResubmitted.
func (d *DeadLetters) Resubmit(ctx context.Context, req transport.ResubmitRequest) ([]transport.Resubmission, error) {
	if d.cfg.Log == nil {
		return nil, errors.New("kafka: resubmit needs a resubmission log")
	}
	if req.By == "" {
		return nil, errors.New("resubmit: the operator (By) is required")
	}
	var todo []transport.DeadLetter
	if req.All {
		all, err := d.ListDeadLetters(ctx, cmp.Or(req.Limit, transport.DefaultResubmitLimit))
		if err != nil {
			return nil, err
		}
		for _, dl := range all {
			if dl.Resubmitted == nil || !dl.Resubmitted.Published {
				todo = append(todo, dl)
			}
		}
	} else {
		for _, id := range req.IDs {
			dl, err := d.one(ctx, id)
			if err != nil {
				return nil, err
			}
			todo = append(todo, dl)
		}
	}
	var out []transport.Resubmission
	for _, dl := range todo {
		r, err := d.resubmitOne(ctx, dl, req.By)
		if errors.Is(err, transport.ErrAlreadyResubmitted) && req.All {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *DeadLetters) resubmitOne(ctx context.Context, dl transport.DeadLetter, by string) (transport.Resubmission, error) {
	r, existed, err := d.cfg.Log.Begin(ctx, transport.Resubmission{DeadLetterID: dl.ID, MessageID: transport.ResubmissionMessageID(dl.ID), By: by})
	if err != nil {
		return r, err
	}
	if existed && r.Published {
		return r, fmt.Errorf("resubmit %s: %w as %s by %s at %s", dl.ID, transport.ErrAlreadyResubmitted, r.MessageID, r.By, r.At.Format(time.RFC3339))
	}
	copyMsg := transport.Outbound{
		Topic: d.cfg.Target, Key: string(dl.Key), MessageID: string(r.MessageID),
		Value:   transport.WithMessageID(dl.Value, r.MessageID),
		Headers: transport.ResubmissionHeaders(dl.Headers, dl.ID, string(dl.MessageID), r.MessageID),
	}
	if err := d.pub.Publish(ctx, []transport.Outbound{copyMsg}); err != nil {
		return r, fmt.Errorf("resubmit %s: %w", dl.ID, err)
	}
	if err := d.cfg.Log.Done(ctx, dl.ID); err != nil {
		return r, err
	}
	r.Published = true
	d.cfg.Logger.InfoContext(ctx, "dead letter resubmitted", "dead_letter", dl.ID, "message_id", r.MessageID, "previous_message_id", dl.MessageID, "by", by)
	return r, nil
}

// one reads the dead letter named id.
func (d *DeadLetters) one(ctx context.Context, id string) (transport.DeadLetter, error) {
	p, o, err := parseDeadLetterID(id)
	if err != nil {
		return transport.DeadLetter{}, err
	}
	first, last, err := d.offsets(ctx, p)
	if err != nil {
		return transport.DeadLetter{}, err
	}
	if o < first || o >= last {
		return transport.DeadLetter{}, fmt.Errorf("%s: %w (partition %d holds offsets %d..%d)", id, transport.ErrDeadLetterNotFound, p, first, last-1)
	}
	got, err := d.read(ctx, p, o, o+1)
	if err != nil {
		return transport.DeadLetter{}, err
	}
	if len(got) != 1 {
		return transport.DeadLetter{}, fmt.Errorf("%s: %w", id, transport.ErrDeadLetterNotFound)
	}
	return got[0], nil
}

// Count returns how many messages the dead-letter topic holds (resubmitted
// ones included: a topic cannot forget them), from its partitions' offsets:
// one metadata and one offsets request per partition, no message read.
// For /metrics. Retention may have dropped the oldest; the count is of what
// is still there.
func (d *DeadLetters) Count(ctx context.Context) (int64, error) {
	parts, err := d.partitions(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range parts {
		first, last, err := d.offsets(ctx, p)
		if err != nil {
			return 0, err
		}
		n += last - first
	}
	return n, nil
}

// partitions lists the dead-letter topic's partitions, in order.
func (d *DeadLetters) partitions(ctx context.Context) ([]int, error) {
	var lastErr error
	for _, b := range d.cfg.Brokers {
		conn, err := d.cfg.Dialer.DialContext(ctx, "tcp", b)
		if err != nil {
			lastErr = err
			continue
		}
		ps, err := conn.ReadPartitions(d.cfg.Topic)
		_ = conn.Close()
		if err != nil {
			lastErr = err
			continue
		}
		out := make([]int, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.ID)
		}
		sort.Ints(out)
		return out, nil
	}
	return nil, fmt.Errorf("kafka: partitions of %s: %w", d.cfg.Topic, lastErr)
}

// offsets returns partition p's first offset and the offset after its last.
func (d *DeadLetters) offsets(ctx context.Context, p int) (int64, int64, error) {
	var lastErr error
	for _, b := range d.cfg.Brokers {
		conn, err := d.cfg.Dialer.DialLeader(ctx, "tcp", b, d.cfg.Topic, p)
		if err != nil {
			lastErr = err
			continue
		}
		first, last, err := conn.ReadOffsets()
		_ = conn.Close()
		if err != nil {
			lastErr = err
			continue
		}
		return first, last, nil
	}
	return 0, 0, fmt.Errorf("kafka: offsets of %s/%d: %w", d.cfg.Topic, p, lastErr)
}

// read returns partition p's messages with offsets in [from, to).
func (d *DeadLetters) read(ctx context.Context, p int, from, to int64) ([]transport.DeadLetter, error) {
	if from >= to {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ReadTimeout)
	defer cancel()
	r := kafkago.NewReader(kafkago.ReaderConfig{
		Brokers: d.cfg.Brokers, Dialer: d.cfg.Dialer, Topic: d.cfg.Topic, Partition: p, MaxWait: d.cfg.MaxWait,
	})
	defer r.Close()
	if err := r.SetOffset(from); err != nil {
		return nil, fmt.Errorf("kafka: seek %s/%d@%d: %w", d.cfg.Topic, p, from, err)
	}
	var out []transport.DeadLetter
	for int64(len(out)) < to-from {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("kafka: read %s/%d@%d: %w", d.cfg.Topic, p, from+int64(len(out)), err)
		}
		if m.Offset >= to {
			break
		}
		out = append(out, deadLetter(m))
	}
	return out, nil
}

// deadLetter reads a message of the dead-letter topic.
func deadLetter(m kafkago.Message) transport.DeadLetter {
	h := headerMap(m.Headers)
	dl := transport.DeadLetter{
		ID: deadLetterID(m.Partition, m.Offset), Reason: domain.Reason(h[transport.HeaderDeadReason]),
		Detail: h[transport.HeaderDeadDetail], Key: m.Key, Value: m.Value, Headers: h, DeadAt: m.Time,
		Origin: transport.Origin{Transport: "kafka", Topic: h[transport.HeaderOriginalTopic]},
	}
	dl.Origin.Partition, _ = strconv.Atoi(h[transport.HeaderOriginalPart])
	dl.Origin.Offset, _ = strconv.ParseInt(h[transport.HeaderOriginalOffset], 10, 64)
	if req, err := transport.DecodeRefundRequest(m.Value); err == nil {
		dl.MessageID = req.MessageID
	} else if id, err := domain.ParseMessageID(h[transport.HeaderMessageID]); err == nil {
		dl.MessageID = id
	}
	return dl
}

var _ transport.DeadLetterQueue = (*DeadLetters)(nil)
