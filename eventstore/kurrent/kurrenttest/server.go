package kurrenttest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Server is an in-process KurrentDB stand-in behind a Gate. Its data lives
// as long as the Server and survives every gate mode.
type Server struct {
	log   *eventLog
	grpc  *grpc.Server
	inner net.Listener
	gate  *Gate
	once  sync.Once
}

// Start starts a Server for the test and closes it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s, err := NewServer()
	if err != nil {
		tb.Fatalf("kurrenttest: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a Server on loopback. Close it when done.
func NewServer() (*Server, error) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	gate, err := NewGate(inner.Addr().String())
	if err != nil {
		_ = inner.Close()
		return nil, err
	}
	s := &Server{
		log: newEventLog(time.Now),
		// The client pings every 10s even without calls (PermitWithoutStream);
		// KurrentDB (Kestrel) does not object, so neither does this server.
		grpc: grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime: time.Second, PermitWithoutStream: true,
		})),
		inner: inner,
		gate:  gate,
	}
	streams.RegisterStreamsServer(s.grpc, &streamsService{log: s.log})
	serverfeatures.RegisterServerFeaturesServer(s.grpc, featuresService{})
	gossip.RegisterGossipServer(s.grpc, gossipService{instance: uuid.New(), advertise: gate.Addr()})
	go func() { _ = s.grpc.Serve(inner) }()
	s.seed()
	return s, nil
}

// seed writes what a fresh node writes before any client does: system
// events, which filtered readers must never see.
func (s *Server) seed() {
	s.AppendRaw("$settings", "update-default-acl", []byte(`{"$userStreamAcl":{"$r":"$all"}}`))
	s.AppendRaw("$stats-127.0.0.1:2113", "$statsCollected", []byte(`{"proc-id":1}`))
}

// URL is the connection string clients use: the gate's address, no TLS.
func (s *Server) URL() string { return "esdb://" + s.gate.Addr() + "?tls=false" }

// DirectURL is a connection string that bypasses the gate: the gate's
// modes do not apply to it, and it saves the gate's copying.
func (s *Server) DirectURL() string { return "esdb://" + s.inner.Addr().String() + "?tls=false" }

// Gate returns the server's gate, to switch what clients experience.
func (s *Server) Gate() *Gate { return s.gate }

// Refuse makes the server refuse connections and cuts the open ones.
func (s *Server) Refuse() { s.gate.Refuse() }

// Blackhole makes the server accept connections and never answer, and
// freezes the open ones.
func (s *Server) Blackhole() error { return s.gate.Blackhole() }

// Resume makes the server answer again, with all its data.
func (s *Server) Resume() error { return s.gate.Resume() }

// AppendRaw appends one JSON event to stream with expected revision Any,
// as another writer of the same server would: system streams, other
// categories, or system event types in any stream. It bypasses the gate.
func (s *Server) AppendRaw(stream, eventType string, data []byte) {
	s.log.append(stream, expectedAny, []proposed{{
		id: uuid.New(), eventType: eventType, contentType: "application/json", data: data,
	}})
}

// Close stops the gate and the server.
func (s *Server) Close() {
	s.once.Do(func() {
		s.gate.Close()
		s.grpc.Stop()
	})
}
