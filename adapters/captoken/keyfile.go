package captoken

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Settings naming the key file, for callers' flags and help text.
const (
	Flag   = "signing-key"
	EnvVar = "OPLEDGER_SIGNING_KEY_FILE"
)

// maxKeyFileSize bounds what LoadSigner reads: a seed in base64 is 44 bytes.
const maxKeyFileSize = 4096

// LoadSigner reads a key file: the base64 encoding (standard or URL
// alphabet, padded or not, surrounding whitespace ignored) of a 32-byte
// Ed25519 seed, e.g. made with
//
//	head -c 32 /dev/urandom | base64 > signing.key
//
// Errors name the file and what is wrong with it, never its content.
func LoadSigner(path string) (*Signer, error) {
	if path == "" {
		return nil, fmt.Errorf("no signing key: set --%s FILE or %s (only --dev may start without one)", Flag, EnvVar)
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("signing key file %s does not exist (--%s / %s)", path, Flag, EnvVar)
		}
		return nil, fmt.Errorf("signing key file %s: %w", path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("signing key file %s: read: %w", path, err)
	}
	if len(raw) > maxKeyFileSize {
		return nil, fmt.Errorf("signing key file %s is larger than %d bytes: it should hold one base64 Ed25519 seed", path, maxKeyFileSize)
	}
	seed, err := decodeSeed(bytes.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("signing key file %s: %w", path, err)
	}
	return NewSigner(seed)
}

// decodeSeed decodes the seed text; its errors never quote the text.
func decodeSeed(text []byte) ([]byte, error) {
	if len(text) == 0 {
		return nil, errors.New("is empty: it should hold the base64 encoding of a 32-byte Ed25519 seed")
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		seed := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Decode(seed, text)
		if err != nil {
			continue
		}
		if n != SeedSize {
			return nil, fmt.Errorf("decodes to %d bytes: an Ed25519 seed is %d bytes", n, SeedSize)
		}
		return seed[:n], nil
	}
	return nil, errors.New("is not base64: it should hold the base64 encoding of a 32-byte Ed25519 seed")
}

// GenerateSeed returns a fresh random seed, base64-encoded, as a key file
// should hold it (with a trailing newline).
func GenerateSeed() (string, error) {
	seed := make([]byte, SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return "", fmt.Errorf("captoken: generate seed: %w", err)
	}
	return base64.StdEncoding.EncodeToString(seed) + "\n", nil
}
