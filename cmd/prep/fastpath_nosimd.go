//go:build !(goexperiment.simd && amd64)

package main

// simdBuilt: built without GOEXPERIMENT=simd, or for another architecture
// than amd64 (arm64 included), so only the scalar loops are compiled in.
const simdBuilt = false
