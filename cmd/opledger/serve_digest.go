package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/audit"
	"opledger/eventstore"
)

// digestFlags are serve's settings for scheduled digests: with
// --digest-every, serve signs a digest of the log on that schedule and
// writes it to --digest-dir, so that digests exist without anyone
// remembering to make them. Auditors copy them out of the database's reach.
type digestFlags struct {
	every   string
	dir     string
	keyFile string

	interval time.Duration
	// now stamps digests; nil means time.Now (tests inject a clock).
	now func() time.Time
}

// digestSettings are serve's settings of scheduled digests.
var digestSettings = []*settings.Setting{settings.DigestEvery, settings.DigestDir, settings.DigestKey}

// digestsFrom reads and checks serve's digest settings.
func digestsFrom(f *settings.Flags) (*digestFlags, error) {
	d := &digestFlags{every: f.Text(settings.DigestEvery), dir: f.Text(settings.DigestDir), keyFile: f.Text(settings.DigestKey)}
	return d, d.validate()
}

// validate checks the settings, naming each one at fault.
func (f *digestFlags) validate() error {
	if f.every == "" {
		return nil
	}
	var errs []error
	d, err := time.ParseDuration(f.every)
	if err != nil || d < time.Second {
		errs = append(errs, fmt.Errorf("OPLEDGER_DIGEST_EVERY / --digest-every %q: want a duration of at least 1s, like 1h", f.every))
	}
	f.interval = d
	if f.dir == "" {
		errs = append(errs, errors.New("--digest-every needs OPLEDGER_DIGEST_DIR / --digest-dir"))
	} else if st, err := os.Stat(f.dir); err != nil || !st.IsDir() {
		errs = append(errs, fmt.Errorf("OPLEDGER_DIGEST_DIR / --digest-dir %q is not a directory", f.dir))
	}
	if f.keyFile == "" {
		errs = append(errs, fmt.Errorf("--digest-every needs %s / --%s (make one with 'opledger audit digest-key new --out FILE')", digestKeyEnv, digestKeyFlag))
	}
	return errors.Join(errs...)
}

// role returns serve's digest role, or a role without run when digests are
// off. It loads the key now, so that a bad key stops serve at start. The
// supervisor may run it again after it returned: the digester it keeps
// goes on from where it was. metrics shows the schedule and each tick that
// left the whole log under a signed digest.
func (f *digestFlags) role(store eventstore.Store, metrics *httpapi.Metrics, log *slog.Logger) (role, error) {
	if f == nil || f.every == "" {
		return role{}, nil
	}
	signer, err := loadDigestSigner(f.keyFile)
	if err != nil {
		return role{}, err
	}
	now := f.now
	if now == nil {
		now = time.Now
	}
	metrics.DigestSchedule(f.interval)
	d := &scheduledDigests{digester: audit.NewDigester(store), signer: signer, dir: f.dir, now: now, log: log, current: metrics.ObserveDigest}
	run := func(ctx context.Context) error {
		t := time.NewTicker(f.interval)
		defer t.Stop()
		for {
			d.once(ctx)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	return role{name: "digests", run: run}, nil
}

// scheduledDigests is the digest role's state: one digester, extended with
// the log's new events at each tick (the first tick reads the whole log).
type scheduledDigests struct {
	digester *audit.Digester
	signer   *audit.DigestSigner
	dir      string
	now      func() time.Time
	log      *slog.Logger
	written  uint64 // tree size of the last digest written
	any      bool
	// current, when set, is told the time of each tick after which a
	// signed digest covers every event of the log.
	current func(time.Time)
}

// maxDigestCatchUp bounds the events one tick reads, so that a log growing
// faster than it is read still lets the tick end (the next one goes on).
const maxDigestCatchUp = 50_000_000

// once catches up and writes a digest if the log grew since the last one:
// DIR/digest-<events>-<time>.json and DIR/latest.json, each written to a
// temporary file and renamed, so a reader never sees half a digest.
func (d *scheduledDigests) once(ctx context.Context) {
	if _, err := d.digester.CatchUp(ctx, nil, maxDigestCatchUp); err != nil {
		if ctx.Err() == nil {
			d.log.Error("digest: reading the log failed; retrying at the next tick", "err", err)
		}
		return
	}
	if d.any && d.digester.Size() == d.written {
		d.covered() // the last digest still covers the whole log
		return
	}
	dg, err := d.digester.Sign(d.signer, d.now())
	if err != nil {
		d.log.Error("digest: NOT SIGNED", "err", err)
		return
	}
	name := filepath.Join(d.dir, fmt.Sprintf("digest-%09d-%s.json", dg.TreeSize, dg.TimeValue().Format("20060102T150405Z")))
	for _, path := range []string{name, filepath.Join(d.dir, "latest.json")} {
		if err := writeDigestTo(dg, path, nil); err != nil {
			d.log.Error("digest: write failed", "file", path, "err", err)
			return
		}
	}
	d.written, d.any = dg.TreeSize, true
	d.covered()
	d.log.Info("digest signed", "file", name, "events", dg.TreeSize, "position", dg.Position, "root", dg.Root, "key_id", dg.KeyID)
}

// covered tells current that a signed digest now covers the whole log.
func (d *scheduledDigests) covered() {
	if d.current != nil {
		d.current(d.now())
	}
}
