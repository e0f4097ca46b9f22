package convert

// rgbPath names the loop that copies pixels into RGB samples: the scalar
// one in rgbInto, or a SIMD one of rgb_simd.go. Every path gives the same
// bytes (TestRGBTensor).
type rgbPath uint8

const (
	rgbScalar rgbPath = iota
	rgbAVX2
	rgbVBMI // AVX-512 VBMI
)

// rgbPaths lists the paths, slowest first.
var rgbPaths = []rgbPath{rgbScalar, rgbAVX2, rgbVBMI}

func (p rgbPath) String() string {
	switch p {
	case rgbAVX2:
		return "AVX2"
	case rgbVBMI:
		return "AVX-512 VBMI"
	}
	return "scalar"
}

// RGBSIMD names the loop that copies pixels into RGB samples on this CPU:
// "AVX-512 VBMI" or "AVX2" where the binary was built with
// GOEXPERIMENT=simd for amd64 and the CPU has them, else "scalar".
func RGBSIMD() string { return cpuRGB.String() }

// useRGB selects the loop that runs: cpuRGB, the fastest this CPU has
// (rgb_simd.go, rgb_nosimd.go); tests set it to compare them. It is
// process-wide for usePath's reasons (augment/resample.go): the paths
// write the same bytes, and only tests write it.
var useRGB = cpuRGB
