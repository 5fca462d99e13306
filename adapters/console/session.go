package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Cookie names. Each sealed value is bound to its cookie's name (the AEAD's
// additional data), so one kind can never be replayed as another.
const (
	sessionCookie = "opledger_session"
	signinCookie  = "opledger_signin"
	flashCookie   = "opledger_flash"
)

// Bounds of what a cookie carries.
const (
	// MinKeyLength is the least key material a configured session key has.
	MinKeyLength = 32
	// maxCookieLength bounds a cookie value the console will open (a
	// session is a few hundred bytes).
	maxCookieLength = 2048
	// signinTTL bounds how long a sign-in form may be filled in.
	signinTTL = 10 * time.Minute
	// flashTTL bounds how long an action's message waits to be shown.
	flashTTL = time.Minute
)

// errCookieRefused is what opening a cookie the console did not seal (or
// that has expired) returns: the caller answers "refused", never which.
var errCookieRefused = errors.New("cookie refused")

// sealer seals and opens the console's cookies with AES-256-GCM under a key
// derived from the session key, and derives CSRF tokens with HMAC-SHA256
// under another. Safe for concurrent use (immutable).
type sealer struct {
	aead    cipher.AEAD
	csrfKey []byte
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) < MinKeyLength {
		return nil, fmt.Errorf("console: session key of %d bytes, at least %d are required", len(key), MinKeyLength)
	}
	block, err := aes.NewCipher(derive(key, "opledger console v1: cookie seal"))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return &sealer{aead: aead, csrfKey: derive(key, "opledger console v1: csrf")}, nil
}

// derive is HMAC-SHA256(key, label): independent 32-byte keys per purpose.
func derive(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// newKey returns MinKeyLength random bytes.
func newKey() ([]byte, error) {
	key := make([]byte, MinKeyLength)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("console: session key: %w", err)
	}
	return key, nil
}

// seal encrypts v (as JSON) for the cookie name.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("console: seal %s: %w", name, err)
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("console: seal %s: %w", name, err)
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

// open decrypts what seal made for the cookie name into v; anything else
// (forged, altered, sealed for another cookie or under another key) is
// errCookieRefused.
func (s *sealer) open(name, value string, v any) error {
	if len(value) > maxCookieLength {
		return errCookieRefused
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return errCookieRefused
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(name))
	if err != nil {
		return errCookieRefused
	}
	if err := json.Unmarshal(plain, v); err != nil {
		return errCookieRefused
	}
	return nil
}

// csrf is the CSRF token of a form bound to purpose and nonce (a session's
// id, or a sign-in form's nonce).
func (s *sealer) csrf(purpose, nonce string) string {
	m := hmac.New(sha256.New, s.csrfKey)
	m.Write([]byte(purpose + "|" + nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether token is the CSRF token for purpose and nonce,
// in constant time.
func (s *sealer) checkCSRF(purpose, nonce, token string) bool {
	want := s.csrf(purpose, nonce)
	return token != "" && subtle.ConstantTimeCompare([]byte(want), []byte(token)) == 1
}

// session is what the session cookie seals: the bearer token pasted at
// sign-in (re-authenticated on every request, so a token removed from the
// tokens file ends its sessions at once), the session's id (the CSRF
// tokens are bound to it) and its times.
type session struct {
	Version  int    `json:"v"`
	Token    string `json:"t"`
	ID       string `json:"sid"`
	IssuedAt int64  `json:"iat"`
	Expires  int64  `json:"exp"`
}

// signin is what the sign-in cookie seals: the nonce the sign-in form's
// CSRF token is bound to, and its expiry.
type signin struct {
	Nonce   string `json:"n"`
	Expires int64  `json:"exp"`
}

// flash is an action's message, shown once on the next page.
type flash struct {
	Text    string `json:"m"`
	Expires int64  `json:"exp"`
}

// randomID returns 16 random bytes in hex.
func randomID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: random id: %w", err)
	}
	return hex.EncodeToString(b), nil
}
