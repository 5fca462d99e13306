// Package captoken signs and verifies capability tokens: the bearer form of
// a capability that the API hands out after an Allowed decision and that a
// worker presents when it claims.
//
// A token is two base64url (unpadded) parts joined by a dot:
//
//	base64url(payload) "." base64url(signature)
//
// The payload is compact JSON with a fixed field order, naming the key that
// signed it:
//
//	{"v":2,"kid":"3f9a1c2e","cap":"CAP-…","op":"OP-…","att":1,"exp":"2026-11-26T14:17:10Z"}
//
// and the signature is Ed25519 over Domain followed by the payload bytes.
// Ed25519 is deterministic, so one capability always yields the same token.
// A payload is read only in exactly the form the signer writes it. Version
// 1 tokens (no kid, made before key rings) are still verified.
//
// Keys live in a Ring: one key signs at a time; when a newer key activates,
// the older one stops signing and keeps verifying for the ring's retention
// (the longest capability lifetime and a margin for clock skew), then
// retires, and the tokens it signed are refused. So a key can be replaced
// without making outstanding capabilities unclaimable. Keys is the ring a
// serving process holds, reloaded atomically; ParseKeys documents the files.
//
// A token proves only that opledger issued it for that capability,
// operation and attempt. It does not prove that the capability is unused,
// unrevoked or unexpired: the ledger stays the only judge of that, which is
// why Verify does not look at the expiry (an expired capability presented
// with a genuine token is refused by the ledger as Expired and recorded).
package captoken
