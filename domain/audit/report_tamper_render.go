package audit

import (
	"bytes"
	"fmt"
)

// writeTamperText writes the hash-chain summary and each digest's verdict.
func (r Report) writeTamperText(b *bytes.Buffer) {
	c := r.Chain
	fmt.Fprintf(b, "hash chain: %d events hashed and checked in %d streams", c.Hashed, c.Streams)
	if c.HeadsChecked {
		b.WriteString("; stream heads checked against the log")
	}
	b.WriteString("\n")
	if c.Unhashed > 0 {
		fmt.Fprintf(b, "NOT TAMPER-EVIDENT: %d events in %d streams were stored before hashing began; only a digest taken since protects them\n",
			c.Unhashed, c.UnhashedStreams)
	}
	for _, d := range r.Digests {
		verdict := "MATCHES: every event it covers is unchanged, none removed, inserted or reordered"
		if !d.Matches {
			verdict = "DEPARTS"
			if d.Departure != nil {
				verdict += ": " + d.Departure.Message
			}
		}
		fmt.Fprintf(b, "%s (%d events up to %s, %s, key %s, signature verified): %s\n",
			roleLabel(d.Role), d.TreeSize, orNone(d.Position), d.Time, d.KeyID, verdict)
		if d.Extends != nil {
			if *d.Extends {
				fmt.Fprintf(b, "  the later digest extends it: consistency proof of %d hashes verified\n", len(d.ConsistencyProof))
			} else {
				b.WriteString("  the later digest does NOT extend it: history was rewritten between them\n")
			}
		}
	}
}

// roleLabel names a digest by its role for people.
func roleLabel(role string) string {
	if role == "previous" {
		return "previous digest"
	}
	return "digest"
}
