// Package projections keeps opledger's read models: Postgres tables that
// analysts, the HTTP API and the recovery roles query instead of folding
// streams. A Projector follows the global log through the eventstore port
// (so it works over any backend) and folds each batch of events into the
// tables of one schema (DefaultSchema unless configured), writing the rows
// and the projection's checkpoint in one transaction: a crash at any point
// leaves either the whole batch applied or none of it, so no event is applied
// twice or skipped.
//
// Several projectors may run against one schema; a session-level Postgres
// advisory lock, held on a dedicated connection, elects the one that applies.
// The others wait and take over when its connection ends. Each batch also
// locks the checkpoint row and checks it still holds the position the batch
// was read from, so even a projector that lost the lock without noticing
// cannot apply a batch twice.
//
// The schema is created and upgraded only by Migrate; CheckSchema tells a
// server whether it may start. Rebuild folds the log from the start into a
// fresh schema and can swap it in atomically, or leave it beside the live one
// as of a past instant. Index answers the sweeper's and the reconciler's
// questions (recovery.Index) from indexed tables, and MeasureLag says how far
// a projection trails the log.
//
// docs/projections.md describes every table, column and state.
package projections
