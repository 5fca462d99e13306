package postgres

import (
	"net/url"
	"regexp"
	"strings"
)

const redacted = "xxxxx"

var (
	// password=... in a key/value connection string or a URL query;
	// the value may be single-quoted with backslash escapes.
	passwordKeyword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)`)
	// user:password@ in a URL that net/url cannot parse.
	userinfoPassword = regexp.MustCompile(`(://[^:/@?#]*:)[^@/?#]*@`)
)

// RedactURL returns connString with any password replaced by "xxxxx", for
// logs and error messages. It accepts postgres:// URLs and key/value
// connection strings ("host=... password=..."), and also masks what looks
// like a password in text neither parser accepts.
func RedactURL(connString string) string {
	if strings.Contains(connString, "://") {
		if u, err := url.Parse(connString); err == nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), redacted)
			}
			q := u.Query()
			if q.Has("password") {
				q.Set("password", redacted)
				u.RawQuery = q.Encode()
			}
			return u.String()
		}
		connString = userinfoPassword.ReplaceAllString(connString, "${1}"+redacted+"@")
	}
	return passwordKeyword.ReplaceAllString(connString, "${1}"+redacted)
}
