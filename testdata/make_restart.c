/* make_restart rewrites a JPEG's coefficients, unchanged, as a progressive
 * JPEG with restart markers (what `jpegtran -progressive -restart N` does;
 * Pillow cannot write restart markers): every MCU (restart1.jpg) and every
 * 7 MCUs (restart7.jpg) of testdata/progressive/rgb420.jpg, and every 5
 * MCUs of the greyscale one (restart5_grey.jpg).
 * Build and run from the repository root (libjpeg62-turbo-dev):
 *   gcc -O2 -o /tmp/make_restart testdata/make_restart.c -ljpeg && /tmp/make_restart */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

static int transcode(const char *in, const char *out, unsigned int interval) {
	FILE *fi = fopen(in, "rb");
	if (!fi) {
		perror(in);
		return 1;
	}
	FILE *fo = fopen(out, "wb");
	if (!fo) {
		perror(out);
		return 1;
	}
	struct jpeg_decompress_struct d;
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	d.err = jpeg_std_error(&e);
	c.err = jpeg_std_error(&e);
	jpeg_create_decompress(&d);
	jpeg_create_compress(&c);
	jpeg_stdio_src(&d, fi);
	jpeg_read_header(&d, TRUE);
	jvirt_barray_ptr *coefs = jpeg_read_coefficients(&d);
	jpeg_copy_critical_parameters(&d, &c);
	jpeg_simple_progression(&c);
	c.restart_interval = interval;
	c.optimize_coding = TRUE;
	jpeg_stdio_dest(&c, fo);
	jpeg_write_coefficients(&c, coefs);
	jpeg_finish_compress(&c);
	jpeg_finish_decompress(&d);
	jpeg_destroy_compress(&c);
	jpeg_destroy_decompress(&d);
	fclose(fi);
	return fclose(fo) != 0;
}

int main(void) {
	return transcode("testdata/progressive/rgb420.jpg", "testdata/progressive/restart1.jpg", 1) ||
	       transcode("testdata/progressive/rgb420.jpg", "testdata/progressive/restart7.jpg", 7) ||
	       transcode("testdata/progressive/grey.jpg", "testdata/progressive/restart5_grey.jpg", 5);
}
