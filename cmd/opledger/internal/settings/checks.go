package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Checks the catalogue's settings use. Each error says what is wanted; the
// caller names the setting and the value.

func durationIn(lo, hi time.Duration, example string) func(string) error {
	return func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d < lo || (hi > 0 && d > hi) {
			if hi > 0 {
				return fmt.Errorf("want a duration from %s to %s, like %s", fmtDuration(lo), fmtDuration(hi), example)
			}
			if lo <= time.Nanosecond {
				return fmt.Errorf("want a positive duration like %s", example)
			}
			return fmt.Errorf("want a duration of at least %s, like %s", fmtDuration(lo), example)
		}
		return nil
	}
}

// optional lets the empty text through (the setting is off).
func optional(check func(string) error) func(string) error {
	return func(s string) error {
		if s == "" {
			return nil
		}
		return check(s)
	}
}

// fmtDuration is d as Go writes it, without its zero tail: 8h, 1m, 1m30s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func intIn(lo, hi int) func(string) error {
	return func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want a whole number from %d to %d", lo, hi)
		}
		return nil
	}
}

func floatIn(lo, hi float64, note string) func(string) error {
	return func(s string) error {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || x < lo || x > hi {
			return fmt.Errorf("want a number from %g to %g%s", lo, hi, note)
		}
		return nil
	}
}

func oneOf(values ...string) func(string) error {
	return func(s string) error {
		for _, v := range values {
			if strings.EqualFold(s, v) {
				return nil
			}
		}
		return fmt.Errorf("want %s", orList(values))
	}
}

// listOf accepts a comma-separated list of known names (empty: none).
func listOf(known []string) func(string) error {
	return func(s string) error {
		for _, item := range strings.Split(s, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			if oneOf(known...)(item) != nil {
				return fmt.Errorf("unknown %q: want a comma-separated list of %s", item, orList(known))
			}
		}
		return nil
	}
}

func nonEmpty(what string) func(string) error {
	return func(s string) error {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("is empty: want %s", what)
		}
		return nil
	}
}

func orList(values []string) string {
	switch len(values) {
	case 0:
		return "nothing"
	case 1:
		return values[0]
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}
