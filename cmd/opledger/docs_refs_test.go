package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The repository's references to its own documents resolve: every
// docs/NAME.md a source file, README.md or a document names exists, every
// `docs/NAME.md, "Heading"` a comment cites is a heading there, and every
// markdown link to a document's #anchor finds the heading.

var (
	docRef      = regexp.MustCompile(`docs/([a-z0-9_-]+)\.md`)
	docHeading  = regexp.MustCompile(`docs/([a-z0-9_-]+)\.md, "([^"]+)"`)
	mdLink      = regexp.MustCompile(`\]\(([^)#\s]*\.md)?(#[^)\s]+)?\)`)
	headingLine = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	commentWrap = regexp.MustCompile(`\s*\n\s*(//|#)?\s*`)
)

// anchor is GitHub's slug of a heading.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func headings(t *testing.T, path string) (titles []string, anchors map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err, path)
	anchors = map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence {
			continue
		}
		if m := headingLine.FindStringSubmatch(line); m != nil {
			titles = append(titles, m[1])
			anchors[anchor(m[1])] = true
		}
	}
	return titles, anchors
}

func TestDocumentReferencesResolve(t *testing.T) {
	t.Parallel()
	root := "../.."
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		ext := filepath.Ext(path)
		if d.IsDir() || (ext != ".go" && ext != ".md" && ext != ".sh" && ext != ".yaml" && ext != ".yml") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(raw)
		rel, _ := filepath.Rel(root, path)
		for _, m := range docRef.FindAllStringSubmatch(text, -1) {
			if _, err := os.Stat(filepath.Join(root, "docs", m[1]+".md")); err != nil {
				problems = append(problems, rel+": names docs/"+m[1]+".md, which does not exist")
			}
		}
		for _, m := range docHeading.FindAllStringSubmatch(text, -1) {
			titles, _ := headings(t, filepath.Join(root, "docs", m[1]+".md"))
			cited := commentWrap.ReplaceAllString(m[2], " ") // a quote wrapped over comment lines
			found := false
			for _, h := range titles {
				found = found || strings.HasPrefix(strings.Trim(h, "`"), cited)
			}
			if !found {
				problems = append(problems, rel+`: cites docs/`+m[1]+`.md, "`+cited+`", which is no heading there`)
			}
		}
		if ext != ".md" {
			return nil
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target, frag := m[1], strings.TrimPrefix(m[2], "#")
			if strings.Contains(target, "://") || (target == "" && frag == "") {
				continue
			}
			file := path
			if target != "" {
				file = filepath.Join(filepath.Dir(path), target)
				if _, err := os.Stat(file); err != nil {
					problems = append(problems, rel+": links "+target+", which does not exist")
					continue
				}
			}
			if frag != "" {
				if _, anchors := headings(t, file); !anchors[frag] {
					problems = append(problems, rel+": links "+target+"#"+frag+", which is no heading there")
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, problems, "\n"+strings.Join(problems, "\n"))
}
