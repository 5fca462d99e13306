package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 named cn and
// its key, and returns the paths and the certificate.
func selfSigned(t *testing.T, dir, cn string) (certFile, keyFile string, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile, cert
}

// TestServeTLS: the server speaks TLS 1.3 and HTTP/2 with a certificate
// made here, refuses TLS 1.1, and a reload swaps the certificate for new
// connections (a bad one keeps the old).
func TestServeTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certA, keyA, leafA := selfSigned(t, dir, "cert-a")
	certB, keyB, leafB := selfSigned(t, dir, "cert-b")
	cert, err := httpapi.LoadCertificate(certA, keyA)
	require.NoError(t, err)
	require.Equal(t, "cert-a", cert.Leaf().Subject.CommonName)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := httpapi.NewHTTPServer(ln.Addr().String(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}), nil)
	srv.TLSConfig = cert.TLSConfig()
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})

	roots := x509.NewCertPool()
	roots.AddCert(leafA)
	roots.AddCert(leafB)
	get := func(cfg *tls.Config) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		res, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + ln.Addr().String() + "/healthz")
		if err == nil {
			res.Body.Close()
		}
		return res, err
	}
	res, err := get(&tls.Config{RootCAs: roots})
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, res.StatusCode)
	require.Equal(t, uint16(tls.VersionTLS13), res.TLS.Version)
	require.Equal(t, 2, res.ProtoMajor, "HTTP/2 over TLS")
	require.Equal(t, "cert-a", res.TLS.PeerCertificates[0].Subject.CommonName)

	res, err = get(&tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS12})
	require.NoError(t, err, "TLS 1.2 is still accepted")
	require.Equal(t, uint16(tls.VersionTLS12), res.TLS.Version)
	_, err = get(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
	require.Error(t, err, "TLS 1.1 is refused")

	// Reload: the files now hold B; new connections get it.
	require.NoError(t, os.Rename(certB, certA))
	require.NoError(t, os.Rename(keyB, keyA))
	require.NoError(t, cert.Reload())
	res, err = get(&tls.Config{RootCAs: roots})
	require.NoError(t, err)
	require.Equal(t, "cert-b", res.TLS.PeerCertificates[0].Subject.CommonName)

	// A broken key file is refused and B stays in use.
	require.NoError(t, os.WriteFile(keyA, []byte("not a key"), 0o600))
	require.Error(t, cert.Reload())
	res, err = get(&tls.Config{RootCAs: roots})
	require.NoError(t, err)
	require.Equal(t, "cert-b", res.TLS.PeerCertificates[0].Subject.CommonName)

	_, err = httpapi.LoadCertificate(certA, "")
	require.ErrorContains(t, err, httpapi.TLSKeyEnvVar)
	_, err = httpapi.LoadCertificate(filepath.Join(dir, "missing.crt"), keyA)
	require.True(t, errors.Is(err, os.ErrNotExist))
}
