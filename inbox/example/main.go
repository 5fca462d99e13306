package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "refunds-issued:", err)
		os.Exit(1)
	}
}

// run parses args (each flag also read from its variable) and follows the
// feed until ctx ends.
func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("refunds-issued", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "the service's own PostgreSQL (DATABASE_URL)")
	schema := fs.String("schema", envOr("REFUNDS_SCHEMA", "refunds_portal"), "its schema (REFUNDS_SCHEMA)")
	name := fs.String("consumer", envOr("REFUNDS_CONSUMER", "refunds-issued"), "the consumer's name: its inbox ids and feed position (REFUNDS_CONSUMER)")
	feedURL := fs.String("feed-url", os.Getenv("OPLEDGER_URL"), "serve's address, to read GET /v1/feed (OPLEDGER_URL)")
	token := fs.String("token", os.Getenv("OPLEDGER_FEED_TOKEN"), "a subscriber's bearer token (OPLEDGER_FEED_TOKEN)")
	brokers := fs.String("kafka-brokers", os.Getenv("KAFKA_BROKERS"), "read the topic opledger.operation-feed instead (KAFKA_BROKERS)")
	group := fs.String("kafka-group", envOr("KAFKA_GROUP_ID", "refunds-issued"), "the consumer group (KAFKA_GROUP_ID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *dbURL == "":
		return errors.New("no database: set DATABASE_URL or --database-url")
	case *brokers == "" && (*feedURL == "" || *token == ""):
		return errors.New("no feed: set --feed-url and --token (OPLEDGER_URL, OPLEDGER_FEED_TOKEN), or --kafka-brokers")
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	pool, err := pgxpool.New(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	c, err := NewConsumer(pool, *schema, *name)
	if err != nil {
		return err
	}
	if err := c.Migrate(ctx); err != nil {
		return err
	}
	if *brokers != "" {
		log.Info("following the feed on Kafka", "brokers", *brokers, "group", *group)
		f := &KafkaFollower{Brokers: strings.Split(*brokers, ","), GroupID: *group, Log: log}
		return f.Run(ctx, c)
	}
	log.Info("following the feed over HTTP", "url", *feedURL)
	f := &HTTPFollower{BaseURL: strings.TrimRight(*feedURL, "/"), Token: *token, Log: log}
	return f.Run(ctx, c)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
