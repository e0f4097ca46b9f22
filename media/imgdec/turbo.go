//go:build cgo

package imgdec

/*
// Linked statically (libjpeg62-turbo-dev ships libjpeg.a) so the binary runs
// where libjpeg.so.62 is missing, e.g. Ubuntu hosts, which ship libjpeg.so.8.
#cgo LDFLAGS: -l:libjpeg.a
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
// prep's own entropy decoders (phuff.h, shuff.h) reach into libjpeg-turbo
// through jpegint.h, which upstream never installs (Debian does) and whose
// structs change between versions (3.0 moved coef_arrays). They are built
// only where the header is there and the version is one whose layout the
// tests cover, and not under the noprepentropy build tag; elsewhere
// libjpeg-turbo decodes on its own, with the same pixels, a little slower.
// JPEG_INTERNALS must come before any libjpeg header: jpeglib.h lays out
// its structs by it.
#if !defined(PREP_NO_ENTROPY) && defined(__has_include)
#if __has_include(<jpegint.h>)
#define JPEG_INTERNALS
#define PREP_HAVE_JPEGINT 1
#endif
#endif
#include <jpeglib.h>
#include <jerror.h>
#if defined(PREP_HAVE_JPEGINT) && defined(LIBJPEG_TURBO_VERSION_NUMBER) && \
	LIBJPEG_TURBO_VERSION_NUMBER >= 2001000 && LIBJPEG_TURBO_VERSION_NUMBER < 2002000
#define PREP_ENTROPY 1
#include "phuff.h"
#include "shuff.h"
#else
#define PREP_ENTROPY 0
static unsigned long prep_phuff_count(void) { return 0; }
static unsigned long prep_seq_count(void) { return 0; }
static int prep_set_pdep(int on) { (void)on; return 0; }
static int prep_fast_pdep(void) { return 0; }
#endif

// prep_entropy_why says which entropy decoders this build runs.
static const char *prep_entropy_why(void) {
#if PREP_ENTROPY
	return "";
#elif defined(PREP_NO_ENTROPY)
	return "off (noprepentropy build tag)";
#elif !defined(PREP_HAVE_JPEGINT)
	return "off (no jpegint.h: this libjpeg-turbo does not install it)";
#else
	return "off (a libjpeg-turbo whose internal layout prep's tests do not cover: 2.1.x only)";
#endif
}

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// prep_tune_malloc keeps libjpeg's large buffers (a progressive JPEG's
// whole-image coefficients: 31 MB for a 4000x2600 photo) on the heap
// rather than in fresh pages per image, which the kernel faults in and
// zeroes: page faults were a sixth of a real-photo run's CPU
// (docs/PERFORMANCE.md). Blocks above glibc's 128 KiB threshold were
// mmap'd and unmapped on free; with a higher threshold they went to the
// per-thread arenas, whose 64 MiB heaps glibc unmaps as soon as they are
// empty, so all threads share the main heap. A constructor, because a
// thread that has malloc'd keeps its arena: Go's init runs too late.
__attribute__((constructor)) static void prep_tune_malloc(void) {
#if defined(__GLIBC__)
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_ARENA_MAX, 1);
#endif
}

enum { prep_ok = 0, prep_fail = 1, prep_truncated = 3, prep_cmyk = 4, prep_cmyk_inverted = 5, prep_retry = 6 };

struct prep_err {
	struct jpeg_error_mgr pub;
	jmp_buf jump;
	int truncated;
	char msg[JMSG_LENGTH_MAX];
	char *warn; // the first warning, for the caller
	int warnlen;
	// The components whose AC scans come without their data (dropACScans):
	// the warnings of those scans are expected.
	const unsigned char *empty_ac;
	int n_empty_ac;
	// own_active is set once prep's entropy decoder (phuff.h, shuff.h) has
	// taken over; retry, when a warning or error came after that.
	int own_active, retry;
};

// prep_in_empty_scan reports whether c is reading an AC scan that
// dropACScans emptied.
static int prep_in_empty_scan(j_common_ptr c, struct prep_err *e) {
	if (e->n_empty_ac == 0 || c->is_decompressor == FALSE) {
		return 0;
	}
	j_decompress_ptr d = (j_decompress_ptr)c;
	if (d->comps_in_scan != 1 || d->Ss == 0 || d->cur_comp_info[0] == NULL) {
		return 0;
	}
	for (int i = 0; i < e->n_empty_ac; i++) {
		if (d->cur_comp_info[0]->component_id == e->empty_ac[i]) {
			return 1;
		}
	}
	return 0;
}

// prep_give_up ends a decode by prep's entropy decoders at the first sign
// of damage, for libjpeg's own decoder to do it again from the start:
// prep's match libjpeg's on well-formed streams, and a damaged one (rare)
// then gets libjpeg's pixels, warning and error exactly.
static void prep_give_up(struct prep_err *e) {
	if (e->own_active) {
		e->retry = 1;
		longjmp(e->jump, 1);
	}
}

static void prep_error_exit(j_common_ptr c) {
	struct prep_err *e = (struct prep_err *)c->err;
	prep_give_up(e);
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jump, 1);
}

// Warnings are about corrupt data the library worked around (Pillow ignores
// them too); the first is kept for the caller. Only the end of data arriving
// early is fatal, the way Pillow refuses truncated files.
static void prep_emit_message(j_common_ptr c, int level) {
	struct prep_err *e = (struct prep_err *)c->err;
	if (level >= 0) {
		return; // trace messages
	}
	if (c->err->msg_code == JWRN_JPEG_EOF) {
		e->truncated = 1;
		prep_error_exit(c);
	}
	if (prep_in_empty_scan(c, e)) {
		return;
	}
	prep_give_up(e);
	if (e->warn[0] == 0) {
		char buf[JMSG_LENGTH_MAX];
		(*c->err->format_message)(c, buf);
		snprintf(e->warn, e->warnlen, "%s", buf);
	}
}

// prep_dc_only writes to ids (MAX_COMPONENTS bytes) the IDs of the
// components of a progressive JPEG whose inverse DCT at scale num/8 is
// 1×1, so that the decode reads only their DC coefficients, and returns
// how many; 0 for a sequential JPEG or one whose header libjpeg refuses
// (prep_decode then reports why).
static int prep_dc_only(const unsigned char *data, unsigned long size, int num, unsigned char *ids) {
	struct jpeg_decompress_struct d;
	struct prep_err e;
	char warn[1];
	d.err = jpeg_std_error(&e.pub);
	e.pub.error_exit = prep_error_exit;
	e.pub.emit_message = prep_emit_message;
	e.warn = warn;
	e.warnlen = sizeof warn;
	e.n_empty_ac = 0;
	warn[0] = 0;
	if (setjmp(e.jump)) {
		jpeg_destroy_decompress(&d);
		return 0;
	}
	jpeg_create_decompress(&d);
	jpeg_mem_src(&d, data, size);
	jpeg_read_header(&d, TRUE);
	int n = 0;
	// libjpeg's own decoder warns at a dropped scan's missing restart
	// markers; prep's (phuff.h) expects them gone.
	if (d.progressive_mode && (PREP_ENTROPY || d.restart_interval == 0)) {
		d.scale_num = num;
		d.scale_denom = 8;
		jpeg_calc_output_dimensions(&d);
		for (int ci = 0; ci < d.num_components && ci < MAX_COMPONENTS; ci++) {
			if (d.comp_info[ci].DCT_scaled_size == 1) {
				ids[n++] = (unsigned char)d.comp_info[ci].component_id;
			}
		}
	}
	jpeg_destroy_decompress(&d);
	return n;
}

#if PREP_ENTROPY
// prep_progress installs prep's entropy decoder (phuff.h, shuff.h) into a
// JPEG of several scans at the one point libjpeg's API offers between
// choosing its modules and reading the first scan's data: the progress
// monitor's first call. (A single-scan JPEG gets it after
// jpeg_start_decompress, which reads no data for one.)
struct prep_progress {
	struct jpeg_progress_mgr pub;
	int called;
};

// prep_install puts prep's entropy decoder in, and prep_consume in place
// of consume_data when libjpeg reads the scans through it: always for a
// progressive JPEG (whose decoder only prep_consume calls), for a
// sequential one when it has several scans.
static void prep_install(j_decompress_ptr d) {
	if (d->arith_code) {
		return;
	}
	int consume = prep_can_consume(d);
	if (d->progressive_mode) {
		if (!consume) {
			return; // not the case with libjpeg-turbo 2.1
		}
		prep_phuff_install(d);
	} else {
		prep_seq_install(d);
	}
	if (consume) {
		prep_use_consume(d);
	}
	((struct prep_err *)d->err)->own_active = 1;
}

static void prep_progress_monitor(j_common_ptr c) {
	struct prep_progress *p = (struct prep_progress *)c->progress;
	if (!p->called && c->global_state == DSTATE_PRELOAD) {
		prep_install((j_decompress_ptr)c);
	}
	p->called = 1;
}

#endif

// prep_decode decodes a JPEG scaled by num/8 straight into RGBA rows of
// stride bytes in out, which must hold exactly want_w × want_h pixels.
// empty_ac lists n_empty_ac components whose AC scans dropACScans emptied.
// With own 1 its scans are decoded by prep's entropy decoders (phuff.h,
// shuff.h), and the first warning or error after that returns prep_retry.
static int prep_decode(const unsigned char *data, unsigned long size, int num, int own,
		const unsigned char *empty_ac, int n_empty_ac,
		unsigned char *out, int stride, int want_w, int want_h, char *msg, char *warn, int msglen) {
	struct jpeg_decompress_struct d;
	struct prep_err e;
	d.err = jpeg_std_error(&e.pub);
	e.pub.error_exit = prep_error_exit;
	e.pub.emit_message = prep_emit_message;
	e.truncated = 0;
	e.msg[0] = 0;
	e.warn = warn;
	e.warnlen = msglen;
	e.empty_ac = empty_ac;
	e.n_empty_ac = n_empty_ac;
	e.own_active = 0;
	e.retry = 0;
	warn[0] = 0;
	if (setjmp(e.jump)) {
		jpeg_destroy_decompress(&d);
		if (e.retry) {
			return prep_retry;
		}
		snprintf(msg, msglen, "%s", e.msg);
		return e.truncated ? prep_truncated : prep_fail;
	}
	jpeg_create_decompress(&d);
	jpeg_mem_src(&d, data, size);
	jpeg_read_header(&d, TRUE);
	// libjpeg has no CMYK → RGB conversion: CMYK and YCCK come out as CMYK
	// (4 bytes a pixel, like RGBA), which the caller converts. Adobe's
	// files store ink inverted (255 = none), as Pillow's "CMYK;I" assumes.
	int ok = prep_ok;
	if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK) {
		d.out_color_space = JCS_CMYK;
		ok = d.saw_Adobe_marker ? prep_cmyk_inverted : prep_cmyk;
	} else {
		d.out_color_space = JCS_EXT_RGBA;
	}
	d.scale_num = num;
	d.scale_denom = 8;
	d.dct_method = JDCT_ISLOW; // exact and deterministic; Pillow's default too
#if PREP_ENTROPY
	struct prep_progress progress;
	memset(&progress, 0, sizeof progress);
	progress.pub.progress_monitor = prep_progress_monitor;
	if (own) {
		d.progress = &progress.pub;
	}
	jpeg_start_decompress(&d);
	if (own && !d.inputctl->has_multiple_scans) {
		prep_install(&d);
	}
#else
	(void)own;
	jpeg_start_decompress(&d);
#endif
	if ((int)d.output_width != want_w || (int)d.output_height != want_h) {
		snprintf(msg, msglen, "libjpeg output %ux%u, expected %dx%d",
			d.output_width, d.output_height, want_w, want_h);
		jpeg_destroy_decompress(&d);
		return prep_fail;
	}
	JSAMPROW rows[16];
	while (d.output_scanline < d.output_height) {
		int n = 0;
		for (; n < 16 && d.output_scanline + n < d.output_height; n++) {
			rows[n] = out + (size_t)(d.output_scanline + n) * stride;
		}
		jpeg_read_scanlines(&d, rows, n);
	}
#if PREP_ENTROPY
	if (e.own_active) {
		prep_entropy_finish(&d);
	}
#endif
	jpeg_finish_decompress(&d);
	jpeg_destroy_decompress(&d);
	return ok;
}

*/
import "C"

import (
	"fmt"
	"image"
	"sync"
	"sync/atomic"
	"unsafe"
)

const turboBuiltIn = true

// simdScales are the DCT scales M/8 below full size that libjpeg-turbo
// decodes with SIMD inverse DCTs; scaleFor picks only among them.
var simdScales = [...]int{1, 2, 4}

// scaleFor picks the DCT scale M/8 for a w×h JPEG that is to be resized to
// a shorter side of minSide: the smallest M of 1, 2 and 4 whose shorter side
// ⌈short·M/8⌉ is at least gap × minSide, else 8 (full size, also when
// minSide is 0). With gap ≤ 0 the rule is the default one: gap 1.25 for
// M = 1, 1.5 for M = 2 and 1 for M = 4.
//
// Why, measured on the test photos (TestScaledMatchesFull, BenchmarkRatio)
// and on the 285 JPEGs of scripts/benchphotos.py (docs/PERFORMANCE.md):
//   - at M/8 libjpeg-turbo keeps the M lowest of each 8×8 block's 8
//     frequencies per axis, a good lowpass at M = 4, so the resize after
//     it gets no margin, like Pillow's draft: 40.4–55 dB PSNR against a
//     full decode and the same resize on the test photos, though fine
//     detail landing near the target went down to 34.8 dB on bench ones.
//   - with M ≤ 2 the blocks show (M = 1 keeps only their means: a box
//     filter): landing on the target gave 37.3–39.6 dB; leaving the resize
//     1.5× to average over brings those cases to 44+ dB.
//     M = 1 asks less, 1.25×: on the bench JPEGs (resize=256 against a
//     full libjpeg decode and the same resize) the photos that then
//     drop from 2/8 to 1/8 stay at 43.7–47.7 dB, the set's PSNR 1st
//     percentile and minimum stay 40.2 and 38.4 dB (5th: 46.5 → 45.5),
//     and a convert's CPU time went down 4% (0.96×, 5 alternate runs):
//     a progressive JPEG at 1/8 reads only its DC scans (dcScans), a
//     fifth of the data. At 1× (Pillow draft's rule) that was 0.87×, but
//     landing on the target gave 37.3 dB on the test photos.
//   - only 8/8, 4/8, 2/8 and 1/8 have SIMD inverse DCTs; 3/8, 5/8, 6/8 and
//     7/8 run libjpeg's C ones (for 4:2:0 chroma, 6×6, 10×10, 12×12 too).
//     Decode + resize=256,crop=224 of the bench JPEGs, per image (thread
//     CPU, least of 5 runs): 3/8 cost 1.04× 4/8, 6/8 1.13× 8/8, and 5/8
//     0.98× 8/8 though it has 39% of the pixels, since Huffman decoding,
//     the same at any scale, dominates. Dropping those scales (the rule
//     used M = 1..6) took that stage to 0.99× its CPU, and the PSNR against
//     a full image/jpeg decode at resize=256 from 41.7 to 42.7 dB (5th
//     percentile) and 50.4 to 51.5 (median); prep convert's CPU time over
//     them stayed within the noise (1.011×, 95% interval 0.990–1.031).
//   - the resize maps the stored image's exact region of the scaled grid
//     (Info.Region, augment.Source), since libjpeg rounds scaled sizes up.
func scaleFor(w, h, minSide int, gap float64) int {
	if minSide <= 0 {
		return 8
	}
	short := min(w, h)
	for _, m := range simdScales {
		g := gap
		switch {
		case g > 0:
		case m >= 4:
			g = 1
		case m == 2:
			g = 1.5
		default:
			g = 1.25
		}
		if float64(scaledSize(short, m)) >= g*float64(minSide) {
			return m
		}
	}
	return 8
}

// scanPool holds the buffers dcScans copies JPEGs into, so that large
// ones do not fault in fresh pages per image.
var scanPool = sync.Pool{New: func() any { return new([]byte) }}

// dcScans returns, for a progressive JPEG to be decoded at 1/8 scale, a
// copy of data without the AC scan data the decode would not use
// (dropACScans), in a buffer to hand back to scanPool, and writes the n
// components concerned to ids; ok is false when there is nothing to drop
// or data is not well-formed enough to drop it.
func dcScans(data []byte, ids *componentIDs) (buf *[]byte, n int, ok bool) {
	n = int(C.prep_dc_only((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), 1, (*C.uchar)(unsafe.Pointer(&ids[0]))))
	if n == 0 {
		return nil, 0, false
	}
	buf = scanPool.Get().(*[]byte)
	out, ok := dropACScans((*buf)[:0], data, ids[:n])
	*buf = out
	if !ok || len(out) == len(data) {
		scanPool.Put(buf)
		return nil, 0, false
	}
	return buf, n, true
}

// componentIDs holds JPEG component IDs, as many as a frame can have.
type componentIDs [C.MAX_COMPONENTS]byte

type turboMsgs struct {
	msg, warn [200]C.char
	ids       componentIDs // dcScans' components
}

var msgPool = sync.Pool{New: func() any { return new(turboMsgs) }}

func decodeTurbo(data []byte, cfg image.Config, minSide int, gap float64) (*image.NRGBA, int, string, error) {
	return decodeTurboAt(data, cfg, scaleFor(cfg.Width, cfg.Height, minSide, gap))
}

// decodeTurboAt decodes at the DCT scale num/8 (1..8), returning num.
func decodeTurboAt(data []byte, cfg image.Config, num int) (*image.NRGBA, int, string, error) {
	return decodeTurboScans(data, cfg, num, true)
}

// decodeTurboScans is decodeTurboAt; with dropScans false it reads every
// scan of a progressive JPEG at 1/8 scale too (dcScans).
func decodeTurboScans(data []byte, cfg image.Config, num int, dropScans bool) (*image.NRGBA, int, string, error) {
	return decodeTurboWith(data, cfg, num, dropScans, true)
}

// decodeTurboWith is decodeTurboScans; with own false libjpeg's own
// entropy decoders run instead of prep's (phuff.h, shuff.h).
func decodeTurboWith(data []byte, cfg image.Config, num int, dropScans, own bool) (*image.NRGBA, int, string, error) {
	// libjpeg rounds scaled sizes up (jdiv_round_up).
	w, h := scaledSize(cfg.Width, num), scaledSize(cfg.Height, num)
	img := newNRGBA(w, h)
	// Message buffers passed to C escape to the heap: pooled, not
	// allocated per image.
	m := msgPool.Get().(*turboMsgs)
	defer msgPool.Put(m)
	msg, warn := &m.msg, &m.warn
	src, empty := data, 0
	if num == 1 && dropScans {
		if s, n, ok := dcScans(data, &m.ids); ok {
			defer scanPool.Put(s)
			src, empty = *s, n
		}
	}
	rc := C.prep_decode((*C.uchar)(unsafe.Pointer(&src[0])), C.ulong(len(src)), C.int(num), C.int(cbool(own)),
		(*C.uchar)(unsafe.Pointer(&m.ids[0])), C.int(empty),
		(*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(img.Stride), C.int(w), C.int(h),
		&msg[0], &warn[0], C.int(len(msg)))
	if rc == C.prep_retry {
		// prep's entropy decoder met damage: libjpeg decodes the
		// file again, every scan of it, so that a damaged file comes
		// out as libjpeg makes it whichever scans dcScans dropped.
		entropyRetryCount.Add(1)
		rc = C.prep_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), C.int(num), 0,
			nil, 0,
			(*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(img.Stride), C.int(w), C.int(h),
			&msg[0], &warn[0], C.int(len(msg)))
	}
	switch rc {
	case C.prep_ok, C.prep_cmyk, C.prep_cmyk_inverted:
		if rc != C.prep_ok {
			cmykToRGBA(img, rc == C.prep_cmyk_inverted)
		}
		if warn[0] == 0 {
			return img, num, "", nil
		}
		return img, num, C.GoString(&warn[0]), nil
	case C.prep_truncated:
		Release(img)
		return nil, 8, "", fmt.Errorf("truncated JPEG: the file ends after %d bytes without its end marker (libjpeg-turbo: %s)", len(data), C.GoString(&msg[0]))
	}
	Release(img)
	return nil, 8, "", fmt.Errorf("corrupt JPEG: libjpeg-turbo: %s", C.GoString(&msg[0]))
}

// OwnEntropy reports whether this build decodes JPEG scans with prep's
// entropy decoders, and if not, why: `prep version` says so.
func OwnEntropy() (bool, string) {
	why := C.GoString(C.prep_entropy_why())
	return why == "", why
}

// phuffInstalls counts the decodes prep's progressive entropy decoder ran.
func phuffInstalls() uint64 {
	return uint64(C.prep_phuff_count())
}

// seqInstalls counts the decodes prep's sequential entropy decoder ran.
func seqInstalls() uint64 {
	return uint64(C.prep_seq_count())
}

// entropyRetries counts the decodes prep's entropy decoders (either) gave
// up on, for libjpeg's to do again.
func entropyRetries() uint64 { return entropyRetryCount.Load() }

var entropyRetryCount atomic.Uint64

// usePdep makes AC refinement scans find zeros with PDEP or without, and
// returns the previous choice: for the tests, which check both ways.
func usePdep(on bool) bool {
	return C.prep_set_pdep(C.int(cbool(on))) != 0
}

// fastPdep reports whether this CPU's PDEP is fast (BMI2 and not AMD Zen 1 or 2).
func fastPdep() bool { return C.prep_fast_pdep() != 0 }

func cbool(b bool) int {
	if b {
		return 1
	}
	return 0
}
