// Package settings is opledger's one configuration layer. Every setting a
// command reads — its flag, its environment variable, its default, how it
// is validated and its help text — is defined once, in the catalogue
// (catalogue.go), and bound by each command that reads it; a command's
// --help lists exactly what it bound. README.md's configuration table is
// checked against the catalogue by a test, so the table, --help and the
// behaviour cannot drift apart.
//
// Precedence: a flag given on the command line, else the environment
// variable when it is set and not empty, else the default. A value that
// does not validate is a one-line error naming where it came from (the
// flag, or the variable).
//
// The standard flag package does the parsing: the layer adds the variable,
// the validation, the help text and the catalogue around it, which is all
// the commands need (they have no nested command trees, no config files, no
// completion); see the commit that introduced it for the alternatives
// weighed.
package settings

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Setting is one configuration setting. Settings are defined once, as
// package variables of the catalogue; commands bind them by pointer.
type Setting struct {
	// Flag is the flag's name without dashes ("database-url").
	Flag string
	// FlagIn names the flag differently in the commands listed (command →
	// flag name), where Flag means something else there.
	FlagIn map[string]string
	// Env is the environment variable ("" for a flag-only setting).
	Env string
	// Default is the value when neither flag nor variable gives one, as
	// text; DefaultFunc, when set, computes it at run time and DefaultDoc
	// says in words what it is (for --help and the README).
	Default     string
	DefaultFunc func() string
	DefaultDoc  string
	// Arg is the value's placeholder in --help ("URL", "DURATION"); empty
	// for a boolean.
	Arg string
	// Bool makes it a switch: --flag alone means true.
	Bool bool
	// Help is one line for --help.
	Help string
	// Check validates the text (the default included); its error says what
	// is wanted, the caller adds the setting's name and the value.
	Check func(text string) error
	// Redact, when set, turns the value into what may be printed (a
	// database URL without its password).
	Redact func(text string) string
}

// FlagFor is the setting's flag name in command cmd.
func (s *Setting) FlagFor(cmd string) string {
	if f, ok := s.FlagIn[cmd]; ok {
		return f
	}
	return s.Flag
}

// DefaultText is the default as --help and the README show it.
func (s *Setting) DefaultText() string {
	if s.DefaultDoc != "" {
		return s.DefaultDoc
	}
	return s.Default
}

func (s *Setting) defaultValue() string {
	if s.DefaultFunc != nil {
		return s.DefaultFunc()
	}
	return s.Default
}

// Source is where a setting's value came from.
type Source int

const (
	FromDefault Source = iota
	FromEnv
	FromFlag
)

// binding is one setting bound in one command.
type binding struct {
	s      *Setting
	flag   string
	value  *textValue
	text   string
	source Source
}

// textValue is a flag.Value holding text (a boolean one for switches).
type textValue struct {
	text   string
	isBool bool
}

func (v *textValue) String() string { return v.text }

func (v *textValue) Set(s string) error {
	if v.isBool {
		if _, err := strconv.ParseBool(s); err != nil {
			return fmt.Errorf("want true or false")
		}
	}
	v.text = s
	return nil
}

func (v *textValue) IsBoolFlag() bool { return v.isBool }

// Flags is one command's flag set: the catalogue's settings it bound, and
// flags of its own (Local).
type Flags struct {
	cmd, synopsis string
	notes         []string
	fs            *flag.FlagSet
	bound         []*binding
	by            map[*Setting]*binding
	args          []string
	stderr        io.Writer
	lookupEnv     func(string) (string, bool)
}

// New returns the flag set of command cmd ("audit replay"); synopsis
// follows the command's name in its usage line.
func New(cmd, synopsis string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet("opledger "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed here, one way
	return &Flags{cmd: cmd, synopsis: synopsis, fs: fs, by: map[*Setting]*binding{}, stderr: stderr, lookupEnv: os.LookupEnv}
}

// Command is the command's name as given to New.
func (f *Flags) Command() string { return f.cmd }

// Note adds a paragraph printed after the flags in --help.
func (f *Flags) Note(text string) *Flags {
	f.notes = append(f.notes, text)
	return f
}

// Bind binds settings of the catalogue to this command.
func (f *Flags) Bind(ss ...*Setting) *Flags {
	for _, s := range ss {
		if _, dup := f.by[s]; dup {
			continue
		}
		b := &binding{s: s, flag: s.FlagFor(f.cmd), value: &textValue{isBool: s.Bool}}
		f.fs.Var(b.value, b.flag, s.Help)
		f.bound = append(f.bound, b)
		f.by[s] = b
	}
	return f
}

// Bound reports the settings bound, in binding order.
func (f *Flags) Bound() []*Setting {
	out := make([]*Setting, len(f.bound))
	for i, b := range f.bound {
		out[i] = b.s
	}
	return out
}

// Local is the underlying flag set, for flags of this command alone (its
// output format, a limit): no variable, and not in the catalogue.
func (f *Flags) Local() *flag.FlagSet { return f.fs }

// Parse parses args. Positional arguments may come before, between or after
// the flags (Args returns them). It then resolves and validates every bound
// setting. It reports whether the command should go on, and if not its
// exit code: 0 after --help, 2 for a malformed command line, 1 for a
// setting that does not validate (each printed on a line of its own,
// naming the setting).
func (f *Flags) Parse(args []string) (code int, ok bool) {
	for {
		if err := f.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				f.Usage(f.stderr)
				return 0, false
			}
			fmt.Fprintf(f.stderr, "opledger %s: %s (opledger %s --help lists its flags)\n", f.cmd, dashes(err.Error()), f.cmd)
			return 2, false
		}
		rest := f.fs.Args()
		if len(rest) == 0 {
			break
		}
		if strings.HasPrefix(rest[0], "-") && rest[0] != "-" { // after "--": all positional
			f.args = append(f.args, rest...)
			break
		}
		f.args, args = append(f.args, rest[0]), rest[1:]
	}
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	var errs []error
	for _, b := range f.bound {
		switch v, set := f.lookupEnv(b.s.Env); {
		case given[b.flag]:
			b.text, b.source = b.value.text, FromFlag
		case b.s.Env != "" && set && v != "":
			b.text, b.source = v, FromEnv
		default:
			b.text, b.source = b.s.defaultValue(), FromDefault
		}
		if b.s.Bool && b.source != FromDefault {
			if _, err := strconv.ParseBool(b.text); err != nil {
				errs = append(errs, f.Invalid(b.s, "want true or false"))
				continue
			}
		}
		if b.s.Check != nil {
			if err := b.s.Check(b.text); err != nil {
				errs = append(errs, f.Invalid(b.s, err.Error()))
			}
		}
	}
	if len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintf(f.stderr, "opledger %s: %v\n", f.cmd, err)
		}
		return 1, false
	}
	return 0, true
}

// dashes writes the flag package's "-name" as "--name", as --help does.
func dashes(msg string) string {
	if i := strings.Index(msg, ": -"); i >= 0 && !strings.HasPrefix(msg[i+2:], "--") {
		return msg[:i+2] + "-" + msg[i+2:]
	}
	return msg
}

// Args are the positional arguments, in order.
func (f *Flags) Args() []string { return f.args }

// Arg is the i-th positional argument, or "".
func (f *Flags) Arg(i int) string {
	if i < len(f.args) {
		return f.args[i]
	}
	return ""
}

func (f *Flags) binding(s *Setting) *binding {
	b, ok := f.by[s]
	if !ok {
		panic(fmt.Sprintf("settings: %s reads --%s without binding it", f.cmd, s.Flag))
	}
	return b
}

// Has reports whether the command bound s.
func (f *Flags) Has(s *Setting) bool { _, ok := f.by[s]; return ok }

// Text is the setting's value as text.
func (f *Flags) Text(s *Setting) string { return f.binding(s).text }

// Source is where the setting's value came from.
func (f *Flags) Source(s *Setting) Source { return f.binding(s).source }

// Given reports whether the flag or the variable gave the value.
func (f *Flags) Given(s *Setting) bool { return f.binding(s).source != FromDefault }

// Duration is the value of a duration setting (its Check has parsed it).
func (f *Flags) Duration(s *Setting) time.Duration {
	d, _ := time.ParseDuration(f.Text(s))
	return d
}

// Int is the value of a whole-number setting.
func (f *Flags) Int(s *Setting) int {
	n, _ := strconv.Atoi(f.Text(s))
	return n
}

// Float is the value of a number setting.
func (f *Flags) Float(s *Setting) float64 {
	x, _ := strconv.ParseFloat(f.Text(s), 64)
	return x
}

// Bool is the value of a switch.
func (f *Flags) Bool(s *Setting) bool {
	v, _ := strconv.ParseBool(f.Text(s))
	return v
}

// Name says how to refer to the setting in a message: the flag when it was
// given, the variable when it gave the value, else both ("PROVIDER_URL /
// --provider-url").
func (f *Flags) Name(s *Setting) string {
	b := f.binding(s)
	switch {
	case b.source == FromFlag || s.Env == "":
		return "--" + b.flag
	case b.source == FromEnv:
		return s.Env
	}
	return s.Env + " / --" + b.flag
}

// Invalid is the error for the setting's value: its name, the value
// (redacted where the setting says so) and why.
func (f *Flags) Invalid(s *Setting, why string) error {
	text := f.Text(s)
	if s.Redact != nil {
		text = s.Redact(text)
	}
	return fmt.Errorf("%s %q: %s", f.Name(s), text, why)
}

// Missing is the error for a required setting that has no value.
func (f *Flags) Missing(s *Setting, what string) error {
	if s.Env == "" {
		return fmt.Errorf("no %s: set --%s", what, s.FlagFor(f.cmd))
	}
	return fmt.Errorf("no %s: set %s or --%s", what, s.Env, s.FlagFor(f.cmd))
}

// Hint names the setting as a user would give it again on the command line:
// "--store-schema NAME" (the value as in use).
func (f *Flags) Hint(s *Setting) string {
	return "--" + f.binding(s).flag + " " + f.Text(s)
}
