package console_test

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"opledger/adapters/httpapi"
)

// ScreenshotsEnv names the directory TestScreenshots writes into
// (scripts/screenshots.sh sets it to docs/ui); unset, the test is skipped.
const ScreenshotsEnv = "OPLEDGER_SCREENSHOTS"

// TestScreenshots writes a PNG of every console page at 1280 and 390 px
// over the seed's story, signed in as an operator (so the forms show), for
// docs/ui.md. Each image is reduced to a palette of at most 256 colours.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" {
		t.Skip("set " + ScreenshotsEnv + "=DIR (scripts/screenshots.sh) to write the console's screenshots")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	alloc := newBrowser(t)
	s := newServed(t)
	anon := newTab(t, alloc, s.srv.URL)
	operator := newTab(t, alloc, s.srv.URL)
	operator.signIn(httpapi.RoleOperator)
	shots := []struct {
		name, path, scrollTo string
		who                  *tab
	}{
		{"signin", "/ui/signin", "", anon},
		{"operations", "/ui/operations", "", operator},
		{"operation", "/ui/operations/OP-4471", "", operator},
		{"timeline", "/ui/operations/OP-4471", "#h-timeline", operator},
		{"escalations", "/ui/escalations", "", operator},
		{"evidence", "/ui/evidence", "", operator},
		{"dead-letters", "/ui/dead-letters", "", operator},
		{"health", "/ui/health", "", operator},
		{"charts", "/ui/health", "#h-charts", operator},
		{"charts-day", "/ui/health?span=day", "#h-charts", operator},
	}
	var total int
	for _, width := range []int64{1280, 390} {
		height := int64(800)
		if width < 600 {
			height = 844
		}
		for _, sh := range shots {
			sh.who.do(chromedp.EmulateViewport(width, height))
			require.EqualValues(t, 200, sh.who.open(sh.path), sh.path)
			if sh.scrollTo != "" {
				sh.who.do(chromedp.Evaluate[chromedp.Void](`document.querySelector(` + jsString(sh.scrollTo) + `).scrollIntoView()`))
			}
			ctx, cancel := sh.who.bounded()
			raw, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			cancel()
			require.NoError(t, err)
			small, err := paletted(raw)
			require.NoError(t, err)
			name := filepath.Join(dir, sh.name+"-"+itoa(width)+".png")
			require.NoError(t, os.WriteFile(name, small, 0o644))
			total += len(small)
			t.Logf("%s: %d KB", name, len(small)/1024)
		}
	}
	t.Logf("%d screenshots, %d KB in all", 2*len(shots), total/1024)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// paletted re-encodes a screenshot with the 256 most frequent colours (a
// console page has few: text, a handful of tints and their antialiasing),
// each pixel mapped to the nearest: a fraction of the true-colour size.
func paletted(raw []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	counts := map[color.RGBA]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			counts[rgba(img.At(x, y))]++
		}
	}
	colors := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		colors = append(colors, c)
	}
	sort.Slice(colors, func(i, j int) bool {
		if counts[colors[i]] != counts[colors[j]] {
			return counts[colors[i]] > counts[colors[j]]
		}
		return lessRGBA(colors[i], colors[j])
	})
	pal := make(color.Palette, 0, 256)
	for _, c := range colors[:min(256, len(colors))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(b, pal)
	nearest := map[color.RGBA]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := rgba(img.At(x, y))
			i, ok := nearest[c]
			if !ok {
				i = uint8(pal.Index(c))
				nearest[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func rgba(c color.Color) color.RGBA {
	r, g, b, a := c.RGBA()
	return color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(a >> 8)}
}

func lessRGBA(a, b color.RGBA) bool {
	if a.R != b.R {
		return a.R < b.R
	}
	if a.G != b.G {
		return a.G < b.G
	}
	return a.B < b.B
}
