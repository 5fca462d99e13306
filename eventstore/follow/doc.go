// Package follow follows the global log under a leader lock, for the roles
// that turn the log into something else: the relays (messages) and the
// projector (read models). What every such role does is written here once,
// as river's maintenance services share one base: take the leadership and
// step down when it is lost, resume from the role's checkpoint, read in
// bounded batches (one read ahead if asked), pause with a bounded back-off
// when the log is idle, back off after an outage and report it, and measure
// the lag on the ledger's clock. A role only says what one batch does
// (Handler).
//
// A Follower without a Leadership always leads: one instance, the in-memory
// store, the demo. With one (pgleader.Lock on PostgreSQL), any number of
// instances may run: one leads, the others stand by and take over when the
// leader's session ends. What a lock does not prevent: a leader whose
// session died while it handled a batch finishes that batch, and the new
// leader handles it again from the checkpoint; the roles make that harmless
// (message ids derived from the events; a projection's checkpoint moves in
// the batch's own transaction).
package follow
