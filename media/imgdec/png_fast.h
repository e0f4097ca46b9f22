// prep_png_fast decodes the PNGs most datasets hold (8-bit, not
// interlaced, grey, grey+alpha, RGB or RGBA, no palette or tRNS) into
// 8-bit RGBA rows, as prep_png_decode does through libpng, but inflates
// with libdeflate, about twice zlib's speed on photos (a PNG costs
// several JPEGs to decode). It takes only clean files: every chunk's CRC
// right, no critical chunk but IHDR, IDAT and IEND, the IDATs one run, the
// zlib stream (its Adler-32 checked) exactly the image's filtered rows.
// Anything else returns prep_png_other and libpng decides, as before.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>

enum { prep_png_other = 2 };

static uint32_t prep_be32(const unsigned char *p) {
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

// prep_paeth is PNG's Paeth predictor, selected with masks: on photos the
// choice is a coin toss, and the branches compilers make of the plain
// form mispredicted enough to cost 1.5 times the whole unfiltering.
static unsigned char prep_paeth(int a, int b, int c) {
	int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c); // |p-a|, |p-b|, |p-c|, p = a+b-c
	int ma = -((pa <= pb) & (pa <= pc));
	int mb = ~ma & -(pb <= pc);
	return (unsigned char)((a & ma) | (b & mb) | (c & ~(ma | mb)));
}

// prep_png_simd: 1 where the CPU has SSE4.1 (every x86-64 since 2008
// bar a few low-power chips), 0 for the scalar loops; tests turn it off to
// check that the two agree.
static int prep_png_simd;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <smmintrin.h>
#define PREP_PNG_HAVE_SSE41 1

// prep_paeth_sse41 undoes Paeth on an RGB or RGBA row (bpp 3 or 4) one
// pixel a step, its channels in 16-bit lanes and the last pixel kept in
// a register: the scalar loop's chain through memory and its 20-odd
// instructions a byte made it 3.7 times slower on photos. From pixel 0,
// reading 4 bytes (so bpp 3 stops a pixel short of the row's end).
__attribute__((target("sse4.1"))) static size_t prep_paeth_sse41(unsigned char *cur, const unsigned char *prev,
                                                                  size_t n, int bpp) {
	const __m128i z = _mm_setzero_si128(), lo = _mm_set1_epi16(255);
	__m128i a = z, c = z;
	size_t x = 0;
	for (; x + 4 <= n; x += (size_t)bpp) {
		uint32_t bv, rv;
		memcpy(&bv, prev + x, 4);
		memcpy(&rv, cur + x, 4);
		__m128i b = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)bv), z);
		__m128i e = _mm_sub_epi16(b, c), d = _mm_sub_epi16(a, c); // p-a = b-c, p-b = a-c
		__m128i pa = _mm_abs_epi16(e), pb = _mm_abs_epi16(d), pc = _mm_abs_epi16(_mm_add_epi16(d, e));
		// a if pa <= pb and pa <= pc, else b if pb <= pc, else c
		__m128i bc = _mm_blendv_epi8(b, c, _mm_cmpgt_epi16(pb, pc));
		__m128i pred = _mm_blendv_epi8(a, bc, _mm_cmpgt_epi16(pa, _mm_min_epi16(pb, pc)));
		a = _mm_and_si128(_mm_add_epi16(pred, _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)rv), z)), lo);
		uint32_t out = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(a, a));
		if (bpp == 4) {
			memcpy(cur + x, &out, 4);
		} else {
			cur[x] = (unsigned char)out, cur[x + 1] = (unsigned char)(out >> 8), cur[x + 2] = (unsigned char)(out >> 16);
		}
		c = b;
	}
	return x;
}

// prep_rgb_rgba_sse41 widens w RGB pixels (3w bytes at s) to RGBA at o,
// four a step with a byte shuffle; it returns how many it did, stopping
// where a 16-byte load would pass the row's end.
__attribute__((target("sse4.1"))) static int prep_rgb_rgba_sse41(unsigned char *o, const unsigned char *s, int w) {
	const __m128i spread = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
	const __m128i alpha = _mm_set1_epi32((int)0xff000000u);
	int x = 0;
	for (; (size_t)x * 3 + 16 <= (size_t)w * 3; x += 4) {
		__m128i v = _mm_loadu_si128((const __m128i *)(s + (size_t)x * 3));
		_mm_storeu_si128((__m128i *)(o + (size_t)x * 4), _mm_or_si128(_mm_shuffle_epi8(v, spread), alpha));
	}
	return x;
}
#endif

// prep_png_use_simd sets prep_png_simd (-1: from the CPU) and returns it.
static int prep_png_use_simd(int on) {
#ifdef PREP_PNG_HAVE_SSE41
	if (on < 0) on = __builtin_cpu_supports("sse4.1");
	prep_png_simd = on != 0;
#else
	prep_png_simd = 0;
#endif
	return prep_png_simd;
}

// prep_unfilter undoes row filter f on cur (n bytes, bpp bytes a pixel)
// given the previous unfiltered row (NULL for the first): 0, or -1 for a
// filter type PNG does not have.
static int prep_unfilter(int f, unsigned char *cur, const unsigned char *prev, size_t n, int bpp) {
	size_t x;
	switch (f) {
	case 0:
		return 0;
	case 1:
		for (x = bpp; x < n; x++) cur[x] = (unsigned char)(cur[x] + cur[x - bpp]);
		return 0;
	case 2:
		if (prev)
			for (x = 0; x < n; x++) cur[x] = (unsigned char)(cur[x] + prev[x]);
		return 0;
	case 3:
		for (x = 0; x < n; x++) {
			int a = x >= (size_t)bpp ? cur[x - bpp] : 0, b = prev ? prev[x] : 0;
			cur[x] = (unsigned char)(cur[x] + ((a + b) >> 1));
		}
		return 0;
	case 4:
		if (!prev) { // b = c = 0: Paeth is Sub
			for (x = bpp; x < n; x++) cur[x] = (unsigned char)(cur[x] + cur[x - bpp]);
			return 0;
		}
		x = 0;
#ifdef PREP_PNG_HAVE_SSE41
		if (prep_png_simd && (bpp == 3 || bpp == 4)) x = prep_paeth_sse41(cur, prev, n, bpp);
#endif
		for (; x < (size_t)bpp && x < n; x++) cur[x] = (unsigned char)(cur[x] + prev[x]);
		for (; x < n; x++) cur[x] = (unsigned char)(cur[x] + prep_paeth(cur[x - bpp], prev[x], prev[x - bpp]));
		return 0;
	}
	return -1;
}

// prep_png_fast: out holds h rows of stride bytes, w RGBA pixels each;
// scratch at least h*(1+4w) bytes (the inflated rows; the IDATs when there
// are several). 0 (prep_png_ok), or prep_png_other.
static int prep_png_fast(const unsigned char *data, size_t size, unsigned char *out, int stride, int w, int h,
                         unsigned char *scratch, size_t scratch_len) {
	static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	if (size < 8 || memcmp(data, sig, 8) != 0 || w <= 0 || h <= 0) return prep_png_other;
	int ctype = -1, bpp = 0, idats = 0, idat_done = 0, ended = 0;
	const unsigned char *z = NULL; // the zlib stream: in data (one IDAT) or gathered
	size_t zlen = 0;
	size_t pos = 8;
	while (pos + 12 <= size) {
		uint32_t n = prep_be32(data + pos);
		if (n > 0x7fffffffu || n > size - pos - 12) return prep_png_other;
		const unsigned char *type = data + pos + 4, *body = type + 4;
		if ((uint32_t)libdeflate_crc32(0, type, (size_t)n + 4) != prep_be32(body + n)) return prep_png_other;
		int idat = memcmp(type, "IDAT", 4) == 0;
		if (pos == 8) {
			if (memcmp(type, "IHDR", 4) != 0 || n != 13 || prep_be32(body) != (uint32_t)w ||
			    prep_be32(body + 4) != (uint32_t)h || body[8] != 8 || body[10] || body[11] || body[12])
				return prep_png_other;
			ctype = body[9];
			bpp = ctype == 0 ? 1 : ctype == 4 ? 2 : ctype == 2 ? 3 : ctype == 6 ? 4 : 0;
			if (!bpp) return prep_png_other; // palette (3): libpng
		} else if (idat) {
			if (idat_done) return prep_png_other; // IDATs apart
			if (idats++ == 0) {
				z = body;
				zlen = n;
			} else {
				if (idats == 2) { // a second IDAT: gather them at the end of scratch
					size_t left = size - pos; // all later IDATs fit in what is left of the file
					if (left + zlen > scratch_len) return prep_png_other;
					unsigned char *g = scratch + scratch_len - (left + zlen);
					memcpy(g, z, zlen);
					z = g;
				}
				memcpy((unsigned char *)z + zlen, body, n);
				zlen += n;
			}
		} else if (memcmp(type, "IEND", 4) == 0) {
			ended = 1;
			break;
		} else if (!(type[0] & 0x20) || memcmp(type, "tRNS", 4) == 0) {
			return prep_png_other; // PLTE and unknown critical chunks; transparency
		} else if (idats) {
			idat_done = 1;
		}
		pos += (size_t)n + 12;
	}
	size_t row = (size_t)w * bpp, want = (size_t)h * (row + 1);
	if (!ended || !idats || want > scratch_len) return prep_png_other;
	// The rows are inflated to the front of scratch; gathered IDATs sit at
	// its end, past the rows unless scratch is short for both.
	if (idats > 1 && z < scratch + want) return prep_png_other;
	static __thread struct libdeflate_decompressor *d;
	if (d == NULL && (d = libdeflate_alloc_decompressor()) == NULL) return prep_png_other;
	size_t in_used = 0, got = 0;
	if (libdeflate_zlib_decompress_ex(d, z, zlen, scratch, want, &in_used, &got) != LIBDEFLATE_SUCCESS ||
	    got != want || in_used != zlen)
		return prep_png_other;
	const unsigned char *prev = NULL;
	for (int y = 0; y < h; y++) {
		unsigned char *cur = scratch + (size_t)y * (row + 1);
		if (prep_unfilter(cur[0], cur + 1, prev, row, bpp)) return prep_png_other;
		prev = cur + 1;
		const unsigned char *s = cur + 1;
		unsigned char *o = out + (size_t)y * stride;
		switch (ctype) {
		case 0:
			for (int x = 0; x < w; x++, o += 4) o[0] = o[1] = o[2] = s[x], o[3] = 0xff;
			break;
		case 4:
			for (int x = 0; x < w; x++, o += 4, s += 2) o[0] = o[1] = o[2] = s[0], o[3] = s[1];
			break;
		case 2: {
			int x = 0;
#ifdef PREP_PNG_HAVE_SSE41
			if (prep_png_simd) x = prep_rgb_rgba_sse41(o, s, w), o += 4 * x, s += 3 * x;
#endif
			for (; x < w; x++, o += 4, s += 3) o[0] = s[0], o[1] = s[1], o[2] = s[2], o[3] = 0xff;
			break;
		}
		default:
			memcpy(o, s, row);
		}
	}
	return 0;
}
