package main

import (
	"os"
	"testing"
)

// TestMain lets a test call probe.Launch, which re-executes this test
// binary as run's exec shim.
func TestMain(m *testing.M) {
	runShim()
	os.Exit(m.Run())
}
