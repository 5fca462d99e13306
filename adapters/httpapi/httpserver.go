package httpapi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"
)

// Timeouts of the http.Server NewHTTPServer returns. Every request of this
// API is small and every command bounded by Config.CommandTimeout, so a
// connection that is slower than these is stuck or hostile.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// NewHTTPServer returns an http.Server serving h on addr with the timeouts
// above, its own errors logged through logger. Stop it with Shutdown, which
// lets requests in flight finish (a feed long-poll answers at once). To serve TLS, set its TLSConfig to a
// Certificate's TLSConfig and call ServeTLS(listener, "", "").
func NewHTTPServer(addr string, h http.Handler, logger *slog.Logger) *http.Server {
	if logger == nil {
		logger = slog.Default()
	}
	srv := &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if api, ok := h.(*Server); ok {
		srv.RegisterOnShutdown(api.StopWaiting) // long-polls answer, so Shutdown need not wait them out
	}
	return srv
}

// Settings naming the TLS files, for callers' flags and help text.
const (
	TLSCertFlag   = "tls-cert"
	TLSCertEnvVar = "OPLEDGER_TLS_CERT_FILE"
	TLSKeyFlag    = "tls-key"
	TLSKeyEnvVar  = "OPLEDGER_TLS_KEY_FILE"
)

// Certificate is the server's TLS certificate and key, read from PEM files
// and swapped atomically by Reload: handshakes in progress keep the one
// they started with. Safe for concurrent use.
type Certificate struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// LoadCertificate reads a PEM certificate chain (leaf first) and its
// private key. Errors name the files, never the key.
func LoadCertificate(certFile, keyFile string) (*Certificate, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("TLS needs both --%s (%s) and --%s (%s)", TLSCertFlag, TLSCertEnvVar, TLSKeyFlag, TLSKeyEnvVar)
	}
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again; on any error the certificate in use stays.
func (c *Certificate) Reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("TLS certificate %s: %w", c.certFile, err)
		}
	}
	c.cur.Store(&pair)
	return nil
}

// Leaf is the certificate in use (for logging its subject and expiry).
func (c *Certificate) Leaf() *x509.Certificate { return c.cur.Load().Leaf }

// TLSConfig is the server side of TLS with modern defaults: TLS 1.2 at
// least (1.3 is negotiated whenever the client has it), Go's default
// cipher suite selection (CipherSuites left unset, so it follows the Go
// release), HTTP/2 and HTTP/1.1, the certificate taken from c at each
// handshake.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert := c.cur.Load()
			if cert == nil {
				return nil, errors.New("no TLS certificate loaded")
			}
			return cert, nil
		},
	}
}
