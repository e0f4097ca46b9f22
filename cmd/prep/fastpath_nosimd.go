//go:build !(goexperiment.simd && amd64)

package main

// simdBuilt: built without GOEXPERIMENT=simd (or not for amd64), so only
// the scalar loops are compiled in.
const simdBuilt = false
