// Package simworld is the deterministic simulation of the whole refund flow
// (docs/simulation.md): a small deployment built fresh for every schedule —
// agents calling the command handler, serve's relays, sweeper and reconciler
// over a log index, two or three workers with their dispatchers, the
// provider simulator in process behind an in-memory round tripper, a
// simulated transport — all real roles, over the memory store (or
// PostgreSQL) seen through fault-injecting views.
//
// One seed (a PCG) drives every choice; one clock (clock.Manual) is the only
// time; one scheduler hands a baton to the roles' goroutines, which run only
// while they hold it and hand it back at the world's timers (the worker's
// and the provider client's injected After) and gates (store calls,
// requests in transit, held responses, the relay's poll). So the same Spec
// takes the same steps and gives the same trace hash.
//
// A schedule injects faults in its chaos phase (a random subset of the
// kinds its Spec allows: swarm testing), then settles with none, and is
// checked (checks.go): refunds per operation, keys on the wire, refusals
// recorded, forged writes refused, audit verify, provider diff, NotApplied
// truthful, quiescence, liveness within a bound. Sweep runs many and shrinks
// the first failure; `opledger sim` is the command.
package simworld
