package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"opledger/adapters/harness"
	"opledger/domain/audit"
	"opledger/eventstore"
	"opledger/eventstore/memory"
)

// demoForgery is the demo's last act, a DEMONSTRATION on the demo's own
// schema (or memory store) only: an auditor signs a digest of the log, an
// insider then rewrites the 120.00 refund as 200.00 straight in the store,
// and verify catches it, with the digest and without. It reports whether
// both caught it.
func demoForgery(ctx context.Context, env *demoEnv, stdout io.Writer) (bool, error) {
	fmt.Fprintln(stdout, "\n== DEMONSTRATION: an insider forges history (on this demo's own event store only)")
	seed := make([]byte, 32)
	if _, err := rand.Read(seed); err != nil {
		return false, err
	}
	signer, err := audit.NewDigestSigner(seed)
	if err != nil {
		return false, err
	}
	digest, err := audit.MakeDigest(ctx, env.store, nil, signer, time.Now())
	if err != nil {
		return false, err
	}
	fmt.Fprintf(stdout, "an auditor keeps a signed digest (an ephemeral key %s, for this demonstration): %d events up to %s, root %s\n",
		digest.KeyID, digest.TreeSize, digest.Position, digest.Root[:16])

	stream := harness.StoryOperation.StreamName()
	switch s := env.store.(type) {
	case *memory.Store:
		fmt.Fprintln(stdout, "the insider rewrites the stored OperationRequested of "+string(harness.StoryOperation)+" in memory: amount_minor 12000 -> 20000")
		s.Tamper(true, func(log []eventstore.RecordedEvent) []eventstore.RecordedEvent {
			for i, e := range log {
				if e.StreamID == stream && e.Version == 0 {
					log[i].Data = []byte(strings.Replace(string(e.Data), `"amount_minor":12000`, `"amount_minor":20000`, 1))
				}
			}
			return log
		})
	default:
		if env.pool == nil {
			return false, errors.New("demo: no PostgreSQL pool to forge with")
		}
		sql := `UPDATE ` + pgx.Identifier{env.storeSchema, "events"}.Sanitize() + ` SET data = jsonb_set(data, '{amount_minor}', '20000')
 WHERE stream_id = '` + stream + `' AND event_type = 'OperationRequested'`
		fmt.Fprintf(stdout, "the insider runs, as a DBA could:\n  %s;\n", strings.ReplaceAll(sql, "\n", "\n  "))
		if _, err := env.pool.Exec(ctx, sql); err != nil {
			return false, fmt.Errorf("demo forgery: %w", err)
		}
	}

	fmt.Fprintln(stdout, "\n-- audit verify (the hash chain alone)")
	chainOnly, err := audit.Verify(ctx, env.store, audit.VerifyOptions{})
	if err != nil {
		return false, err
	}
	if err := chainOnly.WriteText(stdout); err != nil {
		return false, err
	}
	fmt.Fprintln(stdout, "\n-- audit verify --digest (against the auditor's digest)")
	withDigest, err := audit.Verify(ctx, env.store, audit.VerifyOptions{Digest: digest, DigestKey: signer.DigestVerifier})
	if err != nil {
		return false, err
	}
	if err := withDigest.WriteText(stdout); err != nil {
		return false, err
	}
	caught := chainOnly.ByInvariant[audit.H1ChainIntact.ID] > 0 && withDigest.ByInvariant[audit.D1MatchesDigest.ID] > 0
	verdict := "the forgery was caught by both"
	if !caught {
		verdict = "THE FORGERY WAS NOT CAUGHT"
	}
	fmt.Fprintf(stdout, "\n== end of the demonstration: %s (the log above is forged on purpose)\n", verdict)
	return caught, nil
}
