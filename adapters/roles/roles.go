// Package roles builds serve's background roles — the projector, the
// sweeper, the reconciler and the relays — from the ports, each role on a
// store view of its own. serve, worker --relay, the demo's and the tests'
// world (adapters/harness), the simulator (adapters/simworld) and the
// benchmark build theirs here, so that a role added, or a role's wiring
// changed, reaches every one of them. What differs between them is what
// they pass: the ports (a provider client or the simulator's shim, the
// PostgreSQL set-aside store or an in-memory one), the store views, and
// each role's own tuning.
package roles

import (
	"errors"
	"fmt"
	"log/slog"

	"opledger/adapters/transport"
	"opledger/domain/clock"
	"opledger/domain/ledger"
	"opledger/domain/recovery"
	"opledger/domain/setaside"
	"opledger/eventstore"
	"opledger/projections"
)

// Names of the roles, as serve's --disable takes them, and of the views
// they read the log through (View's argument; a relay's view is "relay
// <relay name>", the log index's "index").
const (
	Projector  = "projector"
	Sweeper    = "sweeper"
	Reconciler = "reconciler"
	Relay      = "relay"
	Index      = "index"
)

// Config says which roles to build and from what. A nil role section
// builds no such role. Every role section is the role's own configuration:
// the fields Config supplies (its store, ledger, index, clock, logger,
// set-aside store) are filled in when left zero.
type Config struct {
	// Store is the log every role reads and writes. Required.
	Store eventstore.Store
	// View, when set, returns the store the named role (see the names
	// above) reaches the log through; default Store. The simulator gives
	// each role a view of its own to inject faults per process.
	View func(name string) eventstore.Store
	// Ledger, when set, returns the command handler a role writes through
	// on its view (default: ledger.New on the view, with Clock and
	// Logger). serve passes its API's handler.
	Ledger func(store eventstore.Store) (*ledger.Handler, error)
	// Clock (default clock.System) and Logger (default slog.Default())
	// reach every role.
	Clock  clock.Clock
	Logger *slog.Logger
	// SetAside keeps every role's failing items (default: one
	// setaside.Memory shared by the roles).
	SetAside setaside.Store
	// Index finds the sweeper's and the reconciler's candidates. Default:
	// the projector's read models when Projector is built, else a
	// recovery.LogIndex on View(Index).
	Index recovery.Index

	Projector  *projections.Config
	Sweeper    *recovery.SweeperConfig
	Reconciler *recovery.ReconcilerConfig
	Relays     *transport.RelaysConfig
}

// Roles are the roles built; a role not asked for is nil (Relays empty).
type Roles struct {
	Projector  *projections.Projector
	Index      recovery.Index
	Sweeper    *recovery.Sweeper
	Reconciler *recovery.Reconciler
	Relays     []*transport.Relay
}

// Build builds the roles cfg asks for. It does no I/O.
func Build(cfg Config) (*Roles, error) {
	if cfg.Store == nil {
		return nil, errors.New("roles: Store is required")
	}
	if cfg.View == nil {
		cfg.View = func(string) eventstore.Store { return cfg.Store }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Ledger == nil {
		cfg.Ledger = func(store eventstore.Store) (*ledger.Handler, error) {
			return ledger.New(ledger.Config{Store: store, Clock: cfg.Clock, Logger: cfg.Logger})
		}
	}
	if cfg.SetAside == nil {
		cfg.SetAside = &setaside.Memory{}
	}
	b := &builder{cfg: cfg, roles: &Roles{Index: cfg.Index}}
	for _, step := range []func() error{b.projector, b.index, b.sweeper, b.reconciler, b.relays} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return b.roles, nil
}

type builder struct {
	cfg   Config
	roles *Roles
}

func (b *builder) projector() error {
	pc := b.cfg.Projector
	if pc == nil {
		return nil
	}
	c := *pc
	if c.Store == nil {
		c.Store = b.cfg.View(Projector)
	}
	if c.Clock == nil {
		c.Clock = b.cfg.Clock
	}
	if c.Logger == nil {
		c.Logger = b.cfg.Logger
	}
	if c.SetAside == nil {
		c.SetAside = b.cfg.SetAside
	}
	p, err := projections.New(c)
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	b.roles.Projector = p
	if b.roles.Index == nil {
		index, err := projections.NewIndex(c.Pool, c.Schema)
		if err != nil {
			return fmt.Errorf("roles: index: %w", err)
		}
		b.roles.Index = index
	}
	return nil
}

// index builds the log index when the sweeper or the reconciler needs one
// and neither Config nor the projector gave it.
func (b *builder) index() error {
	if b.roles.Index != nil || b.cfg.Sweeper == nil && b.cfg.Reconciler == nil {
		return nil
	}
	index, err := recovery.NewLogIndex(recovery.LogIndexConfig{Store: b.cfg.View(Index), SetAside: b.cfg.SetAside,
		Clock: b.cfg.Clock, Logger: b.cfg.Logger})
	if err != nil {
		return fmt.Errorf("roles: index: %w", err)
	}
	b.roles.Index = index
	return nil
}

func (b *builder) sweeper() error {
	sc := b.cfg.Sweeper
	if sc == nil {
		return nil
	}
	c := *sc
	var err error
	if c.Ledger == nil {
		if c.Ledger, err = b.cfg.Ledger(b.cfg.View(Sweeper)); err != nil {
			return fmt.Errorf("roles: sweeper: %w", err)
		}
	}
	if c.Index == nil {
		c.Index = b.roles.Index
	}
	if c.Clock == nil {
		c.Clock = b.cfg.Clock
	}
	if c.Logger == nil {
		c.Logger = b.cfg.Logger
	}
	if c.SetAside == nil {
		c.SetAside = b.cfg.SetAside
	}
	b.roles.Sweeper, err = recovery.NewSweeper(c)
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	return nil
}

func (b *builder) reconciler() error {
	rc := b.cfg.Reconciler
	if rc == nil {
		return nil
	}
	c := *rc
	var err error
	if c.Ledger == nil {
		if c.Ledger, err = b.cfg.Ledger(b.cfg.View(Reconciler)); err != nil {
			return fmt.Errorf("roles: reconciler: %w", err)
		}
	}
	if c.Index == nil {
		c.Index = b.roles.Index
	}
	if c.Clock == nil {
		c.Clock = b.cfg.Clock
	}
	if c.Logger == nil {
		c.Logger = b.cfg.Logger
	}
	if c.SetAside == nil {
		c.SetAside = b.cfg.SetAside
	}
	b.roles.Reconciler, err = recovery.NewReconciler(c)
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	return nil
}

func (b *builder) relays() error {
	rc := b.cfg.Relays
	if rc == nil {
		return nil
	}
	c := *rc
	if c.Store == nil {
		c.Store = b.cfg.Store
	}
	if c.View == nil {
		c.View = func(name string) eventstore.Store { return b.cfg.View(Relay + " " + name) }
	}
	if c.Clock == nil {
		c.Clock = b.cfg.Clock
	}
	if c.Logger == nil {
		c.Logger = b.cfg.Logger
	}
	if c.SetAside == nil {
		c.SetAside = b.cfg.SetAside
	}
	relays, err := transport.StandardRelays(c)
	if err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	b.roles.Relays = relays
	return nil
}
