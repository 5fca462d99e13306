package domain

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

// A lease is bound to its holder (invariant 10): the command handler mints an
// unguessable secret for every claim and hands it to the claiming executor
// only; the stream records its digest. Every executor write (renew, outcome,
// late evidence) presents the secret, and the model compares its digest with
// the digests of the leases the execution held. Knowing an execution id and
// its epoch, which anyone may read, is not authority.

// LeaseSecretDigestLength is the length of a lease secret digest: SHA-256 in
// hex.
const LeaseSecretDigestLength = 2 * sha256.Size

// LeaseSecretDigest returns what the ledger records of a lease secret: its
// SHA-256, in lower-case hex.
func LeaseSecretDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// SecretCheck is how the lease secret an executor write presented compared
// with the execution's leases; WriteRefused records it (never the secret).
type SecretCheck string

const (
	// SecretHeld: the secret is the one handed to the holder of a lease of
	// this execution (the write may still be refused: a stale epoch, a
	// state that does not accept it, a malformed field).
	SecretHeld SecretCheck = "held"
	// SecretMissing: no secret was presented.
	SecretMissing SecretCheck = "missing"
	// SecretWrong: the secret matches no lease of this execution.
	SecretWrong SecretCheck = "wrong"
	// SecretUnbound: the execution was claimed before leases were bound to
	// their holder and has no digest: no secret can hold it.
	SecretUnbound SecretCheck = "unbound"
)

// HeldLease is one lease an execution was held under: its epoch and the
// digest of the secret its holder was given.
type HeldLease struct {
	Epoch        int64
	SecretDigest string
}

// holderOf reports which of x's leases secret holds (its epoch, 0 if none)
// and how it compared. The digests are compared in constant time.
func (x *Execution) holderOf(secret string) (int64, SecretCheck) {
	if len(x.HeldLeases) == 0 {
		return 0, SecretUnbound
	}
	if planted(BugLeaseSecretUnchecked) {
		return x.HeldLeases[0].Epoch, SecretHeld
	}
	if secret == "" {
		return 0, SecretMissing
	}
	d := []byte(LeaseSecretDigest(secret))
	var epoch int64
	for _, l := range x.HeldLeases {
		if subtle.ConstantTimeCompare(d, []byte(l.SecretDigest)) == 1 {
			epoch = l.Epoch
		}
	}
	if epoch == 0 {
		return 0, SecretWrong
	}
	return epoch, SecretHeld
}

// notHeld is the refusal for a write whose secret holds no lease of x, or
// nil when check is SecretHeld.
func (x *Execution) notHeld(check SecretCheck) *Refusal {
	var r *Refusal
	switch check {
	case SecretHeld:
		return nil
	case SecretUnbound:
		r = refuse(ReasonLeaseNotHeld, "execution %s was claimed before leases were bound to their holder: it accepts no executor write; its lease lapses to Unknown and the reconciler asks the provider", x.ID)
	case SecretMissing:
		r = refuse(ReasonLeaseNotHeld, "lease_secret is missing: every write for %s must present the secret its claim returned", x.ID)
	default:
		r = refuse(ReasonLeaseNotHeld, "lease_secret does not hold a lease of %s: only the holder writes for an execution", x.ID)
	}
	r.Field = "lease_secret"
	return r
}

// checkLeaseSecretDigest refuses a digest that is not LeaseSecretDigest's
// form (64 lower-case hex digits).
func checkLeaseSecretDigest(d string) *Refusal {
	if len(d) != LeaseSecretDigestLength {
		return refuseField("lease_secret_digest", "lease_secret_digest must be %d hex digits (SHA-256), got %d bytes", LeaseSecretDigestLength, len(d))
	}
	for i := 0; i < len(d); i++ {
		if c := d[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return refuseField("lease_secret_digest", "lease_secret_digest must be lower-case hex (SHA-256)")
		}
	}
	return nil
}
