//go:build !(goexperiment.simd && amd64)

package pcm

// Without GOEXPERIMENT=simd, or on another architecture than amd64
// (arm64 included), the resampler's dot products run dotScalar8 only.

const cpuDot = dotScalar

// cpuHasDot reports whether this build and CPU run the loop of path p.
func cpuHasDot(p dotPath) bool { return p == dotScalar }

func dot(taps, x []float32) float32 { return dotScalar8(taps, x) }
