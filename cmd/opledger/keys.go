package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"opledger/adapters/captoken"
	"opledger/cmd/opledger/internal/settings"
)

func init() {
	register("keys", "make, list and retire the keys that sign capability tokens", runKeys)
}

const keysUsage = `usage: opledger keys <new|list|retire> [flags]

  new [--activate-in DURATION] [--if-none]
                                 make a key (--if-none: only when the ring has none); it
                                 verifies at once and signs from its activation
  list [--json]                  every key with its state (pending, active, verifying, retired) and dates
  retire ID                      refuse the key's tokens from now on and erase its seed

The ring is --signing-keys DIR|FILE or OPLEDGER_SIGNING_KEYS: a directory of
one-key files (DIR/<id>.key; made when missing) or one file of key lines.
Send SIGHUP to every serve after a change.`

// ringHeader heads a ring file that 'keys' rewrites (its other comments are
// not kept).
const ringHeader = "# opledger signing keys: one key per line (opledger keys new|list|retire); secret\n"

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, keysUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, rest := args[0], args[1:]
	f := newFlags("keys "+sub, "[flags]", stderr)
	f.Bind(settings.SigningKeys)
	ring := func() string { return f.Text(settings.SigningKeys) }
	switch sub {
	case "new":
		activateIn := f.Local().Duration("activate-in", 0, "start signing this long from now (0: at once); give every serve time to reload first")
		ifNone := f.Local().Bool("if-none", false, "make a key only when the ring holds none (for a container's first start)")
		if code, ok := f.Parse(rest); !ok {
			return code
		}
		if len(f.Args()) > 0 || *activateIn < 0 || *activateIn > 30*24*time.Hour {
			return fail(stderr, "keys new", errors.New("takes no arguments; --activate-in must be in [0, 720h]"))
		}
		if *ifNone {
			if n, err := ringSize(ring()); err != nil {
				return fail(stderr, "keys new", err)
			} else if n > 0 {
				fmt.Fprintf(stdout, "the key ring %s holds %d keys: none made (--if-none)\n", ring(), n)
				return 0
			}
		}
		k, where, err := keysNew(ring(), time.Now(), *activateIn)
		if err != nil {
			return fail(stderr, "keys new", err)
		}
		fmt.Fprintf(stdout, "made key %s in %s; it verifies at once and signs from %s\n", k.ID, where, k.Activates.Format(time.RFC3339))
		fmt.Fprintln(stdout, "send SIGHUP to every serve using this ring before then")
		return 0
	case "list":
		asJSON := f.Local().Bool("json", false, "print JSON")
		if code, ok := f.Parse(rest); !ok {
			return code
		}
		st, err := keysList(ring(), time.Now())
		if err != nil {
			return fail(stderr, "keys list", err)
		}
		if *asJSON {
			return printKeysJSON(stdout, stderr, st)
		}
		printKeys(stdout, st)
		return 0
	case "retire":
		if code, ok := f.Parse(rest); !ok {
			return code
		}
		if len(f.Args()) != 1 {
			return fail(stderr, "keys retire", errors.New("want one key ID (opledger keys list shows them)"))
		}
		msg, err := keysRetire(ring(), f.Arg(0), time.Now())
		if err != nil {
			return fail(stderr, "keys retire", err)
		}
		fmt.Fprintln(stdout, msg)
		return 0
	}
	fmt.Fprintf(stderr, "opledger keys: unknown subcommand %q\n\n%s\n", sub, keysUsage)
	return 2
}

// keysNew makes a key in the ring at path, activating activateIn from now
// and strictly after every key already there (so the newest key always
// signs). A missing path becomes a ring directory.
func keysNew(path string, now time.Time, activateIn time.Duration) (captoken.Key, string, error) {
	if path == "" {
		return captoken.Key{}, "", fmt.Errorf("no key ring: set --%s DIR|FILE or %s", captoken.RingFlag, captoken.RingEnvVar)
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(path, 0o700); err != nil {
			return captoken.Key{}, "", fmt.Errorf("key ring %s: %w", path, err)
		}
		info, err = os.Stat(path)
		if err != nil {
			return captoken.Key{}, "", err
		}
	case err != nil:
		return captoken.Key{}, "", fmt.Errorf("key ring %s: %w", path, err)
	}
	var files []captoken.KeyFile
	if info.Size() > 0 || info.IsDir() {
		if files, err = captoken.ReadRing(path); err != nil {
			return captoken.Key{}, "", err
		}
	}
	if len(files) >= captoken.MaxRingKeys {
		return captoken.Key{}, "", fmt.Errorf("key ring %s holds %d keys, at most %d: remove retired ones first", path, len(files), captoken.MaxRingKeys)
	}
	activates := now.Add(activateIn)
	for _, f := range files {
		if !f.Key.Activates.Before(activates.Truncate(time.Second)) {
			activates = f.Key.Activates.Add(time.Second)
		}
	}
	var k captoken.Key
	for { // a fresh key whose id is not in the ring yet (32-bit ids: a clash is rare)
		if k, err = captoken.NewKey(now, activates); err != nil {
			return captoken.Key{}, "", err
		}
		if !slices.ContainsFunc(files, func(f captoken.KeyFile) bool { return f.Key.ID == k.ID }) {
			break
		}
	}
	if info.IsDir() {
		file := filepath.Join(path, k.ID+captoken.KeyFileSuffix)
		if _, err := os.Stat(file); err == nil {
			return captoken.Key{}, "", fmt.Errorf("%s exists already", file)
		}
		return k, file, captoken.WriteKeyFile(file, "", []captoken.Key{k})
	}
	keys := make([]captoken.Key, 0, len(files)+1)
	for _, f := range files {
		keys = append(keys, f.Key)
	}
	return k, path, captoken.WriteKeyFile(path, ringHeader, append(keys, k))
}

// ringSize counts the keys of the ring at path (0 when it does not exist
// yet, or is an empty file or directory).
func ringSize(path string) (int, error) {
	if path == "" {
		return 0, fmt.Errorf("no key ring: set --%s DIR|FILE or %s", captoken.RingFlag, captoken.RingEnvVar)
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("key ring %s: %w", path, err)
	case !info.IsDir() && info.Size() == 0:
		return 0, nil
	}
	files, err := captoken.ReadRing(path)
	return len(files), err
}

// keysList returns the ring's keys with their states at now.
func keysList(path string, now time.Time) ([]captoken.KeyStatus, error) {
	ring, err := captoken.LoadRing(path, 0)
	if err != nil {
		return nil, err
	}
	return ring.Status(now), nil
}

// keysRetire retires key id at now and erases its seed. The active key is
// refused: the ring would have nothing to sign with.
func keysRetire(path, id string, now time.Time) (string, error) {
	files, err := captoken.ReadRing(path)
	if err != nil {
		return "", err
	}
	keys := make([]captoken.Key, len(files))
	for i, f := range files {
		keys[i] = f.Key
	}
	ring, err := captoken.NewRing(keys, 0, path)
	if err != nil {
		return "", err
	}
	i := slices.IndexFunc(files, func(f captoken.KeyFile) bool { return f.Key.ID == id })
	if i < 0 {
		ids := make([]string, len(files))
		for j, f := range files {
			ids[j] = f.Key.ID
		}
		return "", fmt.Errorf("no key %q in %s (keys: %v)", cut(id, 20), path, ids)
	}
	var st captoken.KeyStatus
	for _, s := range ring.Status(now) {
		if s.ID == id {
			st = s
		}
	}
	if !st.Retired.IsZero() && !now.Before(st.Retired) {
		return fmt.Sprintf("key %s was retired at %s already", id, st.Retired.Format(time.RFC3339)), nil
	}
	if st.State == captoken.KeyActive {
		return "", fmt.Errorf("key %s is the active signing key: make a new one first (opledger keys new), then retire %s", id, id)
	}
	retired := files[i].Key.Retire(now)
	if files[i].Path == path { // one file holds the whole ring
		keys[i] = retired
		err = captoken.WriteKeyFile(path, ringHeader, keys)
	} else {
		err = captoken.WriteKeyFile(files[i].Path, "", []captoken.Key{retired})
	}
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("key %s retired at %s and its seed erased", id, retired.Retired.Format(time.RFC3339))
	if st.State == captoken.KeyVerifying {
		msg += fmt.Sprintf("; capabilities it signed are refused from now on (its window would have ended %s)", st.RetiresAt.Format(time.RFC3339))
	}
	return msg + "; send SIGHUP to every serve using this ring", nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func printKeys(w io.Writer, st []captoken.KeyStatus) {
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tCREATED\tACTIVATES\tSTOPPED SIGNING\tRETIRES\tSEED")
	for _, k := range st {
		seed := "present"
		if !k.HasSeed() {
			seed = "erased"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.State, day(k.Created), day(k.Activates), day(k.StoppedSigning), day(k.RetiresAt), seed)
	}
	_ = tw.Flush()
}

func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

type keyJSON struct {
	ID             string     `json:"id"`
	State          string     `json:"state"`
	Created        time.Time  `json:"created"`
	Activates      time.Time  `json:"activates"`
	StoppedSigning *time.Time `json:"stopped_signing,omitempty"`
	RetiresAt      *time.Time `json:"retires_at,omitempty"`
	Retired        *time.Time `json:"retired,omitempty"`
	HasSeed        bool       `json:"has_seed"`
}

func printKeysJSON(stdout, stderr io.Writer, st []captoken.KeyStatus) int {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	out := make([]keyJSON, len(st))
	for i, k := range st {
		out[i] = keyJSON{ID: k.ID, State: string(k.State), Created: k.Created, Activates: k.Activates,
			StoppedSigning: opt(k.StoppedSigning), RetiresAt: opt(k.RetiresAt), Retired: opt(k.Retired), HasSeed: k.HasSeed()}
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fail(stderr, "keys list", err)
	}
	return 0
}
