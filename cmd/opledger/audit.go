package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"opledger/adapters/provider"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/eventstore"
)

func init() {
	register("audit", "replay, verify (invariants, hash chain, digests), digest, prove, diff against a provider export", runAudit)
}

func runAudit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, `usage:
  opledger audit replay <operation-id> [--format table|json|mermaid] [--wide] [--width N]
  opledger audit verify [--json] [--from P] [--to P] [--allow-unhashed]
                        [--digest FILE [--previous FILE [--consistency-out FILE]] --public-key FILE]
  opledger audit digest --digest-key FILE [--to P] [--out FILE]
  opledger audit digest-key new --out FILE
  opledger audit prove <operation-id> --digest FILE [--out FILE]
  opledger audit check-proof PROOF --digest FILE --public-key FILE [--json]
  opledger audit check-consistency PROOF --previous FILE --digest FILE --public-key FILE
  opledger audit provider-diff [--provider NAME] --provider-ledger FILE [--json]

Each reads the event store itself (never the read models): DATABASE_URL / --database-url;
check-proof and check-consistency read nothing but their files. verify, check-proof,
check-consistency and provider-diff exit 0 when all holds, 1 with a report when not. See
docs/audit.md.`)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "replay":
		return auditReplay(ctx, args[1:], stdout, stderr)
	case "verify":
		return auditVerify(ctx, args[1:], stdout, stderr)
	case "provider-diff":
		return auditProviderDiff(ctx, args[1:], stdout, stderr)
	case "digest":
		return auditDigest(ctx, args[1:], stdout, stderr)
	case "digest-key":
		return auditDigestKey(ctx, args[1:], stdout, stderr)
	case "prove":
		return auditProve(ctx, args[1:], stdout, stderr)
	case "check-proof":
		return auditCheckProof(ctx, args[1:], stdout, stderr)
	case "check-consistency":
		return auditCheckConsistency(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "opledger audit: unknown subcommand %q (replay, verify, digest, digest-key, prove, check-proof, check-consistency, provider-diff)\n", args[0])
	return 2
}

func auditReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit replay", "<operation-id> [--format table|json|mermaid] [--wide] [--width N] [flags]", stderr)
	f.Bind(storeSettings...)
	format := f.Local().String("format", "table", "table (fits --width columns), json, or mermaid (the sequence diagram the console draws)")
	asJSON := f.Local().Bool("json", false, "the same as --format json")
	wide := f.Local().Bool("wide", false, "with --format table: every field on one line, however wide")
	width := f.Local().Int("width", audit.DefaultTableWidth, "with --format table: the columns to fit")
	if code, ok := f.Parse(args); !ok { // the operation id may come before or after the flags
		return code
	}
	if len(f.Args()) > 1 {
		return fail(stderr, "audit replay", fmt.Errorf("one operation id, not %q", f.Args()))
	}
	opArg := f.Arg(0)
	if *asJSON {
		*format = "json"
	}
	switch *format {
	case "table", "json", "mermaid":
	default:
		return fail(stderr, "audit replay", fmt.Errorf("--format %q: want table, json or mermaid", *format))
	}
	if *width < 1 {
		return fail(stderr, "audit replay", fmt.Errorf("--width %d: want a positive number of columns", *width))
	}
	op, err := domain.ParseOperationID(opArg)
	if err != nil {
		return fail(stderr, "audit replay", err)
	}
	store, closeStore, err := openEventStore(ctx, dbFrom(f))
	if err != nil {
		return fail(stderr, "audit replay", err)
	}
	defer closeStore()
	rows, err := audit.Replay(ctx, store, op)
	if err != nil {
		return fail(stderr, "audit replay", err)
	}
	switch {
	case *format == "json":
		err = audit.WriteTimelineJSON(stdout, op, rows)
	case *format == "mermaid":
		err = audit.WriteTimelineMermaid(stdout, op, rows)
	case *wide:
		err = audit.WriteTimelineText(stdout, op, rows)
	default:
		err = audit.WriteTimelineTable(stdout, op, rows, *width)
	}
	if err != nil {
		return fail(stderr, "audit replay", err)
	}
	return 0
}

func auditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit verify", "[--json] [--from P] [--to P] [--allow-unhashed] [--digest FILE [--previous FILE [--consistency-out FILE]] --public-key FILE] [flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.DigestPublicKey)
	asJSON := f.Local().Bool("json", false, "print the report as JSON")
	from := f.Local().String("from", "", "check events strictly after this global position (as printed in reports)")
	to := f.Local().String("to", "", "check events up to and including this global position")
	digestFile := f.Local().String("digest", "", "a signed digest the log must match: its events unchanged, none removed, inserted or reordered")
	previousFile := f.Local().String("previous", "", "an earlier digest the --digest one must extend (a consistency proof)")
	consistencyOut := f.Local().String("consistency-out", "", "with --previous: write the consistency proof here when it holds, for audit check-consistency (no log needed)")
	allowUnhashed := f.Local().Bool("allow-unhashed", false, "report events stored before hashing began as information, not violations")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, "audit verify", fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	pub := f.Text(settings.DigestPublicKey)
	var opts audit.VerifyOptions
	opts.AllowUnhashed = *allowUnhashed
	if *previousFile != "" && *digestFile == "" {
		return fail(stderr, "audit verify", errors.New("--previous needs --digest (the later digest that must extend it)"))
	}
	if *consistencyOut != "" && *previousFile == "" {
		return fail(stderr, "audit verify", errors.New("--consistency-out needs --previous and --digest (the two digests the proof is about)"))
	}
	if *digestFile != "" {
		var err error
		if opts.DigestKey, err = loadDigestVerifier(pub); err != nil {
			return fail(stderr, "audit verify", err)
		}
		if opts.Digest, err = readDigest(*digestFile, "--digest"); err != nil {
			return fail(stderr, "audit verify", err)
		}
		if *previousFile != "" {
			if opts.Previous, err = readDigest(*previousFile, "--previous"); err != nil {
				return fail(stderr, "audit verify", err)
			}
		}
	}
	store, closeStore, err := openEventStore(ctx, dbFrom(f))
	if err != nil {
		return fail(stderr, "audit verify", err)
	}
	defer closeStore()
	if opts.From, err = parsePosition(store, "--from", *from); err != nil {
		return fail(stderr, "audit verify", err)
	}
	if opts.To, err = parsePosition(store, "--to", *to); err != nil {
		return fail(stderr, "audit verify", err)
	}
	p := newProgress(stderr, "events verified") // on a terminal only: piped, nothing
	report, err := audit.Verify(ctx, withProgress(ctx, store, p, opts.To), opts)
	p.finish()
	if err != nil {
		return fail(stderr, "audit verify", err)
	}
	if *asJSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "audit verify", err)
	}
	if *consistencyOut != "" {
		if err := writeConsistencyProof(*consistencyOut, opts.Previous, opts.Digest, report); err != nil {
			return fail(stderr, "audit verify", err)
		}
	}
	if !report.OK() {
		return 1
	}
	return 0
}

func auditProviderDiff(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("audit provider-diff", "[--provider NAME] --provider-ledger FILE [--json] [flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(settings.ProviderProfile) // --provider here: whose export it is (a profile, or an api: stripe, meridian), which decides its format
	file := f.Local().String("provider-ledger", "", "the provider's export (the simulator's GET /_sim/ledger/export): JSON lines for stripe, a CSV settlement report for meridian")
	asJSON := f.Local().Bool("json", false, "print the report as JSON")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	name := cmp.Or(f.Text(settings.ProviderProfile), defaultProfile.Name)
	if *file == "" {
		return fail(stderr, "audit provider-diff", fmt.Errorf("--provider-ledger FILE is required"))
	}
	fh, err := os.Open(*file)
	if err != nil {
		return fail(stderr, "audit provider-diff", err)
	}
	defer fh.Close()
	export, err := provider.ExportReader(name, fh)
	if err != nil {
		return fail(stderr, "audit provider-diff", fmt.Errorf("%s: %w", f.Name(settings.ProviderProfile), err))
	}
	store, closeStore, err := openEventStore(ctx, dbFrom(f))
	if err != nil {
		return fail(stderr, "audit provider-diff", err)
	}
	defer closeStore()
	report, err := audit.ProviderDiff(ctx, store, export)
	if err != nil {
		return fail(stderr, "audit provider-diff", err)
	}
	if *asJSON {
		err = report.WriteJSON(stdout)
	} else {
		err = report.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "audit provider-diff", err)
	}
	if !report.OK() {
		return 1
	}
	return 0
}

func parsePosition(store eventstore.Store, flag, text string) (eventstore.Position, error) {
	if text == "" {
		return nil, nil
	}
	p, err := store.ParsePosition(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return p, nil
}
