//go:build goexperiment.simd && amd64

package main

// simdBuilt: the SIMD loops (augment/resample_simd.go, convert/rgb_simd.go)
// are compiled in; they run where the CPU has AVX2 or AVX-512.
const simdBuilt = true
