package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// verifyUnit is the CPU time of one P-256 ECDSA verification on this
// machine, measured in the same run as the figures expressed in it: CPU
// per row divided by it gives a cost that survives a change of machine.
// It is thread CPU time, like the process CPU it divides, so other work
// on a shared machine does not inflate it the way it inflates a
// wall-clock time (kept beside it for reference).
type verifyUnit struct {
	cpu  []time.Duration // per verification, from each batch's thread CPU time
	wall []time.Duration // each verification's wall-clock time
}

// unitBatch is how many verifications share one thread CPU reading.
const unitBatch = 20

// measureVerification times n P-256 ECDSA verifications (a SHA-256
// digest, an ASN.1 signature) after a warm-up: each one's wall-clock time,
// and the thread CPU time of each batch of unitBatch.
func measureVerification(n int) (verifyUnit, error) {
	pub, digest, sig, err := unitSignature()
	if err != nil {
		return verifyUnit{}, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for range n / 10 {
		ecdsa.VerifyASN1(pub, digest, sig)
	}
	u := verifyUnit{wall: make([]time.Duration, 0, n)}
	for b := 0; b < n; b += unitBatch {
		c0, err := threadCPU()
		if err != nil {
			return verifyUnit{}, err
		}
		for range unitBatch {
			t0 := time.Now()
			ok := ecdsa.VerifyASN1(pub, digest, sig)
			u.wall = append(u.wall, time.Since(t0))
			if !ok {
				return verifyUnit{}, errors.New("verification unit: the signature did not verify")
			}
		}
		c1, err := threadCPU()
		if err != nil {
			return verifyUnit{}, err
		}
		u.cpu = append(u.cpu, (c1-c0)/unitBatch)
	}
	slices.Sort(u.cpu)
	slices.Sort(u.wall)
	return u, nil
}

// unitSignature is what the unit verifies: a new P-256 key's public
// half, a SHA-256 digest and the key's ASN.1 signature of it.
func unitSignature() (pub *ecdsa.PublicKey, digest, sig []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("verification unit: %w", err)
	}
	d := sha256.Sum256([]byte("pactledger verification unit"))
	if sig, err = ecdsa.SignASN1(rand.Reader, key, d[:]); err != nil {
		return nil, nil, nil, fmt.Errorf("verification unit: %w", err)
	}
	return &key.PublicKey, d[:], sig, nil
}

// threadCPU is the calling thread's CPU time.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, fmt.Errorf("verification unit: thread CPU clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// merge returns the unit measured over both runs' samples.
func (u verifyUnit) merge(o verifyUnit) verifyUnit {
	m := verifyUnit{cpu: slices.Concat(u.cpu, o.cpu), wall: slices.Concat(u.wall, o.wall)}
	slices.Sort(m.cpu)
	slices.Sort(m.wall)
	return m
}

// quantile is the q-th percentile of sorted samples.
func quantile(samples []time.Duration, q float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	return samples[int(float64(len(samples)-1)*q/100)]
}

// median is the unit: the median CPU time of one verification.
func (u verifyUnit) median() time.Duration { return quantile(u.cpu, 50) }

// units expresses CPU seconds per row in verifications.
func (u verifyUnit) units(cpuPerRow float64) float64 {
	if m := u.median(); m > 0 {
		return cpuPerRow / m.Seconds()
	}
	return 0
}

func (u verifyUnit) String() string {
	return fmt.Sprintf("CPU time median %s (p10 %s, p90 %s, %d batches of %d); wall-clock median %s (p90 %s)",
		us(u.median()), us(quantile(u.cpu, 10)), us(quantile(u.cpu, 90)), len(u.cpu), unitBatch, us(quantile(u.wall, 50)), us(quantile(u.wall, 90)))
}

func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }

// loadAvg is the machine's 1-minute load average, from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
