/* make_restart rewrites a JPEG's coefficients, unchanged, as a progressive
 * JPEG with restart markers (what `jpegtran -progressive -restart N` does;
 * Pillow cannot write restart markers): every MCU (restart1.jpg) and every
 * 7 MCUs (restart7.jpg) of testdata/progressive/rgb420.jpg, and every 5
 * MCUs of the greyscale one (restart5_grey.jpg). It writes the same three
 * as sequential JPEGs under testdata/sequential, with rgb422.jpg's
 * coefficients as one (rgb422.jpg) and rgb420.jpg's as one of three scans,
 * a component each (noninterleaved.jpg): sequential too, but rarer.
 * Build and run from the repository root (libjpeg62-turbo-dev):
 *   gcc -O2 -o /tmp/make_restart testdata/make_restart.c -ljpeg && /tmp/make_restart */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

enum { progressive, interleaved, noninterleaved };

static int transcode(const char *in, const char *out, unsigned int interval, int mode) {
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
	jpeg_scan_info scans[MAX_COMPONENTS];
	if (mode == progressive) {
		jpeg_simple_progression(&c);
	} else if (mode == noninterleaved) {
		for (int i = 0; i < c.num_components; i++) {
			scans[i] = (jpeg_scan_info){.comps_in_scan = 1, .component_index = {i}, .Ss = 0, .Se = 63, .Ah = 0, .Al = 0};
		}
		c.scan_info = scans;
		c.num_scans = c.num_components;
	}
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
	return transcode("testdata/progressive/rgb420.jpg", "testdata/progressive/restart1.jpg", 1, progressive) ||
	       transcode("testdata/progressive/rgb420.jpg", "testdata/progressive/restart7.jpg", 7, progressive) ||
	       transcode("testdata/progressive/grey.jpg", "testdata/progressive/restart5_grey.jpg", 5, progressive) ||
	       transcode("testdata/progressive/rgb420.jpg", "testdata/sequential/restart1.jpg", 1, interleaved) ||
	       transcode("testdata/progressive/rgb420.jpg", "testdata/sequential/restart7.jpg", 7, interleaved) ||
	       transcode("testdata/progressive/grey.jpg", "testdata/sequential/restart5_grey.jpg", 5, interleaved) ||
	       transcode("testdata/progressive/rgb422.jpg", "testdata/sequential/rgb422.jpg", 0, interleaved) ||
	       transcode("testdata/progressive/rgb420.jpg", "testdata/sequential/noninterleaved.jpg", 0, noninterleaved);
}
