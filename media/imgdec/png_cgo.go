//go:build cgo

package imgdec

/*
#cgo pkg-config: libpng libdeflate
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <png.h>

enum { prep_png_ok = 0, prep_png_fail = 1 };
#include "png_fast.h"

struct prep_png_src {
	const unsigned char *data;
	size_t size, pos;
	char *msg;
	int msglen;
	int warned; // a warning that may bear on the pixels
};

static void prep_png_read(png_structp p, png_bytep out, size_t n) {
	struct prep_png_src *s = (struct prep_png_src *)png_get_io_ptr(p);
	if (n > s->size - s->pos) {
		png_error(p, "the data ends early");
	}
	memcpy(out, s->data + s->pos, n);
	s->pos += n;
}

static void prep_png_error(png_structp p, png_const_charp m) {
	struct prep_png_src *s = (struct prep_png_src *)png_get_error_ptr(p);
	snprintf(s->msg, s->msglen, "%s", m);
	png_longjmp(p, 1);
}

// Warnings about ancillary chunks prep does not use leave the pixels
// alone; any other (a bad tRNS, too much image data, ...) may not, and
// sends the file to image/png, which decides.
static const char *prep_png_harmless[] = {"iCCP", "sRGB", "cHRM", "gAMA", "iTXt", "tEXt",
	"zTXt", "tIME", "pHYs", "bKGD", "sBIT", "hIST", "sPLT", "eXIf", "oFFs", "pCAL", "sCAL"};

static void prep_png_warning(png_structp p, png_const_charp m) {
	struct prep_png_src *s = (struct prep_png_src *)png_get_error_ptr(p);
	for (size_t i = 0; i < sizeof prep_png_harmless / sizeof prep_png_harmless[0]; i++) {
		if (strncmp(m, prep_png_harmless[i], 4) == 0) return;
	}
	if (!s->warned) snprintf(s->msg, s->msglen, "%s", m);
	s->warned = 1;
}

// prep_png_decode decodes a PNG into 8-bit RGBA rows of stride bytes in
// out, which holds exactly want_w × want_h pixels, with the conversions
// image/png and toNRGBA make: palette and grey become RGB, tRNS becomes
// alpha, 16-bit samples keep their high byte, no gamma is applied.
static int prep_png_decode(const unsigned char *data, size_t size,
		unsigned char *out, int stride, int want_w, int want_h, char *msg, int msglen) {
	struct prep_png_src s = {data, size, 0, msg, msglen, 0};
	msg[0] = 0;
	png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, prep_png_error, prep_png_warning);
	if (p == NULL) {
		snprintf(msg, msglen, "out of memory");
		return prep_png_fail;
	}
	png_infop info = png_create_info_struct(p);
	// After the jump, read only what was set before setjmp: locals
	// changed since are indeterminate.
	if (info == NULL || setjmp(png_jmpbuf(p))) {
		png_destroy_read_struct(&p, &info, NULL);
		return prep_png_fail;
	}
	// Like image/png, refuse a bad checksum in any chunk.
	png_set_crc_action(p, PNG_CRC_ERROR_QUIT, PNG_CRC_ERROR_QUIT);
	png_set_read_fn(p, &s, prep_png_read);
	png_read_info(p, info);
	png_uint_32 w, h;
	int depth, ctype, interlace;
	png_get_IHDR(p, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
	if ((int)w != want_w || (int)h != want_h) {
		snprintf(msg, msglen, "libpng reads %ux%u, the header said %dx%d", w, h, want_w, want_h);
		png_destroy_read_struct(&p, &info, NULL);
		return prep_png_fail;
	}
	png_set_expand(p);
	if (depth == 16) {
		png_set_strip_16(p);
	}
	if (!(ctype & PNG_COLOR_MASK_COLOR)) {
		png_set_gray_to_rgb(p);
	}
	if (!(ctype & PNG_COLOR_MASK_ALPHA) && !png_get_valid(p, info, PNG_INFO_tRNS)) {
		png_set_filler(p, 0xFF, PNG_FILLER_AFTER);
	}
	int passes = png_set_interlace_handling(p);
	png_read_update_info(p, info);
	if (png_get_rowbytes(p, info) != (size_t)want_w * 4) {
		snprintf(msg, msglen, "libpng rows of %zu bytes, want %d", (size_t)png_get_rowbytes(p, info), want_w * 4);
		png_destroy_read_struct(&p, &info, NULL);
		return prep_png_fail;
	}
	for (int pass = 0; pass < passes; pass++) {
		for (int y = 0; y < want_h; y++) {
			png_read_row(p, out + (size_t)y * stride, NULL);
		}
	}
	png_read_end(p, NULL);
	png_destroy_read_struct(&p, &info, NULL);
	return s.warned ? prep_png_fail : prep_png_ok;
}
*/
import "C"

import (
	"fmt"
	"image"
	"sync"
	"unsafe"
)

// decodePNG decodes a PNG through prep_png_fast (png_fast.h) or, for the
// files it leaves, libpng into a pooled image, for about
// half image/png's time and none of its allocations. Its errors are for
// Decode, which then asks image/png: the reference decides, and words,
// what libpng does not take cleanly.
func decodePNG(data []byte, cfg image.Config) (*image.NRGBA, error) {
	img := newNRGBA(cfg.Width, cfg.Height)
	if pngFast(data, img) {
		return img, nil
	}
	Release(img)
	return decodeLibpng(data, cfg)
}

// decodeLibpng is decodePNG through libpng alone.
func decodeLibpng(data []byte, cfg image.Config) (*image.NRGBA, error) {
	img := newNRGBA(cfg.Width, cfg.Height)
	m := msgPool.Get().(*turboMsgs)
	defer msgPool.Put(m)
	msg := &m.msg
	rc := C.prep_png_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		(*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(img.Stride), C.int(cfg.Width), C.int(cfg.Height),
		&msg[0], C.int(len(msg)))
	if rc == C.prep_png_ok {
		return img, nil
	}
	Release(img)
	return nil, fmt.Errorf("libpng: %s", C.GoString(&msg[0]))
}

// pngScratch holds prep_png_fast's inflated rows between decodes.
var pngScratch = sync.Pool{New: func() any { return new([]byte) }}

// The unfiltering's SIMD loop, where the CPU has it.
var pngSIMD = C.prep_png_use_simd(-1) != 0

// PNGSIMD reports whether prep_png_fast undoes the Paeth filter with
// SSE4.1 on this machine.
func PNGSIMD() bool { return pngSIMD }

// usePNGSIMD turns the SIMD unfiltering on or off (where the CPU has it),
// for tests comparing the two; it returns whether it is on.
func usePNGSIMD(on bool) bool {
	if !on {
		return C.prep_png_use_simd(0) != 0
	}
	return C.prep_png_use_simd(-1) != 0
}

// pngFast decodes data into img with prep_png_fast (libdeflate), when data
// is a PNG it takes; false leaves img to libpng.
func pngFast(data []byte, img *image.NRGBA) bool {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	need := h*(1+4*w) + len(data) // the rows, then room to gather the IDATs
	bp := pngScratch.Get().(*[]byte)
	defer pngScratch.Put(bp)
	if cap(*bp) < need {
		*bp = make([]byte, need)
	}
	buf := (*bp)[:need]
	return C.prep_png_fast((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)),
		(*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(img.Stride), C.int(w), C.int(h),
		(*C.uchar)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))) == 0
}
