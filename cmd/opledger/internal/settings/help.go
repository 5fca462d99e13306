package settings

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Usage prints the command's usage: its synopsis, then every flag it takes
// (bound settings with their variable and default, and its own flags), then
// its notes.
func (f *Flags) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: opledger %s %s\n", f.cmd, f.synopsis)
	type entry struct{ name, arg, help, extra string }
	var entries []entry
	bound := map[string]*binding{}
	for _, b := range f.bound {
		bound[b.flag] = b
	}
	f.fs.VisitAll(func(fl *flag.Flag) {
		if b, ok := bound[fl.Name]; ok {
			var extra []string
			if b.s.Env != "" {
				extra = append(extra, "env "+b.s.Env)
			}
			if d := b.s.DefaultText(); d != "" {
				extra = append(extra, "default "+d)
			}
			entries = append(entries, entry{fl.Name, b.s.Arg, b.s.Help, strings.Join(extra, "; ")})
			return
		}
		arg, help := flag.UnquoteUsage(fl)
		if isBool(fl) {
			arg = ""
		} else {
			arg = strings.ToUpper(arg)
		}
		extra := ""
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0" && fl.DefValue != "[]" {
			extra = "default " + fl.DefValue
		}
		entries = append(entries, entry{fl.Name, arg, help, extra})
	})
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	if len(entries) > 0 {
		fmt.Fprintln(w, "\nflags (a flag overrides its environment variable, which overrides the default):")
	}
	for _, e := range entries {
		head := "  --" + e.name
		if e.arg != "" {
			head += " " + e.arg
		}
		fmt.Fprintln(w, head)
		fmt.Fprintf(w, "      %s\n", e.help)
		if e.extra != "" {
			fmt.Fprintf(w, "      [%s]\n", e.extra)
		}
	}
	for _, n := range f.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

func isBool(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
