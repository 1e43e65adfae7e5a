package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/leakscope/leakscope/analyze"
)

// htmlMemory is the page's memory section: the latest breakdown as the
// text header says it, and a stacked area chart of every breakdown of
// the target, the parts in analyze.MemoryParts' order from the bottom.
type htmlMemory struct {
	Line                   string
	Others                 []string // the other processes' latest breakdowns
	Untraced               string
	Width, Height          int
	Left, Top, Right, Foot string
	XTicks, YTicks         []htmlTick
	Bands                  []htmlBand
}

// htmlBand is one part of the breakdown over time: a closed polygon
// between its top and the top of the part below it.
type htmlBand struct {
	Name, Color string
	Points      string // SVG polygon points
	Last        string // its bytes in the latest breakdown
}

// memoryColors are the parts' colors, by their index in
// analyze.MemoryParts; unexplainedColor is unexplained's, grey.
var memoryColors = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#9c755f", "#76b7b2", "#59a14f", "#edc948",
	"#b07aa1", "#ff9da7", "#bab0ac", "#86bcb6", "#d37295", "#a0cbe8", "#ffbe7d", "#8cd17d",
}

const unexplainedColor = "#79706e"

// memoryOf draws the target's breakdowns; nil when the capture has none.
func memoryOf(r *analyze.Result) *htmlMemory {
	c := r.Capture
	line := memoryLine(r)
	if line == "" {
		return nil
	}
	var others []string
	for _, p := range c.Processes {
		if m := memoryLineOf(r, p.Pid); m != "" {
			others = append(others, fmt.Sprintf("pid %d: %s", p.Pid, m))
		}
	}
	type point struct {
		at    time.Duration
		bytes []uint64 // by part, in analyze.MemoryParts' order
	}
	var pts []point
	var span time.Duration
	var top uint64
	present := make([]bool, len(analyze.MemoryParts))
	for _, m := range c.Memory {
		pm := m.Of(c.Target.Pid)
		if pm == nil {
			continue
		}
		p := point{at: m.At, bytes: make([]uint64, len(analyze.MemoryParts))}
		for _, part := range pm.Parts {
			for i, n := range analyze.MemoryParts {
				if n == part.Name {
					p.bytes[i] = part.Bytes
					present[i] = present[i] || part.Bytes > 0
				}
			}
		}
		pts = append(pts, p)
		span = max(span, m.At)
		top = max(top, pm.RSS)
	}
	span = max(span, time.Second)
	yStep := byteStep(top)
	yMax := yStep * max(1, (top+yStep-1)/yStep)
	x := func(d time.Duration) float64 {
		if len(pts) == 1 {
			return chartRight // one breakdown: a bar at the right edge
		}
		return chartLeft + float64(d)/float64(span)*(chartRight-chartLeft)
	}
	y := func(n uint64) float64 {
		return chartFoot - float64(n)/float64(yMax)*(chartFoot-chartTop)
	}
	hm := &htmlMemory{
		Line: line, Others: others, Untraced: untracedKinds(c),
		Width: chartWidth, Height: chartHeight,
		Left: coord(chartLeft), Top: coord(chartTop), Right: coord(chartRight), Foot: coord(chartFoot),
	}
	for v := uint64(0); v <= yMax; v += yStep {
		hm.YTicks = append(hm.YTicks, htmlTick{coord(y(v)), tickBytes(v)})
	}
	for d, step := time.Duration(0), durationStep(span); d <= span; d += step {
		hm.XTicks = append(hm.XTicks, htmlTick{coord(x(d)), analyze.FormatDuration(d)})
	}
	below := make([]uint64, len(pts)) // the top of the parts drawn so far
	for i, name := range analyze.MemoryParts {
		if !present[i] {
			continue
		}
		upper := make([]string, 0, 2*len(pts)+2)
		lower := make([]string, 0, len(pts)+1)
		for j, p := range pts {
			if len(pts) == 1 {
				// A bar one tenth of the plot wide.
				l := float64(chartRight) - float64(chartRight-chartLeft)/10
				upper = append(upper, coord(l)+","+coord(y(below[j]+p.bytes[i])))
				lower = append(lower, coord(l)+","+coord(y(below[j])))
			}
			upper = append(upper, coord(x(p.at))+","+coord(y(below[j]+p.bytes[i])))
			lower = append(lower, coord(x(p.at))+","+coord(y(below[j])))
			below[j] += p.bytes[i]
		}
		for k := len(lower) - 1; k >= 0; k-- {
			upper = append(upper, lower[k])
		}
		color := memoryColors[i%len(memoryColors)]
		if name == analyze.PartUnexplained {
			color = unexplainedColor
		}
		hm.Bands = append(hm.Bands, htmlBand{
			Name: name, Color: color,
			Points: strings.Join(upper, " "),
			Last:   analyze.FormatBytes(pts[len(pts)-1].bytes[i]),
		})
	}
	return hm
}

// Title is a band's tooltip.
func (b htmlBand) Title() string {
	return fmt.Sprintf("%s: %s at the latest breakdown", b.Name, b.Last)
}
