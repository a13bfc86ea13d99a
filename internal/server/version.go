package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pactledger/pactledger/internal/buildinfo"
)

// CheckedBy is what every verifier record names as its checker:
// "pactledger <version>".
func CheckedBy() string { return "pactledger " + buildinfo.Read().String() }

// newBuildInfoGauge is pactledger_build_info: 1, labelled with the build.
func newBuildInfoGauge() prometheus.Collector {
	b := buildinfo.Read()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "pactledger_build_info", Help: "The running ledgerd's build: module version, VCS revision and Go version (always 1)."},
		[]string{"version", "revision", "goversion"})
	g.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	return g
}
