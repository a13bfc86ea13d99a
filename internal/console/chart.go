package console

import (
	"net/url"
	"strconv"
	"strings"

	ledgerv1 "github.com/pactledger/pactledger/proto/pactledger/ledger/v1"
)

// scoreChart is the monthly drill scores over time, drawn as inline SVG on
// the server: one point per report, oldest on the left, evenly spaced, the
// score (pulls passed of pulls run) as a percentage up the side.
type scoreChart struct {
	Width, Height float64
	Left, Bottom  float64 // plot area origin (bottom-left)
	Top, Right    float64
	Points        string // the polyline
	Dots          []scoreDot
	Grid          []gridLine
}

type scoreDot struct {
	X, Y    float64
	ID      string
	Label   string // date, for the axis
	Score   string // "29/30"
	Perfect bool
	ShowX   bool // label this dot on the axis
}

type gridLine struct {
	Y     float64
	Label string
}

// maxChartPoints is how many reports the chart shows (the newest).
const maxChartPoints = 24

// newScoreChart charts monthly reports given newest first.
func newScoreChart(newestFirst []*ledgerv1.DrillReport) scoreChart {
	c := scoreChart{Width: 640, Height: 220, Left: 44, Bottom: 190, Top: 14, Right: 624}
	reps := newestFirst
	if len(reps) > maxChartPoints {
		reps = reps[:maxChartPoints]
	}
	for pct := 0; pct <= 100; pct += 25 {
		c.Grid = append(c.Grid, gridLine{Y: c.y(float64(pct)), Label: strconv.Itoa(pct) + "%"})
	}
	n := len(reps)
	every := max(1, n/6) // at most about six axis labels
	var pts []string
	for i := range n {
		rep := reps[n-1-i] // oldest first
		score := 0.0
		if t := rep.GetChecksTotal(); t > 0 {
			score = float64(rep.GetChecksPassed()) * 100 / float64(t)
		}
		x := c.Left + 20
		if n > 1 {
			x = c.Left + 20 + float64(i)*(c.Right-c.Left-40)/float64(n-1)
		}
		d := scoreDot{X: round1(x), Y: round1(c.y(score)), ID: rep.GetId(), Label: pbStamp(rep.GetStartedAt()).Date,
			Score:   strconv.Itoa(int(rep.GetChecksPassed())) + "/" + strconv.Itoa(int(rep.GetChecksTotal())),
			Perfect: rep.GetChecksTotal() > 0 && rep.GetChecksPassed() == rep.GetChecksTotal(),
			ShowX:   (n-1-i)%every == 0}
		c.Dots = append(c.Dots, d)
		pts = append(pts, ftoa(d.X)+","+ftoa(d.Y))
	}
	c.Points = strings.Join(pts, " ")
	return c
}

// y maps a percentage to the plot's y coordinate.
func (c scoreChart) y(pct float64) float64 { return c.Bottom - pct*(c.Bottom-c.Top)/100 }

func round1(f float64) float64 { return float64(int(f*10+0.5)) / 10 }

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func urlQuery(s string) string { return url.QueryEscape(s) }
