package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	kafkago "github.com/segmentio/kafka-go"

	"opledger/adapters/captoken"
	"opledger/adapters/httpapi"
	"opledger/adapters/kafka"
	"opledger/adapters/transport"
	"opledger/adapters/transport/pgstate"
	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/audit"
	"opledger/domain/clock"
	"opledger/eventstore"
	"opledger/projections"
)

// Bounds of doctor's verdicts.
const (
	// maxSkewOK and maxSkewWarn bound the clock difference between this
	// host and PostgreSQL. Leases (60 s by default) and capability expiry
	// are judged by the clocks of the processes that write and sweep: a
	// host a second off lapses a lease a second early or late; past five
	// seconds a lease's margin is eaten.
	maxSkewOK   = time.Second
	maxSkewWarn = 5 * time.Second
	// maxDigestSlack is added to twice the digest interval before a digest
	// is late (as the OpledgerDigestsLate alert does).
	maxDigestSlack = 5 * time.Minute
)

// diagnose runs every check, in the order an operator fixes them: what
// serve refuses to start without first.
func diagnose(ctx context.Context, c doctorConfig) doctorReport {
	d := &doctor{cfg: c}
	d.database(ctx)
	if d.pool != nil {
		defer d.pool.Close()
	}
	d.schemas(ctx)
	d.signingKeys()
	d.digestKey()
	d.tokens()
	d.replication(ctx)
	d.clockSkew(ctx)
	d.kafka(ctx)
	d.endpoint(ctx, "provider", c.providerURL, settings.ProviderURL,
		"serve's reconciler and the workers call it; serve refuses to start without it (unless --disable reconciler)")
	d.endpoint(ctx, "export-delivery", c.exportURL, settings.ExportDeliveryURL, "")
	d.digests()
	d.readModels(ctx)
	return doctorReport{Verdict: worst(d.checks), Checks: d.checks}
}

// doctor holds what one run learned, for the checks after.
type doctor struct {
	cfg      doctorConfig
	checks   []doctorCheck
	pool     *pgxpool.Pool
	store    eventstore.Store
	readsOK  bool // the read models' schema is current
	keys     *captoken.Keys
	digester *audit.DigestSigner
}

func (d *doctor) add(name, verdict, detail, fix string) {
	d.checks = append(d.checks, doctorCheck{Name: name, Verdict: verdict, Detail: detail, Fix: fix})
}

// bounded is ctx bounded by the per-check timeout.
func (d *doctor) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.cfg.timeout)
}

func (d *doctor) database(ctx context.Context) {
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	pool, err := d.cfg.db.pool(ctx)
	if err != nil {
		d.add("database", verdictFail, err.Error(), "set DATABASE_URL (or --database-url) to the ledger's PostgreSQL, and check it accepts connections")
		return
	}
	var version string
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		pool.Close()
		d.add("database", verdictFail, "PostgreSQL at "+d.cfg.db.where()+" does not answer a query: "+connectCause(err), "")
		return
	}
	d.pool = pool
	d.add("database", verdictOK, "PostgreSQL "+version+" at "+d.cfg.db.where(), "")
}

func (d *doctor) schemas(ctx context.Context) {
	if d.pool == nil {
		d.add("schemas", verdictSkip, "the database did not answer", "")
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	var found, missing []string
	check := func(what, schema string, err error) bool {
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s %s: %s", what, schema, errLine(err)))
			return false
		}
		found = append(found, what+" "+schema)
		return true
	}
	if d.cfg.db.storeKind == "postgres" {
		s, err := d.cfg.db.store(ctx, d.pool)
		if check("event store", d.cfg.db.storeSchema, err) {
			d.store = s.Store
		}
	} else {
		s, err := d.cfg.db.store(ctx, nil)
		if err != nil {
			missing = append(missing, "event store (KurrentDB): "+errLine(err))
		} else {
			d.store = s.Store
			found = append(found, "event store (KurrentDB)")
		}
	}
	d.readsOK = check("read models", d.cfg.db.viewSchema, projections.CheckSchema(ctx, d.pool, d.cfg.db.viewSchema))
	check("transport", d.cfg.db.transport, pgstate.CheckSchema(ctx, d.pool, d.cfg.db.transport))
	if len(missing) > 0 {
		d.add("schemas", verdictFail, strings.Join(missing, "; "), "run '"+d.cfg.db.migrateHint()+"' (serve and the workers refuse an outdated schema)")
		return
	}
	d.add("schemas", verdictOK, strings.Join(found, ", ")+": every migration of this build applied", "")
}

// signingKeys: the ring (or the one key) that signs capability tokens
// loads, has an active key, and is readable by its owner only.
func (d *doctor) signingKeys() {
	path := cmpOr(d.cfg.signingKeys, d.cfg.signingKeyFile)
	if path == "" {
		d.add("signing-keys", verdictFail, "no signing key is configured: serve refuses to start (only --dev signs with an ephemeral key)",
			fmt.Sprintf("make a ring with 'opledger keys new --signing-keys DIR' and set %s", settings.SigningKeys.Env))
		return
	}
	var keys *captoken.Keys
	var err error
	if d.cfg.signingKeys != "" {
		keys, err = captoken.OpenKeys(path, 0, clock.System{})
	} else {
		keys, err = captoken.OpenSingleKey(path, clock.System{})
	}
	if err != nil {
		d.add("signing-keys", verdictFail, errLine(err), "fix or replace the key file ('opledger keys list' shows the ring)")
		return
	}
	d.keys = keys
	var states []string
	for _, st := range keys.Status() {
		states = append(states, st.ID+" "+string(st.State))
	}
	if _, err := keys.Ring().Active(time.Now()); err != nil {
		d.add("signing-keys", verdictFail, errLine(err), "'opledger keys new --signing-keys "+path+"' (then SIGHUP every serve)")
		return
	}
	if open := readableByOthers(path); len(open) > 0 {
		d.add("signing-keys", verdictFail, "readable by every user of this host: "+strings.Join(open, ", "),
			"chmod 600 each key file: whoever reads a seed can sign capabilities")
		return
	}
	d.add("signing-keys", verdictOK, fmt.Sprintf("%s: %s", path, strings.Join(states, ", ")), "")
}

// digestKey: the digest key loads, is not a capability signing key, and
// matches the public key auditors were given.
func (d *doctor) digestKey() {
	if d.cfg.digestKey == "" {
		verdict, fix := verdictWarn, "make one with 'opledger audit digest-key new --out FILE', hand out its .pub, and set "+settings.DigestKey.Env
		if d.cfg.digestEvery > 0 {
			verdict, fix = verdictFail, "set "+settings.DigestKey.Env+": serve refuses --digest-every without it"
		}
		d.add("digest-key", verdict, "no digest key: the log's history is hash-chained but no digest outside the database proves it", fix)
		return
	}
	signer, err := loadDigestSigner(d.cfg.digestKey)
	if err != nil {
		d.add("digest-key", verdictFail, errLine(err), "")
		return
	}
	if d.keys != nil {
		for _, st := range d.keys.Status() {
			if pub := st.PublicKey(); pub != nil && bytes.Equal(pub, signer.PublicKey()) {
				d.add("digest-key", verdictFail, "the digest key "+d.cfg.digestKey+" is the capability signing key "+st.ID+": whoever signs capabilities could sign digests of a changed log",
					"make a digest key of its own ('opledger audit digest-key new --out FILE')")
				return
			}
		}
	}
	if d.cfg.digestPublicKey != "" {
		v, err := loadDigestVerifier(d.cfg.digestPublicKey)
		if err != nil {
			d.add("digest-key", verdictFail, errLine(err), "")
			return
		}
		if !bytes.Equal(v.PublicKey(), signer.PublicKey()) {
			d.add("digest-key", verdictFail, fmt.Sprintf("the public key %s (%s) is not the digest key's (%s): auditors holding it reject every digest serve signs",
				d.cfg.digestPublicKey, v.KeyID(), signer.KeyID()), "hand out the .pub written beside the digest key")
			return
		}
	}
	if open := readableByOthers(d.cfg.digestKey); len(open) > 0 {
		d.add("digest-key", verdictFail, "readable by every user of this host: "+strings.Join(open, ", "), "chmod 600 "+d.cfg.digestKey)
		return
	}
	d.digester = signer
	d.add("digest-key", verdictOK, fmt.Sprintf("%s (%s), distinct from every capability signing key", d.cfg.digestKey, signer.KeyID()), "")
}

// tokens: the tokens file loads, holds digests only, and no other user of
// the host may read or change it.
func (d *doctor) tokens() {
	if d.cfg.tokensFile == "" {
		d.add("tokens", verdictFail, "no tokens file: serve refuses to start", "set "+settings.TokensFile.Env+" ('opledger tokens new ROLE NAME >> FILE')")
		return
	}
	t, err := httpapi.LoadTokens(d.cfg.tokensFile)
	if err != nil {
		d.add("tokens", verdictFail, errLine(err), "")
		return
	}
	st, err := os.Stat(d.cfg.tokensFile)
	if err != nil {
		d.add("tokens", verdictFail, errLine(err), "")
		return
	}
	var problems []string
	if lines := t.PlainLines(); len(lines) > 0 {
		problems = append(problems, fmt.Sprintf("plain tokens on lines %v (whoever reads the file holds them)", lines))
	}
	switch mode := st.Mode().Perm(); {
	case mode&0o002 != 0:
		problems = append(problems, fmt.Sprintf("world-writable (%04o): any user of this host can add a token", mode))
	case mode&0o004 != 0:
		problems = append(problems, fmt.Sprintf("world-readable (%04o)", mode))
	}
	if len(problems) > 0 {
		d.add("tokens", verdictFail, d.cfg.tokensFile+": "+strings.Join(problems, "; "),
			"replace each plain token with its digest line ('opledger tokens hash ROLE NAME'), chmod 600 the file, then SIGHUP serve")
		return
	}
	d.add("tokens", verdictOK, fmt.Sprintf("%s: %d tokens, digests only, not readable by other users", d.cfg.tokensFile, t.Len()), "")
}

func (d *doctor) replication(ctx context.Context) {
	if d.store == nil {
		d.add("replication", verdictSkip, "the event store could not be opened", "")
		return
	}
	probe, ok := d.store.(eventstore.ReplicationProbe)
	if !ok {
		d.add("replication", verdictSkip, "KurrentDB keeps the log: run it as a cluster of three", "")
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	r, err := probe.Replication(ctx)
	switch {
	case err != nil:
		d.add("replication", verdictFail, errLine(err), "")
	case r.Synchronous:
		d.add("replication", verdictOK, fmt.Sprintf("synchronous: %d synchronous standby(s); %s", r.SyncStandbys, r.Detail), "")
	case d.cfg.requireSync:
		d.add("replication", verdictFail, "NOT synchronous, and "+settings.RequireSyncReplication.Env+" is set: serve and the workers refuse to start; "+r.Detail,
			"docs/operations.md, \"High availability\"")
	default:
		d.add("replication", verdictWarn, r.Detail+": a failover may lose writes the ledger acknowledged",
			"production: a synchronous standby (docs/operations.md, \"High availability\") and "+settings.RequireSyncReplication.Env+"=true")
	}
}

// clockSkew compares this host's clock with PostgreSQL's, halfway through
// the round trip (the uncertainty is half of it).
func (d *doctor) clockSkew(ctx context.Context) {
	if d.pool == nil {
		d.add("clock", verdictSkip, "the database did not answer", "")
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	var db time.Time
	t0 := time.Now()
	if err := d.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		d.add("clock", verdictFail, "cannot read PostgreSQL's clock: "+connectCause(err), "")
		return
	}
	rtt := time.Since(t0)
	skew := db.Sub(t0.Add(rtt / 2))
	abs := max(skew, -skew)
	detail := fmt.Sprintf("PostgreSQL's clock is %s %s this host's (±%s)", abs.Round(time.Millisecond), aheadOrBehind(skew), (rtt / 2).Round(time.Millisecond))
	fix := "synchronise both hosts' clocks (NTP, chrony): leases and capability expiry are judged by the processes' clocks"
	switch {
	case abs <= maxSkewOK:
		d.add("clock", verdictOK, detail, "")
	case abs <= maxSkewWarn:
		d.add("clock", verdictWarn, detail, fix)
	default:
		d.add("clock", verdictFail, detail+": a 60 s lease lapses that much early or late", fix)
	}
}

func aheadOrBehind(skew time.Duration) string {
	if skew < 0 {
		return "behind"
	}
	return "ahead of"
}

// kafkaTopics are the topics the relay writes and the workers read: the
// relay publishes to existing topics only (topics are provisioned); on
// Kafka serve's relay also publishes the operation feed.
var kafkaTopics = []string{transport.TopicRefundRequests, transport.TopicDeadLetters, transport.TopicSecuritySignals, transport.TopicOperationFeed}

func (d *doctor) kafka(ctx context.Context) {
	if d.cfg.brokers == "" {
		d.add("kafka", verdictSkip, "no "+settings.KafkaBrokers.Env+": the Postgres-only transport", "")
		return
	}
	brokers, err := kafka.ParseBrokers(d.cfg.brokers)
	if err != nil {
		d.add("kafka", verdictFail, errLine(err), "")
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	var conn *kafkago.Conn
	var errs []error
	for _, b := range brokers {
		if conn, err = (&kafkago.Dialer{Timeout: d.cfg.timeout}).DialContext(ctx, "tcp", b); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if conn == nil {
		d.add("kafka", verdictFail, "no broker answers ("+strings.Join(brokers, ",")+"): "+errLine(errors.Join(errs...)),
			"check "+settings.KafkaBrokers.Env+" and that the brokers listen there")
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d.cfg.timeout))
	parts, err := conn.ReadPartitions()
	if err != nil {
		d.add("kafka", verdictFail, "the brokers answer, but not with their topics: "+errLine(err), "")
		return
	}
	count := map[string]int{}
	for _, p := range parts {
		count[p.Topic]++
	}
	var missing, have []string
	for _, topic := range kafkaTopics {
		if count[topic] == 0 {
			missing = append(missing, topic)
		} else {
			have = append(have, fmt.Sprintf("%s %d partition(s)", topic, count[topic]))
		}
	}
	if len(missing) > 0 {
		d.add("kafka", verdictFail, "missing topics: "+strings.Join(missing, ", ")+" (the relay publishes to provisioned topics only)",
			"create them (docs/transport.md): "+transport.TopicRefundRequests+" with as many partitions as messages the workers should handle at once")
		return
	}
	d.add("kafka", verdictOK, fmt.Sprintf("%s: %s; at most %d refund messages handled at once (one per partition)",
		strings.Join(brokers, ","), strings.Join(have, ", "), count[transport.TopicRefundRequests]), "")
}

// endpoint: an HTTP service answers at url (any HTTP answer: it listens
// and speaks HTTP; the request is a GET of the base URL, changing nothing).
func (d *doctor) endpoint(ctx context.Context, name, url string, s *settings.Setting, need string) {
	if url == "" {
		if need == "" {
			d.add(name, verdictSkip, "no "+s.Env+" configured", "")
		} else {
			d.add(name, verdictFail, "no "+s.Env+": "+need, "set "+s.Env+" (or --"+s.Flag+")")
		}
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		d.add(name, verdictFail, fmt.Sprintf("%s %q is not a URL: %s", s.Env, url, errLine(err)), "")
		return
	}
	resp, err := (&http.Client{Timeout: d.cfg.timeout}).Do(req)
	if err != nil {
		var opErr *net.OpError
		cause := errLine(err)
		if errors.As(err, &opErr) {
			cause = opErr.Error()
		}
		d.add(name, verdictFail, url+" does not answer: "+cause, "check "+s.Env+" and that the service listens there")
		return
	}
	resp.Body.Close()
	d.add(name, verdictOK, fmt.Sprintf("%s answers (HTTP %d)", url, resp.StatusCode), "")
}

// digests: serve's scheduled digests are fresh and signed by the digest key.
func (d *doctor) digests() {
	if d.cfg.digestEvery == 0 {
		d.add("digests", verdictWarn, "serve signs no digests ("+settings.DigestEvery.Env+" unset): nothing outside the database proves the log unchanged",
			"set "+settings.DigestEvery.Env+" (e.g. 1h), "+settings.DigestDir.Env+" and "+settings.DigestKey.Env+", and copy the digests out of the database's reach")
		return
	}
	if d.cfg.digestDir == "" {
		d.add("digests", verdictFail, settings.DigestEvery.Env+" is set without "+settings.DigestDir.Env+": serve refuses to start", "")
		return
	}
	latest := filepath.Join(d.cfg.digestDir, "latest.json")
	dg, err := readDigest(latest, "latest.json")
	if errors.Is(err, fs.ErrNotExist) {
		d.add("digests", verdictWarn, "no digest in "+d.cfg.digestDir+" yet: serve signs the first when it starts", "")
		return
	}
	if err != nil {
		d.add("digests", verdictFail, errLine(err), "")
		return
	}
	if d.digester != nil {
		if err := dg.CheckSignature(d.digester.DigestVerifier); err != nil {
			d.add("digests", verdictFail, latest+": "+errLine(err), "the digest key configured is not the one serve signs with")
			return
		}
	}
	age := d.cfg.now().Sub(dg.TimeValue())
	detail := fmt.Sprintf("%s: %d events, signed %s ago by %s (every %s)", latest, dg.TreeSize, age.Round(time.Second), dg.KeyID, d.cfg.digestEvery)
	if late := 2*d.cfg.digestEvery + maxDigestSlack; age > late {
		d.add("digests", verdictFail, detail+": late", "serve's log says why ('digest: NOT SIGNED', 'write failed'); docs/operations.md, \"Alerts and runbooks\"")
		return
	}
	d.add("digests", verdictOK, detail, "")
}

// readModels: the projector has folded the log (serve's readiness fails
// past 60 s behind).
func (d *doctor) readModels(ctx context.Context) {
	if d.pool == nil || d.store == nil || !d.readsOK {
		d.add("read-models", verdictSkip, "the database, the event store or the read models' schema is not ready (above)", "")
		return
	}
	ctx, cancel := d.bounded(ctx)
	defer cancel()
	lag, err := projections.MeasureLag(ctx, d.pool, d.store, projections.LagOptions{Schema: d.cfg.db.viewSchema, Now: d.cfg.now()})
	if err != nil {
		d.add("read-models", verdictFail, "cannot measure the projection's lag: "+errLine(err), "")
		return
	}
	events := fmt.Sprint(lag.Events)
	if lag.Capped {
		events += "+"
	}
	switch {
	case lag.Events == 0:
		d.add("read-models", verdictOK, "caught up with the log (checkpoint "+cmpOr(lag.Checkpoint.Text, "the start")+")", "")
	case lag.Behind <= maxReadyLag:
		d.add("read-models", verdictWarn, fmt.Sprintf("%s events behind the log, the oldest %s old", events, lag.Behind.Round(time.Second)),
			"a running projector catches up within seconds; none runs unless serve does")
	default:
		d.add("read-models", verdictFail, fmt.Sprintf("%s events behind the log, the oldest %s old: serve is not ready, the sweeper and reconciler search stale read models", events, lag.Behind.Round(time.Second)),
			"run serve (its projector), or see docs/operations.md, \"Alerts and runbooks\"")
	}
}

// readableByOthers lists path, or the key files of a ring directory, that
// every user of the host may read.
func readableByOthers(path string) []string {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	files := []string{path}
	if st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.key"))
	}
	var open []string
	for _, f := range files {
		if fst, err := os.Stat(f); err == nil && fst.Mode().Perm()&0o004 != 0 {
			open = append(open, fmt.Sprintf("%s (%04o)", f, fst.Mode().Perm()))
		}
	}
	slices.Sort(open)
	return open
}

// errLine is err's message on one line.
func errLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
