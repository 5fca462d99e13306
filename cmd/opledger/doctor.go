package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"opledger/cmd/opledger/internal/settings"
)

func init() {
	register("doctor", "check a deployment before it takes traffic: schemas, keys, tokens, replication, clock, Kafka, provider, digests, read models", runDoctor)
}

// Verdicts of a doctor check.
const (
	verdictOK   = "ok"   // as it should be
	verdictWarn = "warn" // works, but not as production should run; read the detail
	verdictFail = "fail" // serve or the workers refuse to run, or would lose or hold refunds
	verdictSkip = "skip" // does not apply here, or cannot be asked (a check it depends on failed)
)

// doctorCheck is one line of the report: what was checked, its verdict,
// what was found, and what to do about it.
type doctorCheck struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
}

// doctorReport is the whole report; Verdict is its worst check (fail, else
// warn, else ok).
type doctorReport struct {
	Verdict string        `json:"verdict"`
	Checks  []doctorCheck `json:"checks"`
}

// doctorSettings are what doctor reads: those of serve and the worker that
// it checks.
var doctorSettings = []*settings.Setting{
	settings.ReadModelSchema, settings.TransportSchema, settings.KafkaBrokers,
	settings.ProviderURL, settings.ExportDeliveryURL, settings.TokensFile, settings.SigningKeys, settings.SigningKeyFile,
	settings.RequireSyncReplication, settings.DigestKey, settings.DigestPublicKey, settings.DigestEvery, settings.DigestDir,
	settings.DoctorCheckTimeout,
}

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newFlags("doctor", "[--json] [flags]", stderr)
	f.Bind(storeSettings...)
	f.Bind(doctorSettings...)
	asJSON := f.Local().Bool("json", false, "print the report as one JSON object")
	if code, ok := f.Parse(args); !ok {
		return code
	}
	if len(f.Args()) > 0 {
		return fail(stderr, "doctor", fmt.Errorf("unexpected arguments %q", f.Args()))
	}
	rep := diagnose(ctx, doctorConfigFrom(f))
	if *asJSON {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fail(stderr, "doctor", err)
		}
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		writeDoctorReport(stdout, rep)
	}
	if rep.Verdict == verdictFail {
		return 1
	}
	return 0
}

// writeDoctorReport prints one line per check (its verdict, name and
// detail, the fix indented below), then the verdict.
func writeDoctorReport(w io.Writer, rep doctorReport) {
	name := 0
	for _, c := range rep.Checks {
		name = max(name, len(c.Name))
	}
	counts := map[string]int{}
	for _, c := range rep.Checks {
		counts[c.Verdict]++
		fmt.Fprintf(w, "%-4s  %-*s  %s\n", strings.ToUpper(c.Verdict), name, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      %-*s  → %s\n", name, "", c.Fix)
		}
	}
	fmt.Fprintf(w, "verdict: %s (%d ok, %d warnings, %d failed, %d skipped)\n",
		strings.ToUpper(rep.Verdict), counts[verdictOK], counts[verdictWarn], counts[verdictFail], counts[verdictSkip])
}

// worst is the report's verdict.
func worst(checks []doctorCheck) string {
	v := verdictOK
	for _, c := range checks {
		switch {
		case c.Verdict == verdictFail:
			return verdictFail
		case c.Verdict == verdictWarn:
			v = verdictWarn
		}
	}
	return v
}

// doctorConfig is what doctor was told to check.
type doctorConfig struct {
	db              *dbConfig
	brokers         string
	providerURL     string
	exportURL       string
	tokensFile      string
	signingKeys     string
	signingKeyFile  string
	requireSync     bool
	digestKey       string
	digestPublicKey string
	digestEvery     time.Duration // 0: serve signs no digests
	digestDir       string
	timeout         time.Duration
	now             func() time.Time
}

func doctorConfigFrom(f *settings.Flags) doctorConfig {
	c := doctorConfig{db: dbFrom(f), brokers: f.Text(settings.KafkaBrokers), providerURL: f.Text(settings.ProviderURL),
		exportURL: f.Text(settings.ExportDeliveryURL), tokensFile: f.Text(settings.TokensFile),
		signingKeys: f.Text(settings.SigningKeys), signingKeyFile: f.Text(settings.SigningKeyFile),
		requireSync: f.Bool(settings.RequireSyncReplication), digestKey: f.Text(settings.DigestKey),
		digestPublicKey: f.Text(settings.DigestPublicKey), digestDir: f.Text(settings.DigestDir),
		timeout: f.Duration(settings.DoctorCheckTimeout), now: time.Now}
	if f.Text(settings.DigestEvery) != "" {
		c.digestEvery = f.Duration(settings.DigestEvery)
	}
	return c
}
