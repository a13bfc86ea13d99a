package config

import (
	"runtime/debug"
	"testing"
)

func TestApplyGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	if !ApplyGCPercent(func(string) string { return "" }) {
		t.Fatal("GOGC unset: the default was not applied")
	}
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Fatalf("GOGC unset: collector target %d, want %d", got, DefaultGCPercent)
	}

	env := map[string]string{"GOGC": "150"}
	if ApplyGCPercent(func(k string) string { return env[k] }) {
		t.Fatal("GOGC=150 in the environment: the default was applied over it")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: collector target changed to %d", got)
	}
}
