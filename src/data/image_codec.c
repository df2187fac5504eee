/* JPEG (libjpeg-turbo) and PNG (libpng) decoding and encoding in memory, with
 * the colour handling of OpenCV's imdecode/imencode that Caffe relies on. */
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h: it uses FILE and size_t */
#include <jerror.h>
#include <png.h>

#include "core/fileio.h"
#include "data/image.h"

#define CT_IMAGE_MAX_SIDE 65535
#define CT_IMAGE_MAX_BYTES ((size_t)1 << 31)
#define CT_IMAGE_FILE_MAX ((size_t)1 << 30)

ct_image_format ct_image_sniff(const void *buf, size_t len) {
  const unsigned char *b = buf;
  if (len >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return CT_IMAGE_JPEG;
  if (len >= 8 && png_sig_cmp((png_const_bytep)b, 0, 8) == 0) return CT_IMAGE_PNG;
  return CT_IMAGE_UNKNOWN;
}

static ct_status unknown_format(const void *buf, size_t len, ct_error *err) {
  const unsigned char *b = buf;
  char start[32] = "";
  size_t o = 0;
  for (size_t i = 0; i < len && i < 4; i++)
    o += (size_t)snprintf(start + o, sizeof start - o, " %02x", b[i]);
  if (len == 0) return ct_error_set(err, CT_ERR_PARSE, "not a JPEG or PNG image (0 bytes)");
  return ct_error_set(err, CT_ERR_PARSE, "not a JPEG or PNG image (%zu bytes, starting%s)", len,
                      start);
}

static ct_status check_size(int h, int w, int c, ct_error *err) {
  if (h <= 0 || w <= 0 || h > CT_IMAGE_MAX_SIDE || w > CT_IMAGE_MAX_SIDE ||
      (size_t)h * (size_t)w * (size_t)c >= CT_IMAGE_MAX_BYTES)
    return ct_error_set(err, CT_ERR_INVALID, "image too large or empty (%d x %d)", w, h);
  return CT_OK;
}

void ct_image_alloc(ct_image *img, int h, int w, int c) {
  img->h = h;
  img->w = w;
  img->c = c;
  img->data = ct_xcalloc((size_t)h * w * c + 1, 1);
}

void ct_image_free(ct_image *img) {
  if (!img) return;
  free(img->data);
  img->data = NULL;
  img->h = img->w = img->c = 0;
}

/* ------------------------------------------------------------------ JPEG */
typedef struct jpeg_err {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
  unsigned char *dest;     /* encoding: libjpeg's output buffer (malloc'd) */
  unsigned long dest_len;
} jpeg_err;

static void jpeg_on_error(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  e->pub.format_message(cinfo, e->msg);
  longjmp(e->jb, 1);
}

/* Warnings pass as in OpenCV, except running out of data: a truncated file
 * is an error rather than an image padded with gray. */
static void jpeg_on_message(j_common_ptr cinfo, int level) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  if (level < 0 && e->pub.msg_code == JWRN_JPEG_EOF) {
    e->pub.format_message(cinfo, e->msg);
    strncat(e->msg, " (truncated data)", sizeof e->msg - strlen(e->msg) - 1);
    longjmp(e->jb, 1);
  }
}

static void jpeg_err_init(struct jpeg_decompress_struct *cinfo, jpeg_err *e) {
  cinfo->err = jpeg_std_error(&e->pub);
  e->pub.error_exit = jpeg_on_error;
  e->pub.emit_message = jpeg_on_message;
  e->msg[0] = 0;
}

/* CMYK / YCCK as Adobe writes them (inverted), to BGR like OpenCV. */
static void cmyk_to_bgr(const uint8_t *cmyk, int w, uint8_t *bgr) {
  for (int x = 0; x < w; x++, cmyk += 4, bgr += 3) {
    int k = cmyk[3];
    bgr[2] = (uint8_t)(k - (((255 - cmyk[0]) * k) >> 8));
    bgr[1] = (uint8_t)(k - (((255 - cmyk[1]) * k) >> 8));
    bgr[0] = (uint8_t)(k - (((255 - cmyk[2]) * k) >> 8));
  }
}

static ct_status jpeg_decode(const void *buf, size_t len, ct_color_mode mode, ct_image *out,
                             bool header_only, int *ph, int *pw, int *pc, ct_error *err) {
  struct jpeg_decompress_struct cinfo;
  jpeg_err e;
  uint8_t *volatile row = NULL;
  ct_image *volatile img = out;
  jpeg_err_init(&cinfo, &e);
  if (setjmp(e.jb)) {
    jpeg_destroy_decompress(&cinfo);
    free(row);
    if (img) ct_image_free(img);
    return ct_error_set(err, CT_ERR_PARSE, "corrupt JPEG: %s", e.msg);
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, (const unsigned char *)buf, (unsigned long)len);
  jpeg_read_header(&cinfo, TRUE);
  bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  int stored_c = cinfo.num_components == 1 ? 1 : 3;
  int c = mode == CT_COLOR_FORCE_COLOR ? 3 : mode == CT_COLOR_FORCE_GRAY ? 1 : stored_c;
  if (header_only) {
    *ph = (int)cinfo.image_height;
    *pw = (int)cinfo.image_width;
    *pc = c;
    jpeg_destroy_decompress(&cinfo);
    return CT_OK;
  }
  int h = (int)cinfo.image_height, w = (int)cinfo.image_width;
  ct_status s = check_size(h, w, c, err);
  if (s != CT_OK) {
    jpeg_destroy_decompress(&cinfo);
    return s;
  }
  if (cmyk)
    cinfo.out_color_space = JCS_CMYK;
  else
    cinfo.out_color_space = c == 3 ? JCS_EXT_BGR : JCS_GRAYSCALE;
  jpeg_start_decompress(&cinfo);
  ct_image_alloc(out, h, w, c);
  if (cmyk) row = ct_xcalloc((size_t)w * 4, 1);
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t *dst = out->data + (size_t)cinfo.output_scanline * w * c;
    JSAMPROW rows[1] = {cmyk ? row : dst};
    jpeg_read_scanlines(&cinfo, rows, 1);
    if (!cmyk) continue;
    if (c == 3) {
      cmyk_to_bgr(row, w, dst);
    } else {
      uint8_t bgr[3];
      for (int x = 0; x < w; x++) {
        cmyk_to_bgr(row + 4 * x, 1, bgr);
        dst[x] = (uint8_t)((bgr[0] * 1868 + bgr[1] * 9617 + bgr[2] * 4899 + (1 << 13)) >> 14);
      }
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  free(row);
  return CT_OK;
}

/* ------------------------------------------------------------------- PNG */
typedef struct png_io {
  const uint8_t *buf;
  size_t len, pos;
  char msg[256];
  /* writing */
  uint8_t *out;
  size_t out_len, out_cap;
} png_io;

static void png_on_error(png_structp png, png_const_charp msg) {
  png_io *io = png_get_error_ptr(png);
  snprintf(io->msg, sizeof io->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg;
}

static void png_read_mem(png_structp png, png_bytep dst, png_size_t n) {
  png_io *io = png_get_io_ptr(png);
  if (n > io->len - io->pos) png_error(png, "unexpected end of data (truncated)");
  memcpy(dst, io->buf + io->pos, n);
  io->pos += n;
}

static ct_status png_decode(const void *buf, size_t len, ct_color_mode mode, ct_image *out,
                            bool header_only, int *ph, int *pw, int *pc, ct_error *err) {
  png_io io = {.buf = buf, .len = len};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &io, png_on_error, png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_read_struct(&png, NULL, NULL);
    return ct_error_set(err, CT_ERR_NOMEM, "out of memory starting libpng");
  }
  png_bytep *volatile rows = NULL;
  ct_image *volatile img = NULL;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    if (img) ct_image_free(img);
    return ct_error_set(err, CT_ERR_PARSE, "corrupt PNG: %s", io.msg);
  }
  png_set_read_fn(png, &io, png_read_mem);
  png_read_info(png, info);
  int w = (int)png_get_image_width(png, info), h = (int)png_get_image_height(png, info);
  int bit_depth = png_get_bit_depth(png, info), color_type = png_get_color_type(png, info);
  bool stored_color = (color_type & PNG_COLOR_MASK_COLOR) != 0;
  int c = mode == CT_COLOR_FORCE_COLOR ? 3 : mode == CT_COLOR_FORCE_GRAY ? 1 : stored_color ? 3 : 1;
  if (header_only) {
    *ph = h;
    *pw = w;
    *pc = c;
    png_destroy_read_struct(&png, &info, NULL);
    return CT_OK;
  }
  ct_status s = check_size(h, w, c, err);
  if (s != CT_OK) {
    png_destroy_read_struct(&png, &info, NULL);
    return s;
  }
  if (bit_depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (!stored_color && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  /* Colour is read as BGR; gray from colour is computed afterwards with
   * cvtColor's weights (libpng's own conversion depends on gamma chunks). */
  int read_c = stored_color ? 3 : c;
  if (stored_color)
    png_set_bgr(png);
  else if (c == 3)
    png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != (size_t)w * read_c) {
    png_destroy_read_struct(&png, &info, NULL);
    return ct_error_set(err, CT_ERR_UNSUPPORTED, "PNG layout not supported (color type %d, depth %d)",
                        color_type, bit_depth);
  }
  ct_image_alloc(out, h, w, read_c);
  img = out;
  rows = ct_xcalloc((size_t)h, sizeof *rows);
  for (int y = 0; y < h; y++) rows[y] = out->data + (size_t)y * w * read_c;
  png_read_image(png, rows);
  png_read_end(png, NULL);
  png_destroy_read_struct(&png, &info, NULL);
  free(rows);
  if (read_c != c) {
    ct_image gray;
    ct_image_to_gray(out, &gray);
    ct_image_free(out);
    *out = gray;
  }
  return CT_OK;
}

/* ------------------------------------------------------------ public API */
ct_status ct_image_probe(const void *buf, size_t len, int *h, int *w, int *c, ct_error *err) {
  switch (ct_image_sniff(buf, len)) {
    case CT_IMAGE_JPEG: return jpeg_decode(buf, len, CT_COLOR_NATIVE, NULL, true, h, w, c, err);
    case CT_IMAGE_PNG: return png_decode(buf, len, CT_COLOR_NATIVE, NULL, true, h, w, c, err);
    default: return unknown_format(buf, len, err);
  }
}

ct_status ct_image_decode(const void *buf, size_t len, ct_color_mode mode, ct_image *out,
                          ct_error *err) {
  memset(out, 0, sizeof *out);
  int h, w, c;
  switch (ct_image_sniff(buf, len)) {
    case CT_IMAGE_JPEG: return jpeg_decode(buf, len, mode, out, false, &h, &w, &c, err);
    case CT_IMAGE_PNG: return png_decode(buf, len, mode, out, false, &h, &w, &c, err);
    default: return unknown_format(buf, len, err);
  }
}

ct_status ct_image_read_file(const char *path, ct_color_mode mode, ct_image *out, ct_error *err) {
  memset(out, 0, sizeof *out);
  char *bytes;
  size_t len;
  CT_TRY(ct_file_read_all(path, &bytes, &len, CT_IMAGE_FILE_MAX, err));
  ct_status s = ct_image_decode(bytes, len, mode, out, err);
  free(bytes);
  if (s != CT_OK) ct_error_prefix(err, "%s", path);
  return s;
}

ct_status ct_image_encode_jpeg(const ct_image *img, int quality, uint8_t **buf, size_t *len,
                               ct_error *err) {
  *buf = NULL;
  *len = 0;
  if (quality < 1 || quality > 100)
    return ct_error_set(err, CT_ERR_INVALID, "JPEG quality %d is not in 1..100", quality);
  if (img->c != 1 && img->c != 3)
    return ct_error_set(err, CT_ERR_INVALID, "cannot encode a %d-channel image (1 or 3)", img->c);
  struct jpeg_compress_struct cinfo;
  jpeg_err e = {0};
  cinfo.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = jpeg_on_error;
  if (setjmp(e.jb)) {
    jpeg_destroy_compress(&cinfo);
    free(e.dest);
    return ct_error_set(err, CT_ERR_IO, "JPEG encoding failed: %s", e.msg);
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &e.dest, &e.dest_len);
  cinfo.image_width = (JDIMENSION)img->w;
  cinfo.image_height = (JDIMENSION)img->h;
  cinfo.input_components = img->c;
  cinfo.in_color_space = img->c == 3 ? JCS_EXT_BGR : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = img->data + (size_t)cinfo.next_scanline * img->w * img->c;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  *buf = e.dest;
  *len = e.dest_len;
  return CT_OK;
}

static void png_write_mem(png_structp png, png_bytep src, png_size_t n) {
  png_io *io = png_get_io_ptr(png);
  if (io->out_len + n > io->out_cap) {
    size_t cap = io->out_cap ? io->out_cap * 2 : 65536;
    while (cap < io->out_len + n) cap *= 2;
    io->out = ct_xrealloc(io->out, cap);
    io->out_cap = cap;
  }
  memcpy(io->out + io->out_len, src, n);
  io->out_len += n;
}

static void png_flush_mem(png_structp png) { (void)png; }

ct_status ct_image_encode_png(const ct_image *img, int level, uint8_t **buf, size_t *len,
                              ct_error *err) {
  *buf = NULL;
  *len = 0;
  if (level < -1 || level > 9)
    return ct_error_set(err, CT_ERR_INVALID, "PNG compression level %d is not in -1..9", level);
  if (img->c != 1 && img->c != 3)
    return ct_error_set(err, CT_ERR_INVALID, "cannot encode a %d-channel image (1 or 3)", img->c);
  png_io io = {0};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &io, png_on_error, png_on_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    return ct_error_set(err, CT_ERR_NOMEM, "out of memory starting libpng");
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    free(io.out);
    return ct_error_set(err, CT_ERR_IO, "PNG encoding failed: %s", io.msg);
  }
  png_set_write_fn(png, &io, png_write_mem, png_flush_mem);
  png_set_IHDR(png, info, (png_uint_32)img->w, (png_uint_32)img->h, 8,
               img->c == 3 ? PNG_COLOR_TYPE_RGB : PNG_COLOR_TYPE_GRAY, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (level >= 0) png_set_compression_level(png, level);
  png_write_info(png, info);
  if (img->c == 3) png_set_bgr(png);
  for (int y = 0; y < img->h; y++)
    png_write_row(png, img->data + (size_t)y * img->w * img->c);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  *buf = io.out;
  *len = io.out_len;
  return CT_OK;
}
