package kurrent

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// Defaults applied by Config.
const (
	// DefaultCallTimeout bounds every call when Config.CallTimeout is zero.
	DefaultCallTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds connecting (discovery and a first read)
	// when Config.ConnectTimeout is zero.
	DefaultConnectTimeout = 5 * time.Second
)

// DefaultStreamPrefixes returns opledger's stream categories: one stream
// per operation and the evidence stream (domain.OperationStreamPrefix and
// domain.EvidenceStream).
func DefaultStreamPrefixes() []string { return []string{"operation-", "evidence-"} }

// Config configures Open.
type Config struct {
	// URL is a KurrentDB connection string, e.g.
	// "esdb://127.0.0.1:2113?tls=false" for an insecure single node, or
	// "esdb+discover://..." for a cluster. Required. It is never printed with
	// its password (see RedactURL). Settings in the URL win over the ones
	// Open derives from this Config (maxDiscoverAttempts, gossipTimeout,
	// defaultDeadline).
	URL string
	// CallTimeout bounds every call of the store (Append, ReadStream,
	// ReadAll, starting a subscription), waiting for a connection included:
	// the call returns within it even if the client library does not.
	// Default DefaultCallTimeout.
	CallTimeout time.Duration
	// ConnectTimeout bounds one connection probe: a new client discovers the
	// node and answers one read. Open fails after it; a call waiting for a
	// probe fails after its own CallTimeout. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// StreamPrefixes are the stream categories this store owns. Append
	// refuses other streams; ReadAll and Subscribe return only events of
	// these streams (a server-side filter). Default DefaultStreamPrefixes.
	StreamPrefixes []string
	// Namespace is prepended to every stream name on the server and removed
	// on the way back, so several isolated stores can share a server (tests
	// do). Empty by default: streams map one to one. With a namespace, an
	// empty prefix in StreamPrefixes means every stream of the namespace.
	Namespace string
	// Logger receives the client library's own log lines, at debug level
	// (the store reports failures through its errors). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	c.CallTimeout = cmp.Or(c.CallTimeout, DefaultCallTimeout)
	c.ConnectTimeout = cmp.Or(c.ConnectTimeout, DefaultConnectTimeout)
	if len(c.StreamPrefixes) == 0 {
		c.StreamPrefixes = DefaultStreamPrefixes()
	} else {
		c.StreamPrefixes = slices.Clone(c.StreamPrefixes)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	if c.URL == "" {
		return errors.New("kurrent config: URL is required")
	}
	if c.CallTimeout < 0 {
		return fmt.Errorf("kurrent config: CallTimeout is %s, must not be negative", c.CallTimeout)
	}
	if c.ConnectTimeout < 0 {
		return fmt.Errorf("kurrent config: ConnectTimeout is %s, must not be negative", c.ConnectTimeout)
	}
	if strings.HasPrefix(c.Namespace, "$") {
		return fmt.Errorf("kurrent config: Namespace %q starts with $, which KurrentDB reserves for system streams", c.Namespace)
	}
	for _, p := range c.StreamPrefixes {
		switch {
		case strings.HasPrefix(p, "$"):
			return fmt.Errorf("kurrent config: stream prefix %q starts with $, which KurrentDB reserves for system streams", p)
		case c.Namespace+p == "":
			return errors.New("kurrent config: an empty stream prefix (every stream) needs a Namespace")
		}
	}
	return nil
}

// clientConfig parses the URL and applies what the store needs from the
// client: one discovery attempt per probe (the store retries by probing
// again), a gossip timeout within ConnectTimeout, CallTimeout as the
// default deadline, and logs routed to the Logger. Settings the URL spells
// out are kept.
func clientConfig(c Config) (*esdb.Configuration, error) {
	es, err := esdb.ParseConnectionString(c.URL)
	if err != nil {
		return nil, fmt.Errorf("kurrent config: cannot parse URL %s: %s", RedactURL(c.URL), redactIn(err.Error(), c.URL))
	}
	set := querySettings(c.URL)
	if !set["maxdiscoverattempts"] {
		es.MaxDiscoverAttempts = 1
		if !set["discoveryinterval"] {
			es.DiscoveryInterval = 0 // the pause after the last attempt: nothing follows it
		}
	}
	if !set["gossiptimeout"] {
		es.GossipTimeout = max(1, int(math.Ceil(c.ConnectTimeout.Seconds())))
	}
	if !set["defaultdeadline"] {
		d := c.CallTimeout
		es.DefaultDeadline = &d
	}
	logger := c.Logger
	es.Logger = func(level esdb.LogLevel, format string, args ...any) {
		logger.Debug("kurrent client: "+fmt.Sprintf(format, args...), "level", level)
	}
	return es, nil
}

// querySettings returns the lower-cased names of the settings in a
// connection string's query.
func querySettings(u string) map[string]bool {
	_, query, ok := strings.Cut(u, "?")
	if !ok {
		return nil
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return nil
	}
	out := make(map[string]bool, len(values))
	for k := range values {
		out[strings.ToLower(k)] = true
	}
	return out
}

// RedactURL returns a connection string with its password replaced by
// "***", for messages.
func RedactURL(u string) string {
	head, info, tail, ok := userInfo(u)
	if !ok {
		return u
	}
	user, _, hasPassword := strings.Cut(info, ":")
	if !hasPassword {
		return u
	}
	return head + user + ":***" + tail
}

// redactIn removes u's password from text (a parser's message may quote
// the connection string).
func redactIn(text, u string) string {
	_, info, _, ok := userInfo(u)
	if !ok {
		return text
	}
	if _, password, ok := strings.Cut(info, ":"); ok && password != "" {
		return strings.ReplaceAll(text, password, "***")
	}
	return text
}

// userInfo splits a connection string around its user info: the text
// between "://" and the last "@" before the path. ok is false when there is
// none.
func userInfo(u string) (head, info, tail string, ok bool) {
	i := strings.Index(u, "://")
	if i < 0 {
		return "", "", "", false
	}
	rest := u[i+3:]
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return "", "", "", false
	}
	return u[:i+3], rest[:at], rest[at:], true
}
