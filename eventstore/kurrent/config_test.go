package kurrent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"opledger/eventstore"
	"opledger/eventstore/kurrent"
)

// TestOpenRefusesBadConfig: configuration errors are plain errors, found
// before any connection is attempted, and never print a password.
func TestOpenRefusesBadConfig(t *testing.T) {
	t.Parallel()
	const url = "esdb://127.0.0.1:1?tls=false"
	cases := []struct {
		name string
		cfg  kurrent.Config
		want string
	}{
		{"no URL", kurrent.Config{}, "URL is required"},
		{"negative call timeout", kurrent.Config{URL: url, CallTimeout: -1}, "CallTimeout"},
		{"negative connect timeout", kurrent.Config{URL: url, ConnectTimeout: -1}, "ConnectTimeout"},
		{"system prefix", kurrent.Config{URL: url, StreamPrefixes: []string{"operation-", "$ce-"}}, "reserves for system streams"},
		{"system namespace", kurrent.Config{URL: url, Namespace: "$t."}, "reserves for system streams"},
		{"every stream without a namespace", kurrent.Config{URL: url, StreamPrefixes: []string{""}}, "needs a Namespace"},
		{"not a connection string", kurrent.Config{URL: "http://admin:s3cret@host:2113"}, "cannot parse URL"},
	}
	for _, tc := range cases {
		_, err := kurrent.Open(t.Context(), tc.cfg)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.NotErrorIs(t, err, eventstore.ErrUnavailable, tc.name)
		require.NotContains(t, err.Error(), "s3cret", tc.name)
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"esdb://admin:changeit@127.0.0.1:2113?tls=false":    "esdb://admin:***@127.0.0.1:2113?tls=false",
		"esdb+discover://admin:p@ss@cluster.example:2113/":  "esdb+discover://admin:***@cluster.example:2113/",
		"esdb://127.0.0.1:2113?tls=false":                   "esdb://127.0.0.1:2113?tls=false",
		"esdb://admin@127.0.0.1:2113":                       "esdb://admin@127.0.0.1:2113",
		"esdb://a:b@host1:2113,host2:2113?nodePreference=x": "esdb://a:***@host1:2113,host2:2113?nodePreference=x",
	} {
		require.Equal(t, want, kurrent.RedactURL(in), in)
	}
}
