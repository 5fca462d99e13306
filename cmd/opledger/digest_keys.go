package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"opledger/cmd/opledger/internal/settings"
	"opledger/domain/audit"
)

// The digest key (settings.DigestKey) is not the capability signing key
// (settings.SigningKeys): whoever may mint authority must not be able to
// vouch for history.
const (
	maxDigestKeyFile   = 4096
	digestPublicSuffix = ".pub"
)

// Names of the digest keys' settings, for messages.
var (
	digestKeyFlag    = settings.DigestKey.Flag
	digestKeyEnv     = settings.DigestKey.Env
	digestPublicFlag = settings.DigestPublicKey.Flag
	digestPublicEnv  = settings.DigestPublicKey.Env
)

// newDigestKey writes a fresh Ed25519 seed to path (base64, mode 0600,
// refusing to overwrite) and its public key to path.pub (base64, 0644),
// and returns the key id.
func newDigestKey(path string) (string, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return "", fmt.Errorf("digest key: %w", err)
	}
	signer, err := audit.NewDigestSigner(seed)
	if err != nil {
		return "", err
	}
	if err := writeNew(path, []byte(base64.StdEncoding.EncodeToString(seed)+"\n"), 0o600); err != nil {
		return "", err
	}
	pub := base64.StdEncoding.EncodeToString(signer.PublicKey()) + "\n"
	if err := writeNew(path+digestPublicSuffix, []byte(pub), 0o644); err != nil {
		_ = os.Remove(path)
		return "", err
	}
	return signer.KeyID(), nil
}

// writeNew creates path with data, refusing to replace an existing file.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists: a key is never overwritten (choose another --out)", path)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// loadDigestSigner reads a digest key file (a base64 Ed25519 seed).
func loadDigestSigner(path string) (*audit.DigestSigner, error) {
	if path == "" {
		return nil, fmt.Errorf("no digest key: set --%s FILE or %s (make one with 'opledger audit digest-key new --out FILE')", digestKeyFlag, digestKeyEnv)
	}
	seed, err := readBase64Key(path, ed25519.SeedSize, "digest key")
	if err != nil {
		return nil, err
	}
	return audit.NewDigestSigner(seed)
}

// loadDigestVerifier reads a digest public key file (base64, 32 bytes).
func loadDigestVerifier(path string) (*audit.DigestVerifier, error) {
	if path == "" {
		return nil, fmt.Errorf("no public key to check the digest's signature: set --%s FILE or %s (the .pub file 'digest-key new' wrote)", digestPublicFlag, digestPublicEnv)
	}
	pub, err := readBase64Key(path, ed25519.PublicKeySize, "digest public key")
	if err != nil {
		return nil, err
	}
	return audit.NewDigestVerifier(pub)
}

// readBase64Key reads a small file holding the base64 of size bytes; its
// errors name the file, never its content.
func readBase64Key(path string, size int, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxDigestKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s file %s: %w", what, path, err)
	}
	if len(raw) > maxDigestKeyFile {
		return nil, fmt.Errorf("%s file %s is larger than %d bytes", what, path, maxDigestKeyFile)
	}
	text := bytes.TrimSpace(raw)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		b := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Decode(b, text)
		if err != nil {
			continue
		}
		if n != size {
			return nil, fmt.Errorf("%s file %s decodes to %d bytes, want %d", what, path, n, size)
		}
		return b[:n], nil
	}
	return nil, fmt.Errorf("%s file %s is not base64", what, path)
}

// readDigest parses a digest file.
func readDigest(path, flag string) (*audit.Digest, error) {
	if path == "" {
		return nil, fmt.Errorf("%s FILE is required", flag)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	defer f.Close()
	d, err := audit.ParseDigest(f)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return d, nil
}
