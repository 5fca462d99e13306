package pgstate

import (
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"opledger/eventstore/follow/pgleader"
)

// NewLeader returns the leadership of relay name over the transport schema
// (DefaultSchema when empty): a pgleader.Lock connecting like pool (one
// more connection, with application_name "opledger-relay-<name>"). Every
// instance that relays the same log into the same transport schema must use
// the same schema and name. It does no I/O.
func NewLeader(pool *pgxpool.Pool, schema, name string) (*pgleader.Lock, error) {
	if pool == nil {
		return nil, errors.New("pgstate: leader: nil pool")
	}
	schema, err := Schema(schema)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, errors.New("pgstate: leader: a relay name is required")
	}
	return pgleader.New(pool.Config().ConnConfig, leaderKey(schema, name), "opledger-relay-"+name)
}

// leaderKey is the advisory lock of one relay (hashtextextended of it).
// Never change it: an old and a new binary would both lead.
func leaderKey(schema, name string) string {
	return "opledger.transport.relay-leader:" + schema + "/" + name
}
