package codec

import (
	"time"
	"unicode/utf8"

	"opledger/domain"
)

// fastMetadata reads data as metadata when it is in the shape this build's
// writers and PostgreSQL's jsonb give it: one object of the known members,
// each at most once, strings without escapes, schema_version a plain
// integer, recorded_at an RFC 3339 time in UTC (…T15:04:05[.fraction]Z).
// It reports false, having read nothing, for anything else (an unknown or
// repeated member, an escape, null, another number or time form, trailing
// bytes), which readObject then reads and judges. Where it reports true,
// the result is the one readObject gives (domain/codec's
// FuzzFastMetadataAgreesWithReadObject checks it): the same bytes parsed
// without reflection, for the metadata every stored event carries.
func fastMetadata(data []byte) (domain.Metadata, bool) {
	var m domain.Metadata
	p := skipSpace(data, 0)
	if p >= len(data) || data[p] != '{' {
		return domain.Metadata{}, false
	}
	p = skipSpace(data, p+1)
	if p < len(data) && data[p] == '}' {
		return m, skipSpace(data, p+1) == len(data)
	}
	var seen uint8
	for {
		name, q, ok := plainString(data, p)
		if !ok {
			return domain.Metadata{}, false
		}
		p = skipSpace(data, q)
		if p >= len(data) || data[p] != ':' {
			return domain.Metadata{}, false
		}
		p = skipSpace(data, p+1)
		var bit uint8
		switch string(name) {
		case "schema_version":
			bit = 1
			m.SchemaVersion, q, ok = plainInt(data, p)
		case "correlation_id":
			bit = 2
			var s []byte
			if s, q, ok = plainString(data, p); ok {
				m.CorrelationID = domain.CorrelationID(s)
			}
		case "causation_id":
			bit = 4
			var s []byte
			if s, q, ok = plainString(data, p); ok {
				m.CausationID = string(s)
			}
		case "actor":
			bit = 8
			var s []byte
			if s, q, ok = plainString(data, p); ok {
				m.Actor = string(s)
			}
		case "recorded_at":
			bit = 16
			var s []byte
			if s, q, ok = plainString(data, p); ok {
				m.RecordedAt, ok = utcTime(s)
			}
		}
		if bit == 0 || !ok || seen&bit != 0 {
			return domain.Metadata{}, false
		}
		seen |= bit
		var more bool
		if p, more, ok = afterValue(data, q, '}'); !ok {
			return domain.Metadata{}, false
		}
		if !more {
			if skipSpace(data, p) != len(data) {
				return domain.Metadata{}, false
			}
			return m, true
		}
	}
}

// afterValue reads what follows a member or an element at p: a comma, and
// then more follows (next is the index after the comma and the whitespace
// after it); or close, which ends the object or array (next is the index
// after it). Anything else: ok is false.
func afterValue(data []byte, p int, close byte) (next int, more, ok bool) {
	p = skipSpace(data, p)
	if p >= len(data) {
		return 0, false, false
	}
	switch data[p] {
	case ',':
		return skipSpace(data, p+1), true, true
	case close:
		return p + 1, false, true
	}
	return 0, false, false
}

// skipSpace returns the index of the first byte at or after p that is not
// JSON whitespace.
func skipSpace(data []byte, p int) int {
	for p < len(data) {
		switch data[p] {
		case ' ', '\t', '\n', '\r':
			p++
		default:
			return p
		}
	}
	return p
}

// plainString reads the JSON string at p when it holds no escape and no
// control character and is valid UTF-8: its contents and the index after
// its closing quote.
func plainString(data []byte, p int) ([]byte, int, bool) {
	if p >= len(data) || data[p] != '"' {
		return nil, 0, false
	}
	i := p + 1
	for i < len(data) && !notPlainASCII[data[i]] {
		i++
	}
	if i < len(data) && data[i] == '"' {
		return data[p+1 : i], i + 1, true
	}
	for ; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			s := data[p+1 : i]
			return s, i + 1, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// notPlainASCII marks the bytes plainString's first loop stops at: the
// quote, the backslash, control characters and every byte of a multi-byte
// UTF-8 sequence.
var notPlainASCII = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

// plainInt reads the JSON number at p when it is an integer of at most nine
// digits: 0, or an optional minus and a digit 1-9 and up to eight more. A
// fraction or exponent after it is left for the caller to refuse.
func plainInt(data []byte, p int) (int, int, bool) {
	neg := p < len(data) && data[p] == '-'
	if neg {
		p++
	}
	if p >= len(data) || data[p] < '0' || data[p] > '9' {
		return 0, 0, false
	}
	if data[p] == '0' {
		return 0, p + 1, true
	}
	n, start := 0, p
	for ; p < len(data) && data[p] >= '0' && data[p] <= '9'; p++ {
		if p-start == 9 {
			return 0, 0, false
		}
		n = n*10 + int(data[p]-'0')
	}
	if neg {
		n = -n
	}
	return n, p, true
}

// utcTime parses s, when it has the form 2006-01-02T15:04:05Z with an
// optional fraction of one to nine digits and every field in range (a day
// its month has, hour to 23, minute and second to 59), to the time the JSON
// decoder reads (time.Time.UnmarshalText, whose further checks hold for
// this form). Anything else is the decoder's to judge.
func utcTime(s []byte) (time.Time, bool) {
	const head = "2006-01-02T15:04:05"
	if len(s) < len(head)+1 || s[len(s)-1] != 'Z' {
		return time.Time{}, false
	}
	var f [6]int // year, month, day, hour, minute, second
	for i, k := 0, 0; i < len(head); i++ {
		switch head[i] {
		case '-', 'T', ':':
			if s[i] != head[i] {
				return time.Time{}, false
			}
			k++
		default:
			if s[i] < '0' || s[i] > '9' {
				return time.Time{}, false
			}
			f[k] = f[k]*10 + int(s[i]-'0')
		}
	}
	nanos := 0
	if frac := s[len(head) : len(s)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		scale := 100_000_000
		for _, c := range frac[1:] {
			if c < '0' || c > '9' {
				return time.Time{}, false
			}
			nanos += int(c-'0') * scale
			scale /= 10
		}
	}
	year, month, day, hour, minute, second := f[0], time.Month(f[1]), f[2], f[3], f[4], f[5]
	if month < time.January || month > time.December || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	return time.Date(year, month, day, hour, minute, second, nanos, time.UTC), true
}

// daysIn is the number of days of month in year (proleptic Gregorian).
func daysIn(month time.Month, year int) int {
	if month == time.February && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int(monthDays[month-1])
}

var monthDays = [12]uint8{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
