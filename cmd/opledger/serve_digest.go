package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"opledger/adapters/httpapi"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain"
	"opledger/domain/audit"
	"opledger/domain/regression"
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
// left the whole log under a signed digest; regs, when set, is told what
// its tree notices and says when another cache or process noticed.
func (f *digestFlags) role(store eventstore.Store, metrics *httpapi.Metrics, regs *regressions, log *slog.Logger) (role, error) {
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
	d := &scheduledDigests{store: store, digester: audit.NewDigester(store), signer: signer, dir: f.dir, now: now, log: log, current: metrics.ObserveDigest}
	if regs != nil {
		d.regressions, d.monitor = regs.recorder, regs.monitor
	}
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
//
// Its tree remembers the log, so it never trusts it when the log went
// back (a failover that lost acknowledged writes): a digest must never
// cover a history the store no longer holds. Each tick first asks the
// store whether it still holds the tree's last event; the first tick
// compares the log with the last digest signed (latest.json: as many
// events, the same root); and a regression another cache or process
// recorded (the monitor's count grew) makes it build the tree again from
// the log as it is, since events before the tree's last may be gone. A
// regression the tree noticed is told to regressions (cache digest_tree).
type scheduledDigests struct {
	store    eventstore.Store
	digester *audit.Digester
	signer   *audit.DigestSigner
	dir      string
	now      func() time.Time
	log      *slog.Logger
	written  uint64 // tree size of the last digest written
	root     string // its root
	any      bool
	// current, when set, is told the time of each tick after which a
	// signed digest covers every event of the log.
	current func(time.Time)
	// regressions is told of what the tree notices (nil: logged only);
	// monitor, when set, counts the regressions recorded anywhere.
	regressions eventstore.RegressionObserver
	monitor     *regression.Monitor
	seenTotal   int64 // the monitor's count when the tree was last built
	compared    bool  // the log was compared with latest.json
}

// rebuild drops the tree: the next catch-up reads the whole log again.
func (d *scheduledDigests) rebuild() {
	d.digester = audit.NewDigester(d.store)
}

// regressed tells what the tree noticed.
func (d *scheduledDigests) regressed(ctx context.Context, seenPosition, seenID, detail string) {
	r := eventstore.Regression{Cache: domain.CacheDigestTree, SeenVersion: eventstore.NoStreamVersion, SeenEventID: seenID,
		HeldVersion: eventstore.NoStreamVersion, SeenPosition: seenPosition, Detail: detail}
	if h, ok := d.store.(eventstore.Header); ok {
		if head, err := h.Head(ctx); err == nil && head != nil {
			r.HeldPosition = head.String()
		}
	}
	d.log.Error("digest: LOG REGRESSION: the log no longer holds what the digest tree (or the last digest signed) holds; the next digest covers the log as it is",
		"detail", detail)
	if d.regressions != nil {
		d.regressions.ObserveRegression(ctx, r)
	}
}

// checkTree drops the tree when the log went back under it: a regression
// recorded anywhere since it was built (events before its last may be
// gone), or its last event no longer in the store. It reports false when
// the store cannot be asked.
func (d *scheduledDigests) checkTree(ctx context.Context) bool {
	if d.monitor != nil {
		_ = d.monitor.Refresh(ctx)
		if total := d.monitor.Status().Total; total > d.seenTotal {
			d.seenTotal = total
			if d.digester.Size() > 0 {
				d.log.Warn("digest: a log regression was recorded; building the tree again from the log as it is")
				d.rebuild()
			}
		}
	}
	pos := d.digester.Last()
	_, _, id := d.digester.LastEvent()
	if err := d.digester.Check(ctx); err != nil {
		if !errors.Is(err, audit.ErrLogWentBack) {
			if ctx.Err() == nil {
				d.log.Error("digest: reading the log failed; retrying at the next tick", "err", err)
			}
			return false
		}
		text := ""
		if pos != nil {
			text = pos.String()
		}
		d.regressed(ctx, text, id, err.Error())
		d.rebuild()
	}
	return true
}

// compareWithLatest compares the tree, just built from the whole log,
// with latest (the last digest this directory holds): the log must hold
// at least as many events, and its first ones must be those latest
// signed.
func (d *scheduledDigests) compareWithLatest(ctx context.Context, latest *audit.Digest) {
	size := d.digester.Size()
	if size < latest.TreeSize {
		d.regressed(ctx, latest.Position, "", fmt.Sprintf("the last digest signed (latest.json, %s) covers %d events; the log holds %d", latest.Time, latest.TreeSize, size))
		return
	}
	if root, ok := d.digester.RootAt(latest.TreeSize); ok && hex.EncodeToString(root) != latest.Root {
		d.regressed(ctx, latest.Position, "", fmt.Sprintf("the log's first %d events are not those the last digest signed (latest.json, %s) covers", latest.TreeSize, latest.Time))
	}
}

// maxDigestCatchUp bounds the events one tick reads, so that a log growing
// faster than it is read still lets the tick end (the next one goes on).
const maxDigestCatchUp = 50_000_000

// once catches up and writes a digest if the log grew since the last one:
// DIR/digest-<events>-<time>.json and DIR/latest.json, each written to a
// temporary file and renamed, so a reader never sees half a digest.
func (d *scheduledDigests) once(ctx context.Context) {
	if !d.checkTree(ctx) {
		return
	}
	var latest *audit.Digest
	if !d.compared {
		if l, err := readDigest(filepath.Join(d.dir, "latest.json"), "latest"); err == nil {
			latest = l
			d.digester.Watch(l.TreeSize)
		}
	}
	if _, err := d.digester.CatchUp(ctx, nil, maxDigestCatchUp); err != nil {
		if ctx.Err() == nil {
			d.log.Error("digest: reading the log failed; retrying at the next tick", "err", err)
		}
		return
	}
	if !d.compared {
		d.compared = true
		if latest != nil {
			d.compareWithLatest(ctx, latest)
		}
	}
	dg, err := d.digester.Sign(d.signer, d.now())
	if err != nil {
		d.log.Error("digest: NOT SIGNED", "err", err)
		return
	}
	if d.any && dg.TreeSize == d.written && dg.Root == d.root {
		d.covered() // the last digest still covers the whole log
		return
	}
	name := filepath.Join(d.dir, fmt.Sprintf("digest-%09d-%s.json", dg.TreeSize, dg.TimeValue().Format("20060102T150405Z")))
	for _, path := range []string{name, filepath.Join(d.dir, "latest.json")} {
		if err := writeDigestTo(dg, path, nil); err != nil {
			d.log.Error("digest: write failed", "file", path, "err", err)
			return
		}
	}
	d.written, d.root, d.any = dg.TreeSize, dg.Root, true
	d.covered()
	d.log.Info("digest signed", "file", name, "events", dg.TreeSize, "position", dg.Position, "root", dg.Root, "key_id", dg.KeyID)
}

// covered tells current that a signed digest now covers the whole log.
func (d *scheduledDigests) covered() {
	if d.current != nil {
		d.current(d.now())
	}
}
