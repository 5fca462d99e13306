package captoken

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"opledger/domain"
)

// Settings naming the key ring, for callers' flags and help text.
const (
	RingFlag   = "signing-keys"
	RingEnvVar = "OPLEDGER_SIGNING_KEYS"
)

// KeyFileSuffix names the files of a ring directory: every regular file
// DIR/*.key holds one key; other entries are ignored.
const KeyFileSuffix = ".key"

// Bounds on ring files.
const (
	maxRingLine = 1024
	maxRingFile = 64 << 10
)

// The fields of a key line, in the order they are written.
var keyFields = []string{"id", "created", "activates", "retired", "seed"}

// ParseKeys reads key lines, one key per line:
//
//	id=3f9a1c2e created=2026-11-26T14:00:00Z activates=2026-11-26T14:10:00Z seed=BASE64
//	id=0b7d41aa created=2026-05-02T09:00:00Z retired=2026-11-27T08:00:00Z
//
// Fields are name=value, separated by spaces or tabs, each at most once:
// id (required: the key id, 8 hex digits, which must be the seed's),
// created (required), activates (default: created; not before it), retired
// (optional), all RFC 3339 times; seed (the standard base64 of the 32-byte
// Ed25519 seed; only a retired key may lack it). '#' starts a comment; blank
// lines are ignored. A line with an unknown or repeated field, a malformed
// value, a control character or invalid UTF-8 is an error naming source,
// the line and the field, never the seed.
func ParseKeys(r io.Reader, source string) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxRingLine)
	for n := 1; sc.Scan(); n++ {
		at := fmt.Sprintf("%s:%d", source, n)
		text := strings.TrimSuffix(sc.Text(), "\r")
		if refusal := domain.CheckText("line", strings.ReplaceAll(text, "\t", " "), maxRingLine, false); refusal != nil {
			return nil, fmt.Errorf("%s: %s", at, refusal.Detail)
		}
		line, _, _ := strings.Cut(text, "#")
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, err := parseKeyLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if len(keys) >= MaxRingKeys {
			return nil, fmt.Errorf("%s: more than %d keys", at, MaxRingKeys)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s: a line is longer than %d bytes", source, maxRingLine)
		}
		return nil, fmt.Errorf("%s: read: %w", source, err)
	}
	return keys, nil
}

func parseKeyLine(line string) (Key, error) {
	values := map[string]string{}
	for _, f := range strings.Fields(line) {
		name, value, ok := strings.Cut(f, "=")
		if !ok || value == "" {
			return Key{}, fmt.Errorf("field %q: want name=value", cutForError(name))
		}
		if !slices.Contains(keyFields, name) {
			return Key{}, fmt.Errorf("unknown field %q (fields: %s)", cutForError(name), strings.Join(keyFields, ", "))
		}
		if _, dup := values[name]; dup {
			return Key{}, fmt.Errorf("field %s given twice", name)
		}
		values[name] = value
	}
	var k Key
	var err error
	k.ID = values["id"]
	if k.ID == "" {
		return Key{}, errors.New("no id field")
	}
	if !validKeyID(k.ID) {
		return Key{}, fmt.Errorf("id %q: want %d lowercase hex digits", cutForError(k.ID), keyIDLength)
	}
	if values["created"] == "" {
		return Key{}, errors.New("no created field")
	}
	if k.Created, err = parseKeyTime("created", values["created"]); err != nil {
		return Key{}, err
	}
	k.Activates = k.Created
	if v := values["activates"]; v != "" {
		if k.Activates, err = parseKeyTime("activates", v); err != nil {
			return Key{}, err
		}
		if k.Activates.Before(k.Created) {
			return Key{}, errors.New("activates is before created")
		}
	}
	if v := values["retired"]; v != "" {
		if k.Retired, err = parseKeyTime("retired", v); err != nil {
			return Key{}, err
		}
	}
	seed, hasSeed := values["seed"]
	if !hasSeed {
		if k.Retired.IsZero() {
			return Key{}, errors.New("no seed field: only a retired key may lack its seed")
		}
		return k, nil
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(seed)
	if err != nil || len(raw) != SeedSize {
		return Key{}, fmt.Errorf("seed: want the standard base64 (padded) of a %d-byte Ed25519 seed", SeedSize)
	}
	if k.signer, err = NewSigner(raw); err != nil {
		return Key{}, fmt.Errorf("seed: %w", err)
	}
	if k.signer.KeyID() != k.ID {
		return Key{}, fmt.Errorf("id %s is not the id of its seed (%s)", k.ID, k.signer.KeyID())
	}
	return k, nil
}

func parseKeyTime(field, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time like 2026-11-26T14:00:00Z", field, cutForError(v))
	}
	return t.UTC(), nil
}

// cutForError keeps error messages short; callers pass names, never seeds.
func cutForError(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Line is the key's line in a ring file (with its seed: a secret).
func (k Key) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "id=%s created=%s", k.ID, k.Created.UTC().Format(time.RFC3339))
	if !k.Activates.Equal(k.Created) {
		fmt.Fprintf(&b, " activates=%s", k.Activates.UTC().Format(time.RFC3339))
	}
	if !k.Retired.IsZero() {
		fmt.Fprintf(&b, " retired=%s", k.Retired.UTC().Format(time.RFC3339))
	}
	if k.signer != nil {
		b.WriteString(" seed=" + base64.StdEncoding.EncodeToString(k.signer.priv.Seed()))
	}
	return b.String()
}

// NewKey makes a key with a fresh random seed, created at now (truncated to
// the second, as the file records it) and signing from activates (not
// before now).
func NewKey(now, activates time.Time) (Key, error) {
	s, err := NewEphemeral()
	if err != nil {
		return Key{}, err
	}
	s.ephemeral = false
	now = now.UTC().Truncate(time.Second)
	activates = activates.UTC().Truncate(time.Second)
	if activates.Before(now) {
		activates = now
	}
	return Key{ID: s.KeyID(), Created: now, Activates: activates, signer: s}, nil
}

// Retire returns the key retired at at, its seed erased.
func (k Key) Retire(at time.Time) Key {
	k.Retired = at.UTC().Truncate(time.Second)
	k.signer = nil
	return k
}

// KeyFile is where one key of a ring lives.
type KeyFile struct {
	Path string
	Key  Key
}

// ReadRing reads a ring directory (every DIR/*.key file, one key each) or a
// ring file (one key per line). Errors name the file and line.
func ReadRing(path string) ([]KeyFile, error) {
	if path == "" {
		return nil, fmt.Errorf("no key ring: set --%s DIR|FILE or %s", RingFlag, RingEnvVar)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key ring %s: %w", path, err)
	}
	if !info.IsDir() {
		keys, err := readKeyFile(path)
		if err != nil {
			return nil, err
		}
		out := make([]KeyFile, len(keys))
		for i, k := range keys {
			out[i] = KeyFile{Path: path, Key: k}
		}
		return out, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("key ring %s: %w", path, err)
	}
	var out []KeyFile
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), KeyFileSuffix) || !e.Type().IsRegular() {
			continue
		}
		file := filepath.Join(path, e.Name())
		keys, err := readKeyFile(file)
		if err != nil {
			return nil, err
		}
		if len(keys) != 1 {
			return nil, fmt.Errorf("%s: holds %d keys; a file of a ring directory holds exactly one", file, len(keys))
		}
		if len(out) >= MaxRingKeys {
			return nil, fmt.Errorf("key ring %s: more than %d key files", path, MaxRingKeys)
		}
		out = append(out, KeyFile{Path: file, Key: keys[0]})
	}
	return out, nil
}

func readKeyFile(path string) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxRingFile+1))
	if err != nil {
		return nil, fmt.Errorf("key file %s: read: %w", path, err)
	}
	if len(raw) > maxRingFile {
		return nil, fmt.Errorf("key file %s is larger than %d bytes", path, maxRingFile)
	}
	return ParseKeys(bytes.NewReader(raw), path)
}

// LoadRing reads the ring at path (see ReadRing) with the given retention
// (0: DefaultRetention).
func LoadRing(path string, retention time.Duration) (*Ring, error) {
	files, err := ReadRing(path)
	if err != nil {
		return nil, err
	}
	keys := make([]Key, len(files))
	for i, f := range files {
		keys[i] = f.Key
	}
	return NewRing(keys, retention, path)
}

// WriteKeyFile writes lines to path atomically (a temporary file in the
// same directory, synced, then renamed over it), readable by its owner only.
func WriteKeyFile(path string, header string, keys []Key) error {
	var b strings.Builder
	if header != "" {
		b.WriteString(header)
	}
	for _, k := range keys {
		b.WriteString(k.Line() + "\n")
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
