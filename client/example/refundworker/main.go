// Command refundworker is an example worker on the Go client: it reads
// messages of your queue, one JSON object per line on stdin
// ({"message_id","operation_id","capability"}), handles each (claim,
// execute once at the provider under the lease, record), and prints one
// JSON line per message on stdout saying whether to acknowledge it.
//
//	OPLEDGER_URL=http://127.0.0.1:8080 OPLEDGER_TOKEN=… OPLEDGER_WORKER_ID=worker-go-1 \
//	PROVIDER_URL=http://127.0.0.1:8081 go run ./client/example/refundworker < messages.jsonl
//
// EXPORT_DELIVERY_URL, when set, executes export downloads too.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"opledger/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "refundworker:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	c, err := client.New(client.Config{
		BaseURL: os.Getenv("OPLEDGER_URL"), Token: os.Getenv("OPLEDGER_TOKEN"), WorkerID: os.Getenv("OPLEDGER_WORKER_ID"), Logger: log,
	})
	if err != nil {
		return err
	}
	executors := client.ByKind{client.KindRefund: client.StripeRefunds{BaseURL: os.Getenv("PROVIDER_URL")}}
	if u := os.Getenv("EXPORT_DELIVERY_URL"); u != "" {
		executors[client.KindExportDownload] = client.ExportDeliveries{BaseURL: u}
	}
	w := &client.Worker{Client: c, Executor: executors}

	lines := bufio.NewScanner(os.Stdin)
	lines.Buffer(make([]byte, 64<<10), 64<<10) // a message is identifiers and a token: 64 KiB is plenty
	out := json.NewEncoder(os.Stdout)
	next := func(context.Context) (client.Message, error) {
		if !lines.Scan() {
			return client.Message{}, cmpErr(lines.Err(), io.EOF)
		}
		var m client.Message
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			return client.Message{}, fmt.Errorf("a line that is not a message: %w", err)
		}
		return m, nil
	}
	settle := func(m client.Message, h client.Handled, err error) {
		line := map[string]any{"message_id": m.MessageID, "ack": err == nil}
		if err != nil {
			line["error"] = err.Error()
			line["dead_letter"] = errors.Is(err, client.ErrMalformedMessage)
		} else {
			line["status"], line["reason"], line["replay_suspected"] = h.Claim.Status, h.Claim.Reason, h.Claim.ReplaySuspected
			if h.Claim.Execution != nil {
				line["execution_id"], line["outcome"], line["recorded"] = h.Claim.Execution.ExecutionID, h.Result.Outcome, h.Recorded
			}
		}
		_ = out.Encode(line)
	}
	if err := w.Run(ctx, next, settle); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func cmpErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
