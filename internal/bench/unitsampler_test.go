package bench

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// The sampler times batches while it runs; a phase gets the batches timed
// during it as its unit, and this process's CPU over the phase loses what
// the sampler spent. A phase with too few batches keeps the run's unit.
func TestUnitSamplerAttributesBatchesToThePhase(t *testing.T) {
	s, err := startUnitSampler(2 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for len(s.between(start, time.Now()).cpu) < minPhaseSamples+5 {
		if time.Now().After(deadline) {
			t.Fatal("the sampler timed too few batches in 30 s")
		}
		runtime.Gosched()
	}
	end := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("a second Stop: %v", err)
	}

	ceiling := &result{ok: 1000, elapsed: end.Sub(start), cpu: 1.5, start: start, end: end}
	s.attribute(ceiling, true)
	if ceiling.unit == nil || len(ceiling.unit.cpu) < minPhaseSamples {
		t.Fatalf("the phase's unit: %+v", ceiling.unit)
	}
	spent := time.Duration(0)
	for _, c := range ceiling.unit.cpu {
		spent += c * unitBatch
	}
	want := 1.5 - spent.Seconds()/end.Sub(start).Seconds()
	if ceiling.cpu != want || ceiling.cpu >= 1.5 {
		t.Errorf("the ceiling's CPU after the sampler's is taken out: %v cores, want %v", ceiling.cpu, want)
	}
	if v := ceiling.perVerification(verifyUnit{}); v != ceiling.unit.trimmedMean() || v <= 0 {
		t.Errorf("the phase is read in %v, want its own unit's mean %v", v, ceiling.unit.trimmedMean())
	}
	if said := ceiling.unitSaid(verifyUnit{}); !strings.Contains(said, "during the phase") {
		t.Errorf("the phase's unit said as %q", said)
	}

	served := &result{ok: 1000, elapsed: end.Sub(start), cpu: 1.2, clientCPU: 0.4, start: start, end: end}
	s.attribute(served, false)
	if served.cpu != 1.2 || served.clientCPU >= 0.4 {
		t.Errorf("served: ledgerd %v cores (want 1.2, not this process), the load generator %v (want less than 0.4)", served.cpu, served.clientCPU)
	}

	run := verifyUnit{cpu: []time.Duration{60 * time.Microsecond}}
	before := &result{ok: 1000, elapsed: time.Second, cpu: 1, start: start.Add(-time.Hour), end: start.Add(-time.Minute)}
	s.attribute(before, true)
	if before.unit != nil || before.cpu != 1 || before.perVerification(run) != 60*time.Microsecond {
		t.Errorf("a phase the sampler did not run in: unit %v, %v cores, read in %v", before.unit, before.cpu, before.perVerification(run))
	}
	// 1 ms of CPU a row in the run's unit of 60 µs.
	if u := before.units(run); u < 16.66 || u > 16.67 {
		t.Errorf("units in the run's unit: %.3f, want 16.67", u)
	}
}

// A phase's unit is the mean of its batches between the 10th and 90th
// percentiles: it follows a machine whose verifications moved between
// two levels during the phase, where the median picks one of them.
func TestTrimmedMean(t *testing.T) {
	var u verifyUnit
	for i := range 20 {
		c := 55 * time.Microsecond
		if i >= 11 {
			c = 72 * time.Microsecond
		}
		u.cpu = append(u.cpu, c)
	}
	u.cpu[0], u.cpu[19] = time.Microsecond, time.Second // outliers, dropped
	if got, want := u.trimmedMean(), (9*55+7*72)*time.Microsecond/16; got != want {
		t.Errorf("trimmed mean %v, want %v", got, want)
	}
	if lo, hi := u.trimmedBounds(); lo != 55*time.Microsecond || hi != 72*time.Microsecond {
		t.Errorf("the trimmed samples run from %v to %v, want 55µs to 72µs", lo, hi)
	}
	if (verifyUnit{}).trimmedMean() != 0 {
		t.Error("the trimmed mean of nothing is not 0")
	}
}
