package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
)

// The River peer (scripts/bench/river, a module of its own that bench.sh
// builds at bench time): a job queue a team would pick instead of
// opledger's worker path. Each sample is a river-peer process inserting a
// backlog of jobs in one InsertMany and working them 32 at once, each job
// the provider call opledger's worker makes (POST /v1/refunds with an
// Idempotency-Key) to a provider simulator started fresh for the sample,
// as opledger's samples get theirs.

// riverSchema holds River's tables in the bench database.
const riverSchema = "bench_river"

// riverGuarantees is what every River figure states beside its number.
const riverGuarantees = "River v0.51 (insert, fetch, the same HTTP call to provider-sim with an Idempotency-Key, complete; " +
	"fetch and completion batched; 32 at once, fetch cooldown 1 ms; a job counted when its Work returns): a job durable once inserted, handed to one worker at a time " +
	"(until its rescue deadline), " +
	"retried after an error or a crash; nothing recorded before the call, no lease fencing a stale worker, no outcome event, " +
	"no capability, no hash chain"

var riverSamples atomic.Int64

func riverBin(s *settings) string { return filepath.Join(s.binDir, "river-peer") }

// riverMigrate creates River's tables (once per run).
func riverMigrate(ctx context.Context, s *settings) error {
	if _, err := os.Stat(riverBin(s)); err != nil {
		return fmt.Errorf("the River peer is not built (scripts/bench.sh builds scripts/bench/river): %w", err)
	}
	out, err := exec.CommandContext(ctx, riverBin(s), "migrate", "--database-url", s.url, "--schema", riverSchema).CombinedOutput()
	if err != nil {
		return fmt.Errorf("river-peer migrate: %w: %s", err, lastLines(string(out), 3))
	}
	return nil
}

// riverSample is one River sample of n jobs: jobs per second from the
// insert to the last completion.
func riverSample(ctx context.Context, s *settings, n int) (float64, error) {
	sp, err := startSim(ctx, s, "")
	if err != nil {
		return 0, err
	}
	defer sp.stop()
	tag := strconv.FormatInt(riverSamples.Add(1), 10)
	cmd := exec.CommandContext(ctx, riverBin(s), "sample", "--database-url", s.url, "--schema", riverSchema, "--provider-url", sp.URL,
		"--jobs", strconv.Itoa(n), "--workers", strconv.Itoa(e2eConcurrency), "--tag", tag)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("river-peer sample: %w: %s", err, lastLines(errs.String(), 3))
	}
	var r struct {
		JobsPerS float64 `json:"jobs_per_s"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return 0, fmt.Errorf("river-peer printed %q: %w", out.String(), err)
	}
	return r.JobsPerS, nil
}
