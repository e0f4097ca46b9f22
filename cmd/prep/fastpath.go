package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/cpu"

	"github.com/prep-dev/prep/augment"
	"github.com/prep-dev/prep/convert"
	"github.com/prep-dev/prep/media/audiodec"
	"github.com/prep-dev/prep/media/imgdec"
)

// fastPaths says which of prep's fast code paths this binary runs on this
// machine. The SIMD loops need a build with GOEXPERIMENT=simd for amd64
// and a CPU with AVX2 or AVX-512, the libjpeg-turbo and libpng decoders a
// build with cgo; a plain `go install` leaves the first out without a
// sign, so prep version lists them and convert warns.
type fastPaths struct {
	arch      string // runtime.GOARCH: the SIMD loops are amd64's
	cpu       string // the widest SIMD the CPU offers: "AVX-512", "AVX2" or "none"
	simdBuilt bool   // built with GOEXPERIMENT=simd for amd64
	resampler string // the resampler's loops: "AVX-512", "AVX2" or "scalar"
	rgbCopy   string // the copy into RGB samples: "AVX-512 VBMI", "AVX2" or "scalar"
	godebug   string // the cpu.* settings of GODEBUG (cpu.avx512f=off), which turn paths off
	decoders  bool   // libjpeg-turbo, libpng, libFLAC, libmpg123 and libopusfile are built in (cgo)
}

// detectFastPaths is a variable so that tests can give convert a slow build.
var detectFastPaths = func() fastPaths {
	return fastPaths{
		arch:      runtime.GOARCH,
		cpu:       cpuSIMD(),
		simdBuilt: simdBuilt,
		resampler: augment.SIMD(),
		rgbCopy:   convert.RGBSIMD(),
		godebug:   cpuGODEBUG(),
		decoders:  imgdec.TurboAvailable() && audiodec.LibFLACAvailable() && audiodec.MPG123Available(),
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
	jpeg, png, flac := "libjpeg-turbo, with DCT scaling (cgo)", "libpng, 8-bit RGB/RGBA/grey inflated by libdeflate (cgo)", "libFLAC (cgo)"
	mp3, opus := "libmpg123, gapless (cgo)", "libopusfile (cgo)"
	if imgdec.PNGSIMD() {
		png += "; Paeth rows in SSE4.1"
	}
	if own, why := imgdec.OwnEntropy(); own {
		jpeg += "; prep's entropy decoders"
	} else if f.decoders {
		jpeg += "; prep's entropy decoders " + why
	}
	if !f.decoders {
		jpeg = "image/jpeg, full size only: built without cgo (rebuild: make install)"
		png = "image/png: built without cgo (rebuild: make install)"
		flac = "github.com/mewkiz/flac, 2x the CPU: built without cgo (rebuild: make install)"
		mp3 = "ffmpeg, a process per file: built without cgo (rebuild: make install)"
		opus = mp3
	}
	heif, jxl := imgdec.HEIFDecoder(), imgdec.JXLDecoder()
	if imgdec.Isolated() && f.decoders {
		heif += "; in child processes (a crash refuses one file)"
		jxl += "; in child processes (a crash refuses one file)"
	}
	return []fastPath{{"simd", f.simd()}, {"jpeg", jpeg}, {"png", png}, {"webp", imgdec.WebPDecoder()},
		{"heif", heif}, {"jxl", jxl},
		{"other", imgdec.OtherFormats}, {"flac", flac}, {"mp3", mp3}, {"opus", opus}}
}

// simd is the line for the SIMD loops: the path that runs (AVX-512, AVX2
// or scalar), on what, and why not a faster one.
func (f fastPaths) simd() string {
	// The cpu.* settings of GODEBUG turn features off for Go and for
	// golang.org/x/sys/cpu alike: then they, not the CPU, may be why.
	lacks := func(isa string) string {
		if f.godebug != "" {
			return "GODEBUG=" + f.godebug
		}
		return "this CPU lacks " + isa
	}
	switch {
	case f.arch != "amd64":
		return "scalar: prep's SIMD loops are for amd64 (AVX2, AVX-512); this is " + f.arch
	case !f.simdBuilt && f.cpu != "none":
		return fmt.Sprintf("scalar: built without GOEXPERIMENT=simd, though this CPU has %s (rebuild: make install)", f.cpu)
	case f.resampler == "scalar":
		return "scalar: " + lacks("AVX2 and AVX-512")
	case f.resampler == "AVX2":
		return "AVX2: resampler, RGB copy (" + lacks("AVX-512") + ")"
	case f.rgbCopy == "AVX-512 VBMI":
		return "AVX-512: resampler, RGB copy (AVX-512 VBMI)"
	}
	return fmt.Sprintf("AVX-512: resampler; %s: RGB copy (this CPU lacks AVX-512 VBMI)", f.rgbCopy)
}

// cpuGODEBUG returns the cpu.* settings of $GODEBUG, such as
// cpu.avx512f=off, which turn SIMD paths off.
func cpuGODEBUG() string {
	var opts []string
	for o := range strings.SplitSeq(os.Getenv("GODEBUG"), ",") {
		if strings.HasPrefix(o, "cpu.") {
			opts = append(opts, o)
		}
	}
	return strings.Join(opts, ",")
}

// slow lists what this build leaves out that this machine could run.
func (f fastPaths) slow() []string {
	var s []string
	if !f.simdBuilt && f.arch == "amd64" && f.cpu != "none" {
		s = append(s, "built without GOEXPERIMENT=simd, the resampler runs its scalar loops on this "+f.cpu+" CPU")
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
