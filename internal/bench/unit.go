package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// verifyUnit is the time of one P-256 ECDSA verification on this machine,
// measured in the same run as the figures expressed in it: CPU per row
// divided by it gives a cost that survives a change of machine.
type verifyUnit struct {
	samples []time.Duration
}

// measureVerification times n P-256 ECDSA verifications (a SHA-256 digest,
// an ASN.1 signature) one by one after a warm-up and keeps every time.
func measureVerification(n int) (verifyUnit, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return verifyUnit{}, fmt.Errorf("verification unit: %w", err)
	}
	digest := sha256.Sum256([]byte("pactledger verification unit"))
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
	if err != nil {
		return verifyUnit{}, fmt.Errorf("verification unit: %w", err)
	}
	for range n / 10 {
		ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig)
	}
	u := verifyUnit{samples: make([]time.Duration, 0, n)}
	for range n {
		t0 := time.Now()
		ok := ecdsa.VerifyASN1(&key.PublicKey, digest[:], sig)
		u.samples = append(u.samples, time.Since(t0))
		if !ok {
			return verifyUnit{}, errors.New("verification unit: the signature did not verify")
		}
	}
	slices.Sort(u.samples)
	return u, nil
}

// merge returns the unit measured over both runs' samples.
func (u verifyUnit) merge(o verifyUnit) verifyUnit {
	s := slices.Concat(u.samples, o.samples)
	slices.Sort(s)
	return verifyUnit{samples: s}
}

// q is the q-th percentile of the samples.
func (u verifyUnit) q(q float64) time.Duration {
	if len(u.samples) == 0 {
		return 0
	}
	return u.samples[int(float64(len(u.samples)-1)*q/100)]
}

// median is the unit.
func (u verifyUnit) median() time.Duration { return u.q(50) }

// units expresses CPU seconds per row in verifications.
func (u verifyUnit) units(cpuPerRow float64) float64 {
	if m := u.median(); m > 0 {
		return cpuPerRow / m.Seconds()
	}
	return 0
}

func (u verifyUnit) String() string {
	return fmt.Sprintf("median %s (p10 %s, p90 %s, %d timed)", us(u.median()), us(u.q(10)), us(u.q(90)), len(u.samples))
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
