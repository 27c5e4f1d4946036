package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// point is one measurement as the charts read it: the fields shared by the
// agent's Report and the web chat's WebReport lines of a results file.
type point struct {
	Series string  // the line it belongs to
	N      float64 // conversations (or browsers)
	RSS    float64 // bytes
	P99    float64 // ms; NaN when the line has none
	Delay  float64 // p99 delay from the server's write, ms; NaN when the line has none
}

// readPoints reads JSON lines of reports. A line with "client" is the
// agent mode's Report; a line with "browsers" is the web chat mode's.
func readPoints(r io.Reader) ([]point, error) {
	var out []point
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("results line %d: %w", line, err)
		}
		num := func(k string) float64 {
			if v, ok := raw[k].(float64); ok {
				return v
			}
			return math.NaN()
		}
		var p point
		if c, ok := raw["client"].(string); ok {
			p = point{Series: c, N: num("n"), RSS: num("rss_b"), P99: num("added_p99_ms"), Delay: num("delay_p99_ms")}
			if tls, _ := raw["tls"].(bool); tls {
				p.Series += " (HTTP/2, TLS)"
			} else {
				p.Series += " (HTTP/1.1)"
			}
			if tool, _ := raw["tool"].(bool); tool {
				p.Series += ", tool call"
			}
			if pace := num("pace_ms"); !math.IsNaN(pace) {
				p.Series += fmt.Sprintf(", %g ms/delta", pace)
			}
			if d := num("approval_delay_ms"); !math.IsNaN(d) && d != 1000 {
				p.Series += fmt.Sprintf(", approvals within %g s", d/1000) // 1 s is the default
			}
			if s, _ := raw["setup"].(string); s != "" {
				p.Series += ", " + s
			}
		} else if _, ok := raw["connected"]; ok {
			// The web chat's WebReport: two points, its RSS with N
			// browsers connected, and its peak while some of them ran
			// turns (with their added latency).
			store, _ := raw["store"].(string)
			idle := point{Series: "web chat, N browsers connected", N: num("n"), RSS: num("connected_rss_b"), P99: math.NaN(), Delay: math.NaN()}
			if math.IsNaN(idle.N) || math.IsNaN(idle.RSS) {
				return nil, fmt.Errorf("results line %d: no N or RSS", line)
			}
			out = append(out, idle)
			p = point{Series: fmt.Sprintf("web chat, peak with %g of them in turns (%s store)", num("active"), store),
				N: num("n"), RSS: num("peak_rss_b"), P99: num("added_p99_ms"), Delay: num("delay_p99_ms")}
		} else {
			return nil, fmt.Errorf("results line %d: neither an agent nor a web chat report", line)
		}
		if math.IsNaN(p.N) || math.IsNaN(p.RSS) {
			return nil, fmt.Errorf("results line %d: no N or RSS", line)
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

// writePlots reads the results files and writes rss.png (RSS per N) and
// p99.png (added p99 inter-chunk latency per N) into dir, and delay.png
// (p99 delay from the server's write per N) when a results line has it.
func writePlots(dir string, files []string) error {
	var pts []point
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		p, err := readPoints(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		pts = append(pts, p...)
	}
	if len(pts) == 0 {
		return fmt.Errorf("no results in %v", files)
	}
	rss := chart("Resident memory of the process holding N conversations", "N (concurrent conversations)", "RSS (MiB)")
	target := hline(pts, 1024)
	rss.Add(target)
	rss.Legend.Add("1 GiB target", target)
	rss.Y.Min = 0
	for _, p := range pts {
		rss.Y.Max = math.Max(rss.Y.Max, math.Max(1024, p.RSS/(1<<20))*1.1)
	}
	p99 := chart("Inter-chunk latency added over the server's pacing, p99", "N (concurrent conversations)", "added p99 (ms, log scale)")
	p99.Y.Scale = plot.LogScale{}
	p99.Y.Tick.Marker = plot.TickerFunc(oneTwoFive)
	target = hline(pts, 10)
	p99.Add(target)
	p99.Legend.Add("10 ms target", target)
	ns := plot.TickerFunc(func(min, max float64) []plot.Tick {
		var out []plot.Tick
		for _, p := range pts {
			if !slices.ContainsFunc(out, func(t plot.Tick) bool { return t.Value == p.N }) {
				out = append(out, plot.Tick{Value: p.N, Label: strconv.FormatFloat(p.N, 'f', -1, 64)})
			}
		}
		return out
	})
	delay := chart("Delay from the server's write of a delta to the client's chunk, p99", "N (concurrent conversations)", "delay p99 (ms, log scale)")
	delay.Y.Scale = plot.LogScale{}
	delay.Y.Tick.Marker = plot.TickerFunc(oneTwoFive)
	target = hline(pts, 10)
	delay.Add(target)
	delay.Legend.Add("10 ms target", target)
	delays := 0
	rss.X.Tick.Marker, p99.X.Tick.Marker, delay.X.Tick.Marker = ns, ns, ns
	for i, s := range seriesOf(pts) {
		var m, l, d plotter.XYs
		for _, p := range pts {
			if p.Series != s {
				continue
			}
			m = append(m, plotter.XY{X: p.N, Y: p.RSS / (1 << 20)})
			if !math.IsNaN(p.P99) {
				l = append(l, plotter.XY{X: p.N, Y: math.Max(p.P99, 0.01)}) // log scale: no zero
			}
			if !math.IsNaN(p.Delay) {
				d = append(d, plotter.XY{X: p.N, Y: math.Max(p.Delay, 0.01)})
			}
		}
		if err := addLine(rss, s, i, m); err != nil {
			return err
		}
		if len(l) > 0 {
			if err := addLine(p99, s, i, l); err != nil {
				return err
			}
		}
		if len(d) > 0 {
			delays++
			if err := addLine(delay, s, i, d); err != nil {
				return err
			}
		}
	}
	// The latencies rise from left to right and the web chat's stay low:
	// room above them, on the log scale, for the legend.
	p99.Y.Max *= 30
	p99.Legend.Top = true
	delay.Y.Max *= 30
	delay.Legend.Top = true
	charts := map[string]*plot.Plot{"rss.png": rss, "p99.png": p99}
	if delays > 0 {
		charts["delay.png"] = delay
	}
	for name, p := range charts {
		if err := p.Save(18*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

func chart(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	// Bottom right: the lines rise from the left as N grows.
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(6), vg.Points(6)
	p.Legend.ThumbnailWidth = vg.Points(14)
	p.X.Padding, p.Y.Padding = vg.Points(12), vg.Points(12)
	p.Add(plotter.NewGrid())
	return p
}

// seriesOf returns the series in the order they first appear.
func seriesOf(pts []point) []string {
	var out []string
	for _, p := range pts {
		if !slices.Contains(out, p.Series) {
			out = append(out, p.Series)
		}
	}
	return out
}

var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xd6, 0x27, 0x28, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xff, 0x7f, 0x0e, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
}

// addLine adds one series as a line with points, sorted by N.
func addLine(p *plot.Plot, name string, i int, xys plotter.XYs) error {
	slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	c := palette[i%len(palette)]
	l.Color, s.Color = c, c
	s.Shape = draw.CircleGlyph{}
	p.Add(l, s)
	p.Legend.Add(name, l, s)
	return nil
}

// hline is a dashed grey line at y across the range of N.
func hline(pts []point, y float64) *plotter.Line {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range pts {
		lo, hi = math.Min(lo, p.N), math.Max(hi, p.N)
	}
	l, _ := plotter.NewLine(plotter.XYs{{X: lo, Y: y}, {X: hi, Y: y}})
	l.Color = color.Gray{Y: 0x80}
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	return l
}

// oneTwoFive marks 1, 2 and 5 times the powers of ten between min and max,
// for a log scale.
func oneTwoFive(min, max float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(min)); math.Pow(10, e) <= max; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v >= min && v <= max {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
	}
	return out
}
