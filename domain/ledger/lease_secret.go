package ledger

import (
	"crypto/rand"
	"encoding/base64"
)

// LeaseSecretBytes is how many random bytes a lease secret carries: 256 bits,
// far beyond guessing.
const LeaseSecretBytes = 32

// NewLeaseSecret mints a lease secret: LeaseSecretBytes from crypto/rand,
// base64url without padding (43 characters). The command handler mints one
// per claim, never the pure model; the ledger records only its digest
// (domain.LeaseSecretDigest).
func NewLeaseSecret() string {
	b := make([]byte, LeaseSecretBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (it aborts the program instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
