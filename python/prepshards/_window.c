/*
 * prepshards' online crop and flip, in C (loaded through ctypes by
 * _native.py; numpy does the same when this library is absent).
 *
 * numpy mirrors 3-byte pixels one byte at a time (~1 ns a byte), which made
 * a random flip cost more than reading the sample. Here an unflipped window
 * goes from the file straight into the batch (preadv with one vector per
 * row, the columns outside the window into a junk buffer), and a flipped
 * one is read into a cache-resident scratch buffer and mirrored with SSSE3
 * shuffles where the CPU has them. Both are byte permutations: the output
 * is the same on every CPU.
 *
 * No Python headers: a plain shared library, built by `make` (in place) or
 * by setup.py (pip install).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PREP_X86 1
#endif

#define PREP_IOV 512 /* iovecs per preadv call, under every IOV_MAX */

/* Mirror one row of w pixels of c bytes: dst[q] = src[w-1-q]. */
static void flip_row_scalar(uint8_t *dst, const uint8_t *src, size_t w, size_t c)
{
    const uint8_t *s = src + (w - 1) * c;
    switch (c) {
    case 1:
        for (size_t q = 0; q < w; q++)
            dst[q] = src[w - 1 - q];
        return;
    case 3:
        for (size_t q = 0; q < w; q++, dst += 3, s -= 3) {
            dst[0] = s[0];
            dst[1] = s[1];
            dst[2] = s[2];
        }
        return;
    case 4:
        for (size_t q = 0; q < w; q++, dst += 4, s -= 4)
            memcpy(dst, s, 4);
        return;
    default:
        for (size_t q = 0; q < w; q++, dst += c, s -= c)
            memcpy(dst, s, c);
    }
}

#ifdef PREP_X86
/* 16 RGB pixels (48 bytes) mirrored by 7 shuffles: output vector k takes
 * bytes of input vectors a, b, c; an index of 0x80 gives 0. */
static int8_t masks[3][3][16];

static void init_masks(void)
{
    for (int k = 0; k < 48; k++) {
        int from = (15 - k / 3) * 3 + k % 3; /* input byte of output byte k */
        for (int v = 0; v < 3; v++)
            masks[k / 16][v][k % 16] = (from / 16 == v) ? (int8_t)(from % 16) : (int8_t)0x80;
    }
}

__attribute__((target("ssse3"))) static void flip_row3_ssse3(uint8_t *dst, const uint8_t *src, size_t w)
{
    __m128i m[3][3];
    for (int k = 0; k < 3; k++)
        for (int v = 0; v < 3; v++)
            m[k][v] = _mm_loadu_si128((const __m128i *)masks[k][v]);
    size_t q = 0;
    for (; q + 16 <= w; q += 16) {
        const uint8_t *in = src + (w - q - 16) * 3; /* the 16 pixels that land at q..q+15 */
        __m128i a = _mm_loadu_si128((const __m128i *)in);
        __m128i b = _mm_loadu_si128((const __m128i *)(in + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(in + 32));
        __m128i o0 = _mm_or_si128(_mm_shuffle_epi8(b, m[0][1]), _mm_shuffle_epi8(c, m[0][2]));
        __m128i o1 = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, m[1][0]), _mm_shuffle_epi8(b, m[1][1])),
                                  _mm_shuffle_epi8(c, m[1][2]));
        __m128i o2 = _mm_or_si128(_mm_shuffle_epi8(a, m[2][0]), _mm_shuffle_epi8(b, m[2][1]));
        _mm_storeu_si128((__m128i *)(dst + q * 3), o0);
        _mm_storeu_si128((__m128i *)(dst + q * 3 + 16), o1);
        _mm_storeu_si128((__m128i *)(dst + q * 3 + 32), o2);
    }
    if (q < w) /* the last w-q output pixels: input pixels 0..w-q-1 */
        flip_row_scalar(dst + q * 3, src, w - q, 3);
}

static int have_ssse3 = -1;
#endif

static void flip_row(uint8_t *dst, const uint8_t *src, size_t w, size_t c)
{
#ifdef PREP_X86
    if (c == 3) {
        if (have_ssse3 < 0) {
            init_masks();
            __builtin_cpu_init();
            have_ssse3 = __builtin_cpu_supports("ssse3") ? 1 : 0;
        }
        if (have_ssse3) {
            flip_row3_ssse3(dst, src, w);
            return;
        }
    }
#endif
    flip_row_scalar(dst, src, w, c);
}

/* Which path flip_row takes for c bytes a pixel (for tests and the bench). */
const char *prep_window_path(size_t c)
{
#ifdef PREP_X86
    uint8_t px[3] = {0};
    flip_row(px, px, 1, 3); /* sets have_ssse3 */
    if (c == 3 && have_ssse3)
        return "ssse3";
#endif
    (void)c;
    return "scalar";
}

/*
 * The window of h rows, w pixels of c bytes from column x0, of rows
 * stride bytes apart at src, into dst (h*w*c bytes, packed), mirrored
 * top-bottom when fy and left-right when fx.
 */
void prep_copy_window(uint8_t *dst, const uint8_t *src, size_t stride, size_t h, size_t w, size_t c,
                      size_t x0, int fy, int fx)
{
    size_t row = w * c;
    for (size_t r = 0; r < h; r++) {
        const uint8_t *s = src + r * stride + x0 * c;
        uint8_t *d = dst + (fy ? h - 1 - r : r) * row;
        if (fx)
            flip_row(d, s, w, c);
        else
            memcpy(d, s, row);
    }
}

/* preadv of n vectors at off, to the end: 0, -errno, or 1 if the file ends first. */
static int preadv_full(int fd, struct iovec *iov, int n, off_t off)
{
    while (n > 0) {
        ssize_t k = preadv(fd, iov, n, off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (k == 0)
            return 1;
        off += k;
        while (n > 0 && (size_t)k >= iov->iov_len) {
            k -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= (size_t)k;
        }
    }
    return 0;
}

/*
 * The window of the rows read into dst itself (h rows stride bytes apart,
 * from dst), moved into place: row r's window goes to r*w*c, never past
 * the start of a later row's, so rows are done in order; a mirrored row
 * whose source and place overlap goes through tmp (w*c bytes).
 */
static void window_in_place(uint8_t *dst, size_t stride, size_t h, size_t w, size_t c, size_t x0, int fx,
                            uint8_t *tmp)
{
    size_t row = w * c;
    for (size_t r = 0; r < h; r++) {
        uint8_t *s = dst + r * stride + x0 * c, *d = dst + r * row;
        if (fx && s < d + row) { /* overlapping (the first rows) */
            memcpy(tmp, s, row);
            flip_row(d, tmp, w, c);
        } else if (fx) {
            flip_row(d, s, w, c);
        } else if (d != s) {
            memmove(d, s, row);
        }
    }
}

/*
 * Read n windows into a batch of dst_n slots of dst_nb bytes: sample t's
 * window starts at byte offs[t] of fds[t] (its first row; rows stride
 * bytes apart, W = stride/c pixels) and goes to slot pos[t] (increasing),
 * h rows of w pixels from column x0[t], mirrored per fy[t], fx[t].
 *
 * One preadv a sample, of its h whole rows (a vector per row costs the
 * kernel more than a copy): where spill[t] says the slots after pos[t]
 * that the rows overrun are filled later by this call, into the slot
 * itself, then moved into place while the bytes are in the CPU cache; so
 * the batch is written about once, as reading stored windows would.
 * Otherwise (the last slots, slots another call fills), or when rows are
 * mirrored top-bottom, through scratch (h*stride bytes).
 * Returns 0, or -errno / 1 (the file ends before the window: it changed
 * under the reader) with *failed = t.
 */
int prep_read_windows(size_t n, const int32_t *fds, const int64_t *offs, size_t stride, uint8_t *dst,
                      size_t dst_nb, size_t dst_n, const int64_t *pos, size_t h, size_t w, size_t c,
                      const int64_t *x0, const uint8_t *fy, const uint8_t *fx, const uint8_t *spill,
                      uint8_t *scratch, int64_t *failed)
{
    size_t span = h * stride;
    for (size_t t = 0; t < n; t++) {
        uint8_t *slot = dst + (size_t)pos[t] * dst_nb;
        int direct = spill[t] && !fy[t] && (size_t)pos[t] * dst_nb + span <= dst_n * dst_nb;
        struct iovec v = {direct ? slot : scratch, span};
        int rc = preadv_full(fds[t], &v, 1, (off_t)offs[t]);
        if (rc != 0) {
            *failed = (int64_t)t;
            return rc;
        }
        if (direct)
            window_in_place(slot, stride, h, w, c, (size_t)x0[t], fx[t], scratch);
        else
            prep_copy_window(slot, scratch, stride, h, w, c, (size_t)x0[t], fy[t], fx[t]);
    }
    return 0;
}
