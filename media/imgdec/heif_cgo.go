//go:build cgo

package imgdec

/*
// libheif is loaded at run time (dlopen), not linked: a prep without it
// installed still runs, and only refuses HEIF and AVIF files, naming the
// package. Its header comes from libheif-dev at build time.
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <libheif/heif.h>

enum { prep_heif_ok = 0, prep_heif_fail = 1, prep_heif_codec = 2 };

static struct {
	struct heif_error (*init)(struct heif_init_params *);
	const char *(*version)(void);
	int (*have_decoder)(enum heif_compression_format);
	struct heif_context *(*ctx_alloc)(void);
	void (*ctx_free)(struct heif_context *);
	struct heif_error (*read)(struct heif_context *, const void *, size_t, const struct heif_reading_options *);
	struct heif_error (*primary)(struct heif_context *, struct heif_image_handle **);
	int (*width)(const struct heif_image_handle *);
	int (*height)(const struct heif_image_handle *);
	int (*has_alpha)(const struct heif_image_handle *);
	void (*handle_release)(const struct heif_image_handle *);
	struct heif_decoding_options *(*opt_alloc)(void);
	void (*opt_free)(struct heif_decoding_options *);
	struct heif_error (*decode)(const struct heif_image_handle *, struct heif_image **, enum heif_colorspace,
	                            enum heif_chroma, const struct heif_decoding_options *);
	const uint8_t *(*plane)(const struct heif_image *, enum heif_channel, int *);
	int (*img_width)(const struct heif_image *, enum heif_channel);
	int (*img_height)(const struct heif_image *, enum heif_channel);
	void (*img_release)(const struct heif_image *);
	void (*max_threads)(struct heif_context *, int); // optional
} prep_heif;

// prep_heif_load binds libheif once (the Go side calls it under a
// sync.Once): 0, or -1 with why in msg.
static int prep_heif_load(char *msg, size_t msglen) {
	void *h = dlopen("libheif.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		snprintf(msg, msglen, "%s", dlerror());
		return -1;
	}
#define PREP_SYM(field, name)                                                                                  \
	if ((*(void **)&prep_heif.field = dlsym(h, name)) == NULL) {                                           \
		snprintf(msg, msglen, "libheif.so.1 lacks %s", name);                                          \
		return -1;                                                                  \
	}
	PREP_SYM(version, "heif_get_version")
	PREP_SYM(have_decoder, "heif_have_decoder_for_format")
	PREP_SYM(ctx_alloc, "heif_context_alloc")
	PREP_SYM(ctx_free, "heif_context_free")
	PREP_SYM(read, "heif_context_read_from_memory_without_copy")
	PREP_SYM(primary, "heif_context_get_primary_image_handle")
	PREP_SYM(width, "heif_image_handle_get_width")
	PREP_SYM(height, "heif_image_handle_get_height")
	PREP_SYM(has_alpha, "heif_image_handle_has_alpha_channel")
	PREP_SYM(handle_release, "heif_image_handle_release")
	PREP_SYM(opt_alloc, "heif_decoding_options_alloc")
	PREP_SYM(opt_free, "heif_decoding_options_free")
	PREP_SYM(decode, "heif_decode_image")
	PREP_SYM(plane, "heif_image_get_plane_readonly")
	PREP_SYM(img_width, "heif_image_get_width")
	PREP_SYM(img_height, "heif_image_get_height")
	PREP_SYM(img_release, "heif_image_release")
#undef PREP_SYM
	// Since 1.16 the codecs can be plugins, which heif_init loads; before,
	// it is optional.
	*(void **)&prep_heif.max_threads = dlsym(h, "heif_context_set_max_decoding_threads");
	*(void **)&prep_heif.init = dlsym(h, "heif_init");
	if (prep_heif.init != NULL) prep_heif.init(NULL);
	return 0;
}

static const char *prep_heif_version(void) { return prep_heif.version(); }
static int prep_heif_has(int codec) { return prep_heif.have_decoder((enum heif_compression_format)codec); }

static void prep_heif_err(struct heif_error e, char *msg, size_t msglen) {
	snprintf(msg, msglen, "%s", e.message ? e.message : "libheif error");
}

// prep_heif_open parses the container and finds the primary image: its
// size after the file's rotation and mirroring, and whether it has alpha.
// The caller releases *ctx and *handle (prep_heif_close).
static int prep_heif_open(const void *data, size_t size, struct heif_context **ctx,
                          struct heif_image_handle **handle, char *msg, size_t msglen) {
	*handle = NULL;
	*ctx = prep_heif.ctx_alloc();
	if (*ctx == NULL) {
		snprintf(msg, msglen, "out of memory");
		return prep_heif_fail;
	}
	// prep runs a decode per worker: no threads of libheif's own.
	if (prep_heif.max_threads != NULL) prep_heif.max_threads(*ctx, 0);
	struct heif_error e = prep_heif.read(*ctx, data, size, NULL);
	if (e.code == heif_error_Ok) e = prep_heif.primary(*ctx, handle);
	if (e.code != heif_error_Ok) {
		prep_heif_err(e, msg, msglen);
		return e.code == heif_error_Unsupported_feature ? prep_heif_codec : prep_heif_fail;
	}
	return prep_heif_ok;
}

static void prep_heif_close(struct heif_context *ctx, struct heif_image_handle *handle) {
	if (handle != NULL) prep_heif.handle_release(handle);
	if (ctx != NULL) prep_heif.ctx_free(ctx);
}

static int prep_heif_size(const void *data, size_t size, int *w, int *h, int *alpha, char *msg, size_t msglen) {
	struct heif_context *ctx;
	struct heif_image_handle *handle;
	int rc = prep_heif_open(data, size, &ctx, &handle, msg, msglen);
	if (rc == prep_heif_ok) {
		*w = prep_heif.width(handle);
		*h = prep_heif.height(handle);
		*alpha = prep_heif.has_alpha(handle);
	}
	prep_heif_close(ctx, handle);
	return rc;
}

// prep_heif_decode decodes the primary image, rotated and mirrored as the
// file says (libheif's default, as pillow-heif's), as 8-bit RGBA (higher
// bit depths by their high byte: libheif's convert_hdr_to_8bit) into out:
// w*h pixels, stride bytes a row; *alpha says whether it has an alpha
// channel.
static int prep_heif_decode(const void *data, size_t size, uint8_t *out, int stride, int w, int h, int *alpha,
                            char *msg, size_t msglen) {
	struct heif_context *ctx;
	struct heif_image_handle *handle;
	int rc = prep_heif_open(data, size, &ctx, &handle, msg, msglen);
	if (rc != prep_heif_ok) {
		prep_heif_close(ctx, handle);
		return rc;
	}
	*alpha = prep_heif.has_alpha(handle);
	struct heif_decoding_options *opt = prep_heif.opt_alloc();
	if (opt != NULL && opt->version >= 2) opt->convert_hdr_to_8bit = 1;
	struct heif_image *img = NULL;
	struct heif_error e = prep_heif.decode(handle, &img, heif_colorspace_RGB, heif_chroma_interleaved_RGBA, opt);
	if (opt != NULL) prep_heif.opt_free(opt);
	if (e.code != heif_error_Ok) {
		prep_heif_err(e, msg, msglen);
		prep_heif_close(ctx, handle);
		return e.code == heif_error_Unsupported_feature || e.code == heif_error_Unsupported_filetype
		           ? prep_heif_codec
		           : prep_heif_fail;
	}
	int pstride = 0;
	const uint8_t *p = prep_heif.plane(img, heif_channel_interleaved, &pstride);
	if (p == NULL || prep_heif.img_width(img, heif_channel_interleaved) != w ||
	    prep_heif.img_height(img, heif_channel_interleaved) != h) {
		snprintf(msg, msglen, "the decoded image is not the %dx%d its header declares", w, h);
		rc = prep_heif_fail;
	} else {
		for (int y = 0; y < h; y++) memcpy(out + (size_t)y * stride, p + (size_t)y * pstride, (size_t)w * 4);
	}
	prep_heif.img_release(img);
	prep_heif_close(ctx, handle);
	return rc;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"image"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// cDecoders says whether libheif and libjxl can be bound: the only
// decoders Isolate moves into child processes.
const cDecoders = true

// The codecs libheif decodes (heif_compression_format).
const (
	heifHEVC = 1
	heifAV1  = 4
)

// heifLib binds libheif on first use: nil, or why it is missing.
var heifLib = sync.OnceValue(func() error {
	var msg [256]C.char
	if C.prep_heif_load(&msg[0], C.size_t(len(msg))) != 0 {
		return fmt.Errorf("%s", C.GoString(&msg[0]))
	}
	return nil
})

// heifMissing is the error for a HEIF or AVIF file when libheif, or its
// decoder for the file's codec, is missing.
func heifMissing(name, why string) error {
	return unsupported(fmt.Sprintf("unsupported image format (%s): %s; install libheif (Debian, Ubuntu: apt install libheif1; Fedora: dnf install libheif), or convert the file to PNG or JPEG first", name, why))
}

// heifCodecs checks that libheif is there and decodes name's codec.
func heifCodecs(name string) error {
	if err := heifLib(); err != nil {
		return heifMissing(name, "libheif is not installed ("+err.Error()+")")
	}
	codec, what := heifHEVC, "HEVC"
	if name == "AVIF" {
		codec, what = heifAV1, "AV1"
	}
	if C.prep_heif_has(C.int(codec)) == 0 {
		return heifMissing(name, "this libheif ("+C.GoString(C.prep_heif_version())+") has no "+what+" decoder")
	}
	return nil
}

func heifSizeOf(name string) func([]byte) (int, int, error) {
	return func(data []byte) (int, int, error) {
		if err := heifCodecs(name); err != nil {
			return 0, 0, err
		}
		if screenHEIF && heifRefLoop(data) {
			return 0, 0, errHEIFLoop
		}
		var w, h, alpha C.int
		var msg [256]C.char
		var pin runtime.Pinner
		pin.Pin(&data[0])
		defer pin.Unpin()
		switch C.prep_heif_size(unsafe.Pointer(&data[0]), C.size_t(len(data)), &w, &h, &alpha, &msg[0], C.size_t(len(msg))) {
		case C.prep_heif_ok:
			return int(w), int(h), nil
		case C.prep_heif_codec:
			return 0, 0, heifMissing(name, C.GoString(&msg[0]))
		}
		return 0, 0, heifError(C.GoString(&msg[0]))
	}
}

// heifError words libheif's message: its "end of data" ones are a file cut
// short.
func heifError(msg string) error {
	if strings.Contains(msg, "end of data") || strings.Contains(msg, "nsufficient") || strings.Contains(msg, "truncated") {
		return fmt.Errorf("%w: libheif: %s", errTruncated, msg)
	}
	return errors.New("libheif: " + msg)
}

func decodeHEIFOf(name string) func([]byte, int, int) (*image.NRGBA, bool, error) {
	return func(data []byte, w, h int) (*image.NRGBA, bool, error) {
		var alpha C.int
		var msg [256]C.char
		var pin runtime.Pinner
		defer pin.Unpin()
		pin.Pin(&data[0])
		img := newNRGBA(w, h)
		pin.Pin(&img.Pix[0])
		switch C.prep_heif_decode(unsafe.Pointer(&data[0]), C.size_t(len(data)), (*C.uint8_t)(unsafe.Pointer(&img.Pix[0])),
			C.int(img.Stride), C.int(w), C.int(h), &alpha, &msg[0], C.size_t(len(msg))) {
		case C.prep_heif_ok:
			return img, alpha == 0, nil
		case C.prep_heif_codec:
			Release(img)
			return nil, false, heifMissing(name, C.GoString(&msg[0]))
		}
		Release(img)
		return nil, false, heifError(C.GoString(&msg[0]))
	}
}

// HEIFDecoder says what decodes HEIF and AVIF files here (prep version).
func HEIFDecoder() string {
	if err := heifLib(); err != nil {
		return "not decoded: libheif.so.1 not found (apt install libheif1), loaded at run time"
	}
	var has []string
	if C.prep_heif_has(heifHEVC) != 0 {
		has = append(has, "HEIC")
	}
	if C.prep_heif_has(heifAV1) != 0 {
		has = append(has, "AVIF")
	}
	what := strings.Join(has, ", ")
	if what == "" {
		what = "no HEVC or AV1 decoder"
	}
	return "libheif " + C.GoString(C.prep_heif_version()) + ", loaded at run time: " + what
}
