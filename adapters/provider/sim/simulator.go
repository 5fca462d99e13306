package sim

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Simulator is the provider simulator. It is an http.Handler and is safe for
// concurrent use; the Go methods and the /_sim endpoints act on the same
// state.
type Simulator struct {
	cfg Config
	dia dialect
	// replaysErrors is the profile's ReplaysSavedErrors.
	replaysErrors bool
	log           *slog.Logger
	clock         *simClock
	mux           *http.ServeMux
	done          chan struct{} // closed by Close

	mu                sync.Mutex
	closed            bool
	keys              *keyStore[*keyRecord]
	refunds           []*refund
	refundsByID       map[string]*refund
	refundsByOp       map[string][]*refund
	totals            Counters
	byOperation       map[string]*Counters
	requestLog        []*ReceivedRequest
	requestsForgotten int
	nextRequest       int64
	faults            []Fault
	holds             holds

	// The export-delivery service (exports.go).
	exportKeys      *keyStore[*exportKey]
	deliveries      []*ExportDelivery
	deliveriesByOp  map[string][]*ExportDelivery
	deliveriesByKey map[string]int
}

// New returns a simulator configured by cfg (see Config for defaults).
func New(cfg Config) (*Simulator, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Simulator{
		cfg:           cfg,
		dia:           newDialect(cfg.Profile),
		replaysErrors: cfg.Profile.documented().ReplaysSavedErrors,
		log:           cfg.Logger.With("component", "provider-sim", "profile", string(cfg.Profile)),
		clock:         newSimClock(cfg.Clock, cfg.Start),
		done:          make(chan struct{}),
		keys:          newKeyStore[*keyRecord](cfg.KeyRetention),
		refundsByID:   make(map[string]*refund),
		refundsByOp:   make(map[string][]*refund),
		byOperation:   make(map[string]*Counters),
		holds:         newHolds(),

		exportKeys:      newKeyStore[*exportKey](ExportKeyRetention),
		deliveriesByOp:  make(map[string][]*ExportDelivery),
		deliveriesByKey: make(map[string]int),
	}
	s.mux = http.NewServeMux()
	s.dia.routes(s, s.mux)
	s.exportRoutes(s.mux)
	s.mux.HandleFunc("GET /_sim/ledger", s.handleLedger)
	s.mux.HandleFunc("GET /_sim/ledger/export", s.handleExport)
	s.mux.HandleFunc("GET /_sim/faults", s.handleListFaults)
	s.mux.HandleFunc("POST /_sim/faults", s.handleArm)
	s.mux.HandleFunc("POST /_sim/faults/release", s.handleRelease)
	s.mux.HandleFunc("GET /_sim/clock", s.handleClock)
	s.mux.HandleFunc("POST /_sim/clock", s.handleAdvance)
	return s, nil
}

// Profile is the profile the simulator models.
func (s *Simulator) Profile() Profile { return s.cfg.Profile }

// ServeHTTP serves the profile's provider API and the /_sim endpoints.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Now is the simulated time.
func (s *Simulator) Now() time.Time { return s.clock.now() }

// Advance moves the simulated clock forward by d (d >= 0) and returns the new
// time. Keys older than the retention are pruned by the next creation request.
func (s *Simulator) Advance(d time.Duration) (time.Time, error) { return s.clock.advance(d) }

// Close ends every hold and delay now and makes later ones end at once, so
// that a server can shut down. The simulator keeps answering otherwise.
// Close is idempotent.
func (s *Simulator) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}
