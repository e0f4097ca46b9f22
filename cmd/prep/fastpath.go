package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/formats/imgdec"
)

// fastPaths says which of prep's fast code paths this binary runs on this
// machine. The SIMD loops need a build with GOEXPERIMENT=simd and a CPU
// with AVX-512, the libjpeg-turbo and libpng decoders a build with cgo; a
// plain `go install` leaves the first out without a sign, so prep version
// lists them and convert warns.
type fastPaths struct {
	cpu       string // the widest SIMD the CPU offers: "AVX-512", "AVX2" or "none"
	simdBuilt bool   // built with GOEXPERIMENT=simd for amd64
	resampler bool   // the resampler runs its AVX-512 loops
	rgbCopy   bool   // the copy into RGB samples runs its AVX-512 VBMI loop
	decoders  bool   // libjpeg-turbo and libpng are built in (cgo)
}

// detectFastPaths is a variable so that tests can give convert a slow build.
var detectFastPaths = func() fastPaths {
	return fastPaths{
		cpu:       cpuSIMD(),
		simdBuilt: simdBuilt,
		resampler: augment.SIMD(),
		rgbCopy:   convert.RGBSIMD(),
		decoders:  imgdec.TurboAvailable(),
	}
}

// cpuSIMD names the widest SIMD this CPU (and OS) offers, whatever the
// build: AVX-512 means the five features Go's simd/archsimd requires.
func cpuSIMD() string {
	x := cpu.X86
	switch {
	case runtime.GOARCH != "amd64":
		return "none"
	case x.HasAVX512F && x.HasAVX512CD && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL:
		return "AVX-512"
	case x.HasAVX2:
		return "AVX2"
	}
	return "none"
}

// fastPath is one line of prep version: a path and what runs on it.
type fastPath struct{ name, what string }

func (f fastPaths) lines() []fastPath {
	jpeg, png := "libjpeg-turbo, with DCT scaling (cgo)", "libpng (cgo)"
	if !f.decoders {
		jpeg = "image/jpeg, full size only: built without cgo (rebuild: make install)"
		png = "image/png: built without cgo (rebuild: make install)"
	}
	return []fastPath{{"simd", f.simd()}, {"jpeg", jpeg}, {"png", png}}
}

func (f fastPaths) simd() string {
	switch {
	case f.resampler && f.rgbCopy:
		return "AVX-512: resampler, RGB copy (AVX-512 VBMI)"
	case f.resampler:
		return "AVX-512: resampler (RGB copy scalar: this CPU lacks AVX-512 VBMI)"
	case !f.simdBuilt && f.cpu == "AVX-512":
		return "none: built without GOEXPERIMENT=simd, though this CPU has AVX-512 (rebuild: make install)"
	case !f.simdBuilt:
		return fmt.Sprintf("none: built without GOEXPERIMENT=simd; this CPU has %s, and prep's SIMD loops need AVX-512", f.cpu)
	}
	return fmt.Sprintf("none: this CPU has %s, and prep's SIMD loops need AVX-512", f.cpu)
}

// slow lists what this build leaves out that this machine could run.
func (f fastPaths) slow() []string {
	var s []string
	if !f.simdBuilt && f.cpu == "AVX-512" {
		s = append(s, "built without GOEXPERIMENT=simd, the resampler runs its scalar loops on this AVX-512 CPU")
	}
	if !f.decoders {
		s = append(s, "built without cgo, JPEG and PNG decode with Go's slower decoders")
	}
	return s
}

// warnSlowBuild tells, once at the start of a convert, that the binary
// is slower than this machine allows, and the fix.
func warnSlowBuild(w io.Writer) {
	if s := detectFastPaths().slow(); len(s) > 0 {
		fmt.Fprintf(w, "prep: warning: slow build: %s; rebuild with `make install` (see prep version)\n", strings.Join(s, "; "))
	}
}
