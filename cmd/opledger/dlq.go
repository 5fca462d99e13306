package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"opledger/adapters/kafka"
	"opledger/adapters/pgqueue"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
)

func init() {
	register("dlq", "inspect and resubmit dead letters (list, resubmit, signals)", runDLQ)
}

const dlqUsage = `usage: opledger dlq <list|resubmit|signals> [flags]

  list                      dead letters, oldest first, with their reason and resubmission
  resubmit --all            republish every dead letter not yet resubmitted, under NEW message ids
  resubmit --id ID [--id ID]  republish the named dead letters
  signals                   security signals (Postgres-only transport; on Kafka read the
                            topic opledger.security-signals)

A resubmitted copy carries a new message id, as any resubmission tool's does: the
ledger, not this tool, refuses a copy whose authority is spent (capability.already-
consumed, replay suspected), and that refusal becomes a security signal.
Run 'opledger dlq <subcommand> --help' for flags.`

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub, args, synopsis, code, ok := subcommand("dlq", dlqUsage, dlqSynopses, args, stderr)
	if !ok {
		return code
	}
	f := newFlags("dlq "+sub, synopsis, stderr)
	f.Bind(settings.DatabaseURL, settings.TransportSchema, settings.KafkaBrokers)
	limit := f.Local().Int("limit", transport.DefaultResubmitLimit, "at most this many dead letters (list, resubmit --all) or signals")
	var all bool
	var ids stringList
	if sub == "resubmit" {
		f.Local().BoolVar(&all, "all", false, "resubmit every dead letter not yet resubmitted")
		f.Local().Var(&ids, "id", "resubmit this dead letter (repeatable)")
		f.Bind(settings.Operator)
	}
	f.Bind(settings.LogLevel)
	if code, ok := f.Parse(args); !ok {
		return code
	}
	cmd := "dlq " + sub
	if len(f.Args()) > 0 {
		return fail(stderr, cmd, fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	if *limit < 1 || *limit > pgqueue.MaxListLimit {
		return fail(stderr, cmd, fmt.Errorf("--limit %d: want 1..%d", *limit, pgqueue.MaxListLimit))
	}
	var by string
	if sub == "resubmit" {
		if all == (len(ids) > 0) {
			return fail(stderr, cmd, errors.New("say what to resubmit: --all, or --id ID (not both)"))
		}
		if by = f.Text(settings.Operator); by == "" {
			return fail(stderr, cmd, f.Missing(settings.Operator, "operator"))
		}
	}
	brokers, err := kafkaBrokers(f)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	db := dbFrom(f)
	pool, err := db.pool(ctx)
	if err != nil {
		return fail(stderr, cmd, err)
	}
	defer pool.Close()
	if err := pgstate.CheckSchema(ctx, pool, db.transport); err != nil {
		return fail(stderr, cmd, schemaError(db, err, pgstate.ErrSchemaOutdated))
	}
	log := newLogger(stderr, f)
	q, err := pgqueue.New(pgqueue.Config{DB: pool, Schema: db.transport, Logger: log})
	if err != nil {
		return fail(stderr, "dlq", err)
	}
	if sub == "signals" {
		if brokers != nil {
			return fail(stderr, "dlq signals", fmt.Errorf("on Kafka, read the topic %s", transport.TopicSecuritySignals))
		}
		return printSignals(ctx, q, *limit, stdout, stderr)
	}
	dlq, closeDLQ, err := openDeadLetters(pool, q, db.transport, brokers, log)
	if err != nil {
		return fail(stderr, "dlq", err)
	}
	defer closeDLQ()
	if sub == "list" {
		return printDeadLetters(ctx, dlq, *limit, stdout, stderr)
	}
	done, err := resubmit(ctx, dlq, transport.ResubmitRequest{All: all, IDs: ids, By: by, Limit: *limit}, newProgress(stderr, "dead letters resubmitted"))
	for _, r := range done {
		fmt.Fprintf(stdout, "%s resubmitted as %s\n", r.DeadLetterID, r.MessageID)
	}
	if err != nil {
		return fail(stderr, "dlq resubmit", err)
	}
	fmt.Fprintf(stdout, "%d resubmitted\n", len(done))
	return 0
}

// resubmit is dlq.Resubmit; on a terminal (p not nil) it resubmits one
// dead letter at a time, drawing progress, with the same selection: --all
// takes every dead letter not yet resubmitted (or whose copy may not have
// been published), up to the limit, and skips one another operator
// resubmitted meanwhile.
func resubmit(ctx context.Context, dlq transport.DeadLetterQueue, req transport.ResubmitRequest, p *progress) ([]transport.Resubmission, error) {
	if p == nil {
		return dlq.Resubmit(ctx, req)
	}
	defer p.finish()
	ids := req.IDs
	if req.All {
		dead, err := dlq.ListDeadLetters(ctx, cmp.Or(req.Limit, transport.DefaultResubmitLimit))
		if err != nil {
			return nil, fmt.Errorf("resubmit: list dead letters: %w", err)
		}
		for _, dl := range dead {
			if dl.Resubmitted == nil || !dl.Resubmitted.Published {
				ids = append(ids, dl.ID)
			}
		}
	}
	p.setTotal(int64(len(ids)))
	var out []transport.Resubmission
	for _, id := range ids { // bounded: at most the limit, or the ids named
		done, err := dlq.Resubmit(ctx, transport.ResubmitRequest{IDs: []string{id}, By: req.By})
		out = append(out, done...)
		if err != nil {
			if req.All && errors.Is(err, transport.ErrAlreadyResubmitted) {
				p.add(1, nil)
				continue // resubmitted concurrently by another operator
			}
			return out, err
		}
		p.add(1, nil)
	}
	return out, nil
}

// dlqSynopses are the dlq subcommands, each with what follows "opledger
// dlq SUB" in its usage line.
var dlqSynopses = map[string]string{
	"list":     "[--limit N] [flags]",
	"resubmit": "(--all | --id ID [--id ID...]) [--operator NAME] [--limit N] [flags]",
	"signals":  "[--limit N] [flags]",
}

// openDeadLetters returns the configured transport's dead-letter queue:
// the Kafka topic (resubmissions logged in Postgres) or the Postgres queue.
func openDeadLetters(pool pgqueue.DB, q *pgqueue.Queue, schema string, brokers []string, log *slog.Logger) (transport.DeadLetterQueue, func(), error) {
	if brokers == nil {
		return q, func() {}, nil
	}
	resubmissions, err := pgqueue.NewResubmissions(pool, schema)
	if err != nil {
		return nil, nil, err
	}
	d, err := kafka.NewDeadLetters(kafka.DeadLettersConfig{Brokers: brokers, Log: resubmissions, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	return d, func() { _ = d.Close() }, nil
}

func printDeadLetters(ctx context.Context, dlq transport.DeadLetterQueue, limit int, stdout, stderr io.Writer) int {
	dead, err := dlq.ListDeadLetters(ctx, limit)
	if err != nil {
		return fail(stderr, "dlq list", err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREASON\tMESSAGE\tORIGIN\tDEAD AT\tRESUBMITTED")
	for _, dl := range dead {
		resub := "-"
		if r := dl.Resubmitted; r != nil {
			resub = fmt.Sprintf("as %s by %s at %s", r.MessageID, r.By, r.At.UTC().Format(time.RFC3339))
			if !r.Published {
				resub += " (not yet published: resubmit again to finish)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", dl.ID, dl.Reason, orDash(string(dl.MessageID)), dl.Origin, dl.DeadAt.UTC().Format(time.RFC3339), resub)
		if dl.Detail != "" {
			fmt.Fprintf(tw, "\t  %s\t\t\t\t\n", oneLine(dl.Detail))
		}
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "dlq list", err)
	}
	fmt.Fprintf(stdout, "%d dead letters\n", len(dead))
	return 0
}

func printSignals(ctx context.Context, q *pgqueue.Queue, limit int, stdout, stderr io.Writer) int {
	msgs, err := q.ListTopic(ctx, transport.TopicSecuritySignals, 0, limit)
	if err != nil {
		return fail(stderr, "dlq signals", err)
	}
	tw := tabwriter.NewWriter(stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tREJECTED AT\tREASON\tOPERATION\tCAPABILITY\tMESSAGE")
	for _, m := range msgs {
		s, err := transport.DecodeSecuritySignal(m.Value)
		if err != nil {
			fmt.Fprintf(tw, "%s\t(undecodable: %v)\t\t\t\t\n", m.MessageID, err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.SignalID, s.RejectedAt.UTC().Format(time.RFC3339), s.Reason, s.OperationID, s.CapabilityID, s.MessageID)
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "dlq signals", err)
	}
	fmt.Fprintf(stdout, "%d signals\n", len(msgs))
	return 0
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return strconv.Quote(s)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}
