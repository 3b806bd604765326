package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate guards against hand edits of, or a forgotten go generate for, the
// committed assembly: the file must be exactly what generate produces.
func TestGeneratedUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../sgemm_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, generate()) {
		t.Fatal("sgemm_amd64.s is stale: run go generate ./backends/cpu/gemm")
	}
	got, err = os.ReadFile("../../int8_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, generateInt8()) {
		t.Fatal("int8_amd64.s is stale: run go generate ./backends/cpu/gemm")
	}
}
