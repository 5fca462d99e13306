package kafka

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseBrokers reads a comma-separated broker list ("host:port,host:port"),
// as KAFKA_BROKERS holds it. Every entry must be host:port with a numeric
// port; an empty list is an error.
func ParseBrokers(s string) ([]string, error) {
	var out []string
	for _, b := range strings.Split(s, ",") {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		host, port, err := net.SplitHostPort(b)
		if err != nil || host == "" {
			return nil, fmt.Errorf("kafka broker %q: want host:port", b)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("kafka broker %q: port must be 1..65535", b)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("no kafka brokers: want host:port[,host:port...]")
	}
	return out, nil
}
