/* make_ycck writes testdata/edge/ycck_420.jpg: the 48×32 test card of
 * make_images.py as an Adobe YCCK JPEG whose Y is sampled 2×2 and C, C, K
 * 1×1, a layout image/jpeg refuses and Photoshop-era files use.
 * Build and run from the repository root (libjpeg62-turbo-dev):
 *   gcc -O2 -o /tmp/make_ycck testdata/make_ycck.c -ljpeg && /tmp/make_ycck */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

int main(void) {
	const int w = 48, h = 32;
	FILE *f = fopen("testdata/edge/ycck_420.jpg", "wb");
	if (!f) {
		perror("testdata/edge/ycck_420.jpg");
		return 1;
	}
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	jpeg_stdio_dest(&c, f);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 4;
	c.in_color_space = JCS_CMYK;
	jpeg_set_defaults(&c);
	jpeg_set_colorspace(&c, JCS_YCCK); /* writes the Adobe marker, transform 2 */
	jpeg_set_quality(&c, 95, TRUE);
	c.comp_info[0].h_samp_factor = 2;
	c.comp_info[0].v_samp_factor = 2;
	for (int i = 1; i < 4; i++) {
		c.comp_info[i].h_samp_factor = 1;
		c.comp_info[i].v_samp_factor = 1;
	}
	jpeg_start_compress(&c, TRUE);
	JSAMPLE row[48 * 4];
	while (c.next_scanline < (JDIMENSION)h) {
		int y = c.next_scanline;
		for (int x = 0; x < w; x++) {
			/* gradient(): red by x, green by y, a checker in blue, a red
			 * top-left corner. Adobe stores ink inverted: C = 255 - (255 - R)
			 * = R, and no black (K stored as 255). */
			int r = x * 255 / (w - 1), g = y * 255 / (h - 1), b = ((x / 8) + (y / 8)) % 2 * 200;
			if (y < h / 4 && x < w / 4) {
				r = 255, g = 0, b = 0;
			}
			row[4 * x] = r, row[4 * x + 1] = g, row[4 * x + 2] = b, row[4 * x + 3] = 255;
		}
		JSAMPROW rows[1] = {row};
		jpeg_write_scanlines(&c, rows, 1);
	}
	jpeg_finish_compress(&c);
	jpeg_destroy_compress(&c);
	return fclose(f) != 0;
}
