package kurrent

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"opledger/eventstore"
)

// probeStream is the stream a connection probe reads: any stream will do,
// and one that does not exist costs the server least.
const probeStream = "opledger-connection-probe"

// Store is the KurrentDB event store. It is safe for concurrent use.
type Store struct {
	cfg   Config
	names naming
	conn  *connector
	// life ends when the store is closed, cancelling calls in flight.
	life context.Context
	stop context.CancelFunc
	once sync.Once
}

// Open validates cfg, connects to cfg.URL and checks that the server
// answers (one probe, bounded by ConnectTimeout and ctx). An unreachable
// server is reported as an error wrapping eventstore.ErrUnavailable; bad
// configuration as a plain error. Close the store when done.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	esCfg, err := clientConfig(cfg)
	if err != nil {
		return nil, err
	}
	// The store's calls outlive Open's context but not the store.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	s := &Store{cfg: cfg, names: naming{namespace: cfg.Namespace, prefixes: cfg.StreamPrefixes}, life: life, stop: stop}
	newClient := func() (*esdb.Client, error) {
		c := *esCfg // each client gets its own copy; the client only reads it
		return esdb.NewClient(&c)
	}
	s.conn = newConnector(life, newClient, s.probe, cfg.ConnectTimeout)

	// Bounded: the probe gives up after ConnectTimeout.
	cl, err := s.conn.acquire(ctx)
	if err != nil {
		s.Close()
		return nil, interpretError("open "+RedactURL(cfg.URL), err)
	}
	s.conn.release(cl)
	return s, nil
}

// probe is a client's first call: a one-event read of a stream that need
// not exist. It makes the client discover the node and proves the server
// answers reads.
func (s *Store) probe(ctx context.Context, es *esdb.Client) error {
	rs, err := es.ReadStream(ctx, s.names.server(probeStream), esdb.ReadStreamOptions{Deadline: &s.cfg.ConnectTimeout}, 1)
	if err != nil {
		return err
	}
	defer rs.Close()
	if _, err := rs.Recv(); err != nil && !errors.Is(err, io.EOF) && !isNotFound(err) {
		return err
	}
	return nil
}

// Close implements eventstore.Store. It cancels the calls in flight (they
// fail with eventstore.ErrUnavailable, as do calls after Close) and closes
// the clients once their calls have returned, waiting up to CallTimeout for
// that. Close may be called more than once.
func (s *Store) Close() {
	s.once.Do(func() {
		s.stop()
		s.conn.close(s.cfg.CallTimeout)
	})
}

// ParsePosition implements eventstore.Store; see the package-level
// ParsePosition.
func (s *Store) ParsePosition(text string) (eventstore.Position, error) {
	p, err := ParsePosition(text)
	if err != nil {
		return nil, err
	}
	return p, nil
}

var _ eventstore.Store = (*Store)(nil)
