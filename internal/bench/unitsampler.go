package bench

import (
	"crypto/ecdsa"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"
)

// unitSampler times a batch of unitBatch P-256 verifications every
// interval, on a thread of its own, for as long as it runs, so that each
// phase's cost can be read in the unit as the machine gave it during that
// phase. On a shared virtual machine one verification's CPU time moves
// between levels from one second to the next (54–60 µs and 70–75 µs on
// the 2-vCPU machine of 2026-12-05, whatever this machine's other core
// was doing): two measurements, before and after the run, can each catch
// either. A batch costs about 1.2 ms of CPU, so at the default interval
// the sampler takes about half a per cent of one core; its CPU is taken
// out of the phase's process CPU it falls in (attribute). A verification
// allocates, so a batch timed while this process collects may do some of
// the collector's marking (an assist) and read a little high: the
// in-process ceilings' process collects about once a second.
type unitSampler struct {
	every    time.Duration
	stop     chan struct{}
	done     chan error
	stopOnce sync.Once
	err      error

	mu      sync.Mutex
	samples []unitSample
}

// unitSample is one batch: when it ended and its CPU time a verification.
type unitSample struct {
	at  time.Time
	cpu time.Duration
}

// unitSampleEvery is how often the sampler times a batch.
const unitSampleEvery = 250 * time.Millisecond

// startUnitSampler starts sampling every interval until stop.
func startUnitSampler(every time.Duration) (*unitSampler, error) {
	pub, digest, sig, err := unitSignature()
	if err != nil {
		return nil, err
	}
	s := &unitSampler{every: every, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() { s.done <- s.run(pub, digest, sig) }()
	return s, nil
}

func (s *unitSampler) run(pub *ecdsa.PublicKey, digest, sig []byte) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return nil
		case <-t.C:
		}
		c0, err := threadCPU()
		if err != nil {
			return err
		}
		for range unitBatch {
			if !ecdsa.VerifyASN1(pub, digest, sig) {
				return errors.New("verification unit: the signature did not verify")
			}
		}
		c1, err := threadCPU()
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.samples = append(s.samples, unitSample{at: time.Now(), cpu: (c1 - c0) / unitBatch})
		s.mu.Unlock()
	}
}

// Stop ends the sampling and returns the error that ended it early, if
// any. Calls after the first return the same.
func (s *unitSampler) Stop() error {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.err = <-s.done
	})
	return s.err
}

// minPhaseSamples is the fewest batches a phase's own unit is read from;
// a shorter phase is read in the run's unit.
const minPhaseSamples = 20

// between returns the batches timed from from to to, as a unit.
func (s *unitSampler) between(from, to time.Time) verifyUnit {
	s.mu.Lock()
	defer s.mu.Unlock()
	var u verifyUnit
	for _, x := range s.samples {
		if !x.at.Before(from) && !x.at.After(to) {
			u.cpu = append(u.cpu, x.cpu)
		}
	}
	slices.Sort(u.cpu)
	return u
}

// attribute gives r the unit sampled during its phase, when it holds
// enough batches, and takes the sampler's CPU over the phase out of this
// process's CPU (cpu for an in-process ceiling, clientCPU when served).
func (s *unitSampler) attribute(r *result, inProcess bool) {
	if s == nil || r.end.IsZero() {
		return
	}
	u := s.between(r.start, r.end)
	spent := time.Duration(0)
	for _, c := range u.cpu {
		spent += c * unitBatch
	}
	if el := r.end.Sub(r.start).Seconds(); el > 0 {
		if inProcess {
			r.cpu -= spent.Seconds() / el
		} else {
			r.clientCPU -= spent.Seconds() / el
		}
	}
	if len(u.cpu) >= minPhaseSamples {
		r.unit = &u
	}
}

// trimmedMean is the mean of the sorted samples with a tenth left out at
// each end: a phase's cost is an average over the phase, and the unit it
// is read in should be too, where a median picks whichever of the
// machine's levels held most of the phase.
func (u verifyUnit) trimmedMean() time.Duration {
	lo, hi := u.trimmed()
	if hi <= lo {
		return 0
	}
	var sum time.Duration
	for _, c := range u.cpu[lo:hi] {
		sum += c
	}
	return sum / time.Duration(hi-lo)
}

// trimmed is the range of the samples trimmedMean averages.
func (u verifyUnit) trimmed() (lo, hi int) {
	n := len(u.cpu)
	return n / 10, n - n/10
}

// trimmedBounds are the least and the greatest sample trimmedMean
// averages.
func (u verifyUnit) trimmedBounds() (time.Duration, time.Duration) {
	lo, hi := u.trimmed()
	if hi <= lo {
		return 0, 0
	}
	return u.cpu[lo], u.cpu[hi-1]
}
