//go:build goexperiment.simd

package testenv

// simdBuild: this binary was built with GOEXPERIMENT=simd, which the SIMD
// loops (files tagged goexperiment.simd && amd64) need.
var simdBuild = true
