package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/audit"
)

// auditDigestKey is "audit digest-key new --out FILE".
func auditDigestKey(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "new" {
		fmt.Fprintln(stderr, "usage: opledger audit digest-key new --out FILE")
		return 2
	}
	f := newFlags("audit digest-key new", "--out FILE", stderr)
	out := f.Local().String("out", "", "where to write the private key (base64 Ed25519 seed, mode 0600); the public key goes to FILE.pub")
	if code, ok := f.Parse(args[1:]); !ok {
		return code
	}
	if *out == "" {
		return fail(stderr, "audit digest-key new", errors.New("--out FILE is required"))
	}
	id, err := newDigestKey(*out)
	if err != nil {
		return fail(stderr, "audit digest-key new", err)
	}
	fmt.Fprintf(stdout, "digest key %s: private key in %s (keep it where serve or the auditor's tool can read it, nowhere else), public key in %s%s (hand it to auditors)\n",
		id, *out, *out, digestPublicSuffix)
	return 0
}

// auditDigest is "audit digest": one signed digest of the log as it is.
func auditDigest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit digest", "--digest-key FILE [--to P] [--out FILE] [flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.DigestKey)
	to := f.Local().String("to", "", "cover the log up to and including this global position (default: its end now)")
	out := f.Local().String("out", "", "write the digest to FILE instead of stdout")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	signer, err := loadDigestSigner(f.Text(settings.DigestKey))
	if err != nil {
		return fail(stderr, "audit digest", err)
	}
	store, closeStore, err := openEventStore(ctx, dbFrom(f))
	if err != nil {
		return fail(stderr, "audit digest", err)
	}
	defer closeStore()
	toPos, err := parsePosition(store, "--to", *to)
	if err != nil {
		return fail(stderr, "audit digest", err)
	}
	d, err := audit.MakeDigest(ctx, store, toPos, signer, time.Now())
	if err != nil {
		return fail(stderr, "audit digest", err)
	}
	if err := writeDigestTo(d, *out, stdout); err != nil {
		return fail(stderr, "audit digest", err)
	}
	if *out != "" {
		fmt.Fprintf(stdout, "digest of %d events up to %s, root %s, key %s: %s\n", d.TreeSize, orDash(d.Position), d.Root, d.KeyID, *out)
	}
	return 0
}

// writeDigestTo writes d to path (atomically, see writeAtomically) or,
// when path is empty, to stdout.
func writeDigestTo(d *audit.Digest, path string, stdout io.Writer) error {
	if path == "" {
		return d.WriteJSON(stdout)
	}
	return writeAtomically(path, d.WriteJSON)
}

// writeAtomically writes a file at path with write: into a temporary file
// beside it, synced, then renamed, so that a reader never meets half of
// it (mode 0644: digests and proofs are public).
func writeAtomically(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".opledger-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// writeConsistencyProof writes the proof report found that digest extends
// previous (the previous digest's check), or says why there is none.
func writeConsistencyProof(path string, previous, digest *audit.Digest, report audit.Report) error {
	for _, c := range report.Digests {
		if c.Role != "previous" {
			continue
		}
		p, err := audit.NewConsistencyProof(previous, digest, c)
		if err != nil {
			return fmt.Errorf("--consistency-out: no proof written: %w", err)
		}
		return writeAtomically(path, p.WriteJSON)
	}
	return errors.New("--consistency-out: no proof written: the report checked no previous digest")
}

// auditCheckConsistency is "audit check-consistency PROOF --previous FILE
// --digest FILE --public-key FILE": offline, it opens no database.
func auditCheckConsistency(_ context.Context, args []string, stdout, stderr io.Writer) int {
	const usage = "PROOF --previous FILE --digest FILE --public-key FILE"
	f := newFlags("audit check-consistency", usage, stderr)
	f.Bind(settings.DigestPublicKey)
	previousFile := f.Local().String("previous", "", "the earlier digest")
	digestFile := f.Local().String("digest", "", "the later digest, which must extend the earlier one")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	proofArg := f.Arg(0)
	if proofArg == "" || len(f.Args()) > 1 {
		return fail(stderr, "audit check-consistency", errors.New("one proof file is required: opledger audit check-consistency "+usage))
	}
	v, err := loadDigestVerifier(f.Text(settings.DigestPublicKey))
	if err != nil {
		return fail(stderr, "audit check-consistency", err)
	}
	earlier, err := readDigest(*previousFile, "--previous")
	if err != nil {
		return fail(stderr, "audit check-consistency", err)
	}
	later, err := readDigest(*digestFile, "--digest")
	if err != nil {
		return fail(stderr, "audit check-consistency", err)
	}
	fh, err := os.Open(proofArg)
	if err != nil {
		return fail(stderr, "audit check-consistency", err)
	}
	defer fh.Close()
	p, err := audit.ParseConsistencyProof(fh)
	if err != nil {
		return fail(stderr, "audit check-consistency", fmt.Errorf("%s: %w", proofArg, err))
	}
	if err := audit.CheckConsistency(p, earlier, later, v); err != nil {
		if errors.Is(err, audit.ErrNotConsistent) || errors.Is(err, audit.ErrBadSignature) {
			fmt.Fprintf(stdout, "NOT PROVED: %v\n", err)
			return 1
		}
		return fail(stderr, "audit check-consistency", err)
	}
	fmt.Fprintf(stdout, "OK: the digest of %d events (root %s) extends the one of %d events (root %s): every event the earlier covers is, unchanged and in order, the start of the later\n",
		later.TreeSize, later.Root, earlier.TreeSize, earlier.Root)
	return 0
}

// auditProve is "audit prove <operation-id> --digest FILE".
func auditProve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit prove", "<operation-id> --digest FILE [--out FILE] [flags]", stderr)
	f.Bind(storeSettings...)
	digestFile := f.Local().String("digest", "", "the digest to prove against")
	out := f.Local().String("out", "", "write the proof to FILE instead of stdout")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	op, err := domain.ParseOperationID(f.Arg(0))
	if err != nil {
		return fail(stderr, "audit prove", err)
	}
	d, err := readDigest(*digestFile, "--digest")
	if err != nil {
		return fail(stderr, "audit prove", err)
	}
	store, closeStore, err := openEventStore(ctx, dbFrom(f))
	if err != nil {
		return fail(stderr, "audit prove", err)
	}
	defer closeStore()
	p, err := audit.Prove(ctx, store, op, d)
	if err != nil {
		return fail(stderr, "audit prove", err)
	}
	w := stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fail(stderr, "audit prove", err)
		}
		defer f.Close()
		w = f
	}
	if err := p.WriteJSON(w); err != nil {
		return fail(stderr, "audit prove", err)
	}
	return 0
}

// auditCheckProof is "audit check-proof FILE --digest FILE --public-key
// FILE": offline, it opens no database.
func auditCheckProof(_ context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit check-proof", "PROOF --digest FILE --public-key FILE [--json]", stderr)
	f.Bind(settings.DigestPublicKey)
	digestFile := f.Local().String("digest", "", "the digest the proof is against")
	asJSON := f.Local().Bool("json", false, "print the verdict as JSON")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	proofArg, pub := f.Arg(0), f.Text(settings.DigestPublicKey)
	if proofArg == "" {
		return fail(stderr, "audit check-proof", errors.New("the proof file is required: opledger audit check-proof PROOF --digest FILE --public-key FILE"))
	}
	v, err := loadDigestVerifier(pub)
	if err != nil {
		return fail(stderr, "audit check-proof", err)
	}
	d, err := readDigest(*digestFile, "--digest")
	if err != nil {
		return fail(stderr, "audit check-proof", err)
	}
	fh, err := os.Open(proofArg)
	if err != nil {
		return fail(stderr, "audit check-proof", err)
	}
	defer fh.Close()
	p, err := audit.ParseProof(fh)
	if err != nil {
		return fail(stderr, "audit check-proof", fmt.Errorf("%s: %w", proofArg, err))
	}
	res, err := audit.CheckProof(p, d, v)
	if err != nil {
		return fail(stderr, "audit check-proof", err)
	}
	if *asJSON {
		err = res.WriteJSON(stdout)
	} else {
		err = res.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "audit check-proof", err)
	}
	if !res.OK {
		return 1
	}
	return 0
}
