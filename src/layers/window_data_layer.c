/* WindowData: Caffe's WindowDataLayer (R-CNN fine-tuning), batches of
 * windows cropped out of images and warped to crop_size x crop_size.
 *
 * The window file (window_data_param.source) repeats, for images 0, 1, ...:
 *     # <image index>
 *     <image path>          (relative to root_folder)
 *     <channels> <height> <width>
 *     <number of windows>
 *     <class index> <overlap> <x1> <y1> <x2> <y2>      (one line per window)
 * with inclusive 0-based pixel corners.  A window whose overlap is at least
 * fg_threshold is foreground (its class must be above 0); one below
 * bg_threshold is background (class and overlap become 0); the others are
 * not used.
 *
 * Each batch holds batch_size - floor(batch_size * fg_fraction) background
 * windows and then the foreground ones, each drawn uniformly (with
 * replacement) from its set.  A window is cut out of its image as Caffe
 * cuts it: with context_pad > 0 or crop_mode "square" the box is first
 * widened about its centre (to a square in "square" mode, then by
 * crop_size / (crop_size - 2 context_pad)) so that after warping
 * context_pad pixels of context surround it; the part outside the image is
 * left as zeros and the part inside is warped (OpenCV's bilinear
 * arithmetic) to its share of the crop.  Mirroring flips the warped crop
 * (and its padding).  Each value becomes (pixel - mean) * scale with the
 * mean from transform_param's mean_file (centred on the crop) or
 * mean_value; the padding stays 0.  Tops: data (batch_size, C, crop_size,
 * crop_size) in BGR order for colour images, label (batch_size).
 *
 * Settings.  crop_size, mirror and the mean come from transform_param, as
 * in Caffe; window_data_param's own crop_size, mirror and mean_file (the
 * old places, where V1 nets keep them) are used when transform_param does
 * not give them.  The scale is window_data_param.scale, as in Caffe, or
 * transform_param.scale when only that one is given (Caffe would ignore
 * it); two different values are an error.  Images decode with the window
 * file's channel count (1: gray, 3: BGR) unless transform_param.force_gray
 * or force_color says otherwise.  cache_images keeps the encoded files in
 * memory.
 *
 * Randomness.  Batches come from the prefetching pipeline (layers/data_feed.h):
 * item j of batch e is record j of epoch e, whose window and mirror are
 * drawn from that record's generator, so a run is reproducible and a
 * snapshot resumes it exactly.  Data-parallel workers do not split the
 * stream (each batch must keep its foreground share): each draws its own
 * batches from a seed of its rank. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/log.h"
#include "layers/data_feed.h"
#include "data/image.h"
#include "data/transform.h"
#include "layers/layer.h"

typedef struct window {
  int image;            /* index into the images */
  int label;
  int x1, y1, x2, y2;   /* inclusive corners */
  int line;             /* in the window file */
} window;

typedef struct window_image {
  char *path;
  int c, h, w;          /* as the window file gives them */
  char *bytes;          /* the encoded file, with cache_images */
  size_t nbytes;
} window_image;

typedef struct window_priv {
  ct_feed feed;         /* first: the shared ops in layers/data_feed.h find it at l->priv */
  char *source;
  window_image *images; /* (nimages) */
  size_t nimages;
  window *fg, *bg;      /* (nfg), (nbg) */
  size_t nfg, nbg;
  int batch, num_fg, crop, context_pad;
  bool square, mirror;
  float scale;
  ct_color_mode color;
  ct_transform *tf;     /* holds the mean */
  const float *mean;    /* mean_file (mean_c, mean_h, mean_w), or NULL */
  int mean_c, mean_h, mean_w, mean_off;
  const float *mean_values; /* (n_mean_values), or NULL */
  int n_mean_values;
} window_priv;
_Static_assert(offsetof(window_priv, feed) == 0, "ct_feed_* ops read the feed at l->priv");

static void window_destroy(ct_layer *l) {
  window_priv *p = l->priv;
  if (!p) return;
  ct_feed_stop(&p->feed);
  ct_transform_free(p->tf);
  for (size_t i = 0; i < p->nimages; i++) {
    free(p->images[i].path);
    free(p->images[i].bytes);
  }
  free(p->images);
  free(p->fg);
  free(p->bg);
  free(p->source);
  free(p);
  l->priv = NULL;
}

/* ---------------------------------------------------------------- the window file */

typedef struct tokens {
  char *at;
  int line;
  int tok_line;  /* the line of the last token */
} tokens;

/* The next whitespace-separated token (NUL-terminated in place), or NULL at
 * the end. */
static char *next_token(tokens *t) {
  while (*t->at && isspace((unsigned char)*t->at)) {
    if (*t->at == '\n') t->line++;
    t->at++;
  }
  if (!*t->at) return NULL;
  char *start = t->at;
  while (*t->at && !isspace((unsigned char)*t->at)) t->at++;
  t->tok_line = t->line;
  if (*t->at) {
    if (*t->at == '\n') t->line++;
    *t->at++ = 0;
  }
  return start;
}

static ct_status read_long(tokens *t, const char *src, const char *what, long lo, long hi, long *out,
                           ct_error *err) {
  char *tok = next_token(t), *end = NULL;
  if (!tok) return ct_error_set(err, CT_ERR_PARSE, "%s: the file ends where %s should be", src, what);
  errno = 0;
  long v = strtol(tok, &end, 10);
  if (end == tok || *end || errno || v < lo || v > hi)
    return ct_error_set(err, CT_ERR_PARSE,
                        "%s:%d: expected %s (an integer from %ld to %ld), got '%.40s'", src,
                        t->tok_line, what, lo, hi, tok);
  *out = v;
  return CT_OK;
}

static ct_status read_float(tokens *t, const char *src, const char *what, float *out, ct_error *err) {
  char *tok = next_token(t), *end = NULL;
  if (!tok) return ct_error_set(err, CT_ERR_PARSE, "%s: the file ends where %s should be", src, what);
  errno = 0;
  float v = strtof(tok, &end);
  if (end == tok || *end || errno || !isfinite(v))
    return ct_error_set(err, CT_ERR_PARSE, "%s:%d: expected %s (a number), got '%.40s'", src,
                        t->tok_line, what, tok);
  *out = v;
  return CT_OK;
}

static void push_window(window **set, size_t *n, const window *w) {
  if ((*n & (*n - 1)) == 0) *set = ct_xrealloc(*set, (*n ? 2 * *n : 1) * sizeof **set);
  (*set)[(*n)++] = *w;
}

/* One window line of image `image`, sorted by overlap into fg / bg. */
static ct_status read_window(window_priv *p, tokens *t, const char *src, int image, float fg_th,
                             float bg_th, long *hist, ct_error *err) {
  long v[5];
  float overlap = 0.0f;
  CT_TRY(read_long(t, src, "a class index", 0, 1 << 30, &v[0], err));
  const int line = t->tok_line;
  CT_TRY(read_float(t, src, "an overlap", &overlap, err));
  static const char *const corner[4] = {"x1", "y1", "x2", "y2"};
  for (int k = 1; k < 5; k++)
    CT_TRY(read_long(t, src, corner[k - 1], -(1L << 30), 1L << 30, &v[k], err));
  window w = {image, (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], line};
  if (w.x2 < w.x1 || w.y2 < w.y1)
    return ct_error_set(err, CT_ERR_PARSE, "%s:%d: the window (%d, %d, %d, %d) has x2 < x1 or y2 < y1",
                        src, line, w.x1, w.y1, w.x2, w.y2);
  if (overlap >= fg_th) {
    if (w.label <= 0)
      return ct_error_set(err, CT_ERR_PARSE,
                          "%s:%d: a foreground window (overlap %g >= fg_threshold %g) needs a class "
                          "above 0, got %d",
                          src, line, (double)overlap, (double)fg_th, w.label);
    push_window(&p->fg, &p->nfg, &w);
    hist[w.label < 1000 ? w.label : 1000]++;
  } else if (overlap < bg_th) {
    w.label = 0;
    push_window(&p->bg, &p->nbg, &w);
    hist[0]++;
  }
  return CT_OK;
}

/* Reads the window file into images and the fg / bg sets. */
static ct_status read_windows(window_priv *p, const Caffe__WindowDataParameter *wp, ct_error *err) {
  const char *src = wp->source, *root = wp->root_folder ? wp->root_folder : "";
  char *text;
  size_t len;
  CT_TRY(ct_file_read_all(src, &text, &len, (size_t)1 << 31, err));
  tokens t = {text, 1, 1};
  long *hist = ct_xcalloc(1001, sizeof *hist);
  size_t cap = 0;
  ct_status s = CT_OK;
  char *tok;
  while (s == CT_OK && (tok = next_token(&t))) {
    const size_t i = p->nimages;
    long index, dims[3], n;
    if (strcmp(tok, "#") != 0) {
      s = ct_error_set(err, CT_ERR_PARSE, "%s:%d: expected '# %zu' (the next image), got '%.40s'",
                       src, t.tok_line, i, tok);
      break;
    }
    if ((s = read_long(&t, src, "the image index", 0, 1L << 30, &index, err)) != CT_OK) break;
    if ((size_t)index != i) {
      s = ct_error_set(err, CT_ERR_PARSE, "%s:%d: image index %ld out of order (expected %zu)", src,
                       t.tok_line, index, i);
      break;
    }
    char *path = next_token(&t);
    if (!path) {
      s = ct_error_set(err, CT_ERR_PARSE, "%s: the file ends where image %zu's path should be", src, i);
      break;
    }
    if (i == cap) {
      cap = cap ? 2 * cap : 64;
      p->images = ct_xrealloc(p->images, cap * sizeof *p->images);
    }
    window_image *im = &p->images[p->nimages++];
    memset(im, 0, sizeof *im);
    size_t plen = strlen(root) + strlen(path) + 1;
    im->path = ct_xcalloc(plen, 1);
    snprintf(im->path, plen, "%s%s", root, path);
    static const char *const dim_names[3] = {"the channels", "the height", "the width"};
    for (int k = 0; k < 3 && s == CT_OK; k++)
      s = read_long(&t, src, dim_names[k], 1, 1 << 16, &dims[k], err);
    if (s == CT_OK && dims[0] != 1 && dims[0] != 3)
      s = ct_error_set(err, CT_ERR_PARSE, "%s:%d: image %zu has %ld channels (1 or 3)", src,
                       t.tok_line, i, dims[0]);
    if (s == CT_OK && i > 0 && dims[0] != p->images[0].c)
      s = ct_error_set(err, CT_ERR_PARSE,
                       "%s:%d: image %zu has %ld channels, image 0 has %d (they must agree)", src,
                       t.tok_line, i, dims[0], p->images[0].c);
    if (s != CT_OK) break;
    im->c = (int)dims[0];
    im->h = (int)dims[1];
    im->w = (int)dims[2];
    if ((s = read_long(&t, src, "the number of windows", 0, 1L << 30, &n, err)) != CT_OK) break;
    for (long k = 0; k < n && s == CT_OK; k++)
      s = read_window(p, &t, src, (int)i, wp->fg_threshold, wp->bg_threshold, hist, err);
    if (s == CT_OK && wp->cache_images) {
      s = ct_file_read_all(im->path, &im->bytes, &im->nbytes, (size_t)1 << 31, err);
      if (s != CT_OK) ct_error_prefix(err, "%s: image %zu", src, i);
    }
  }
  free(text);
  if (s == CT_OK && p->nimages == 0)
    s = ct_error_set(err, CT_ERR_PARSE, "%s: the window file is empty", src);
  if (s == CT_OK) {
    LOG_INFO("window file %s: %zu images, %zu foreground and %zu background windows", src,
             p->nimages, p->nfg, p->nbg);
    for (int c = 0; c <= 1000; c++)
      if (hist[c]) LOG_INFO("class %d%s has %ld samples", c, c == 1000 ? " and above" : "", hist[c]);
  }
  free(hist);
  return s;
}

/* ---------------------------------------------------------------- one window */

/* Caffe's geometry for window w of an image of img_h x img_w: the region of
 * the image to warp (x1..x2, y1..y2, inclusive), the warped size (out_h,
 * out_w; 0 when nothing of the image shows) and where it lands in the crop
 * (pad_h, pad_w). */
typedef struct warp_plan {
  int x1, y1, x2, y2;
  int out_h, out_w;
  int pad_h, pad_w;
} warp_plan;

static int max0(int v) { return v > 0 ? v : 0; }

static ct_status plan_warp(const window_priv *p, const window *w, bool mirror, int img_h, int img_w,
                           warp_plan *q, ct_error *err) {
  const int crop = p->crop;
  *q = (warp_plan){w->x1, w->y1, w->x2, w->y2, crop, crop, 0, 0};
  if (p->context_pad == 0 && !p->square) {
    if (q->x1 < 0 || q->y1 < 0 || q->x2 >= img_w || q->y2 >= img_h)
      return ct_error_set(err, CT_ERR_INVALID,
                          "%s:%d: the window (%d, %d, %d, %d) is not inside the %dx%d image %s",
                          p->source, w->line, w->x1, w->y1, w->x2, w->y2, img_w, img_h,
                          p->images[w->image].path);
    return CT_OK;
  }
  /* widen the box about its centre so that context_pad pixels of context
   * surround it once warped (float arithmetic, as Caffe's) */
  const float context_scale = (float)crop / (float)(crop - 2 * p->context_pad);
  float half_h = (float)(q->y2 - q->y1 + 1) / 2.0f, half_w = (float)(q->x2 - q->x1 + 1) / 2.0f;
  const float cx = (float)q->x1 + half_w, cy = (float)q->y1 + half_h;
  if (p->square) {
    if (half_h > half_w) half_w = half_h;
    else half_h = half_w;
  }
  q->x1 = (int)roundf(cx - half_w * context_scale);
  q->x2 = (int)roundf(cx + half_w * context_scale);
  q->y1 = (int)roundf(cy - half_h * context_scale);
  q->y2 = (int)roundf(cy + half_h * context_scale);
  /* clip to the image, keeping the extent beyond it as padding */
  const int unclipped_h = q->y2 - q->y1 + 1, unclipped_w = q->x2 - q->x1 + 1;
  int pad_x1 = max0(-q->x1), pad_y1 = max0(-q->y1);
  int pad_x2 = max0(q->x2 - img_w + 1), pad_y2 = max0(q->y2 - img_h + 1);
  q->x1 += pad_x1;
  q->x2 -= pad_x2;
  q->y1 += pad_y1;
  q->y2 -= pad_y2;
  if (q->x2 < q->x1 || q->y2 < q->y1)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s:%d: the window (%d, %d, %d, %d) does not meet the %dx%d image %s",
                        p->source, w->line, w->x1, w->y1, w->x2, w->y2, img_w, img_h,
                        p->images[w->image].path);
  const float scale_x = (float)crop / (float)unclipped_w, scale_y = (float)crop / (float)unclipped_h;
  q->out_w = (int)roundf((float)(q->x2 - q->x1 + 1) * scale_x);
  q->out_h = (int)roundf((float)(q->y2 - q->y1 + 1) * scale_y);
  pad_x1 = (int)roundf((float)pad_x1 * scale_x);
  pad_x2 = (int)roundf((float)pad_x2 * scale_x);
  pad_y1 = (int)roundf((float)pad_y1 * scale_y);
  q->pad_h = pad_y1;
  q->pad_w = mirror ? pad_x2 : pad_x1; /* the padding mirrors too */
  /* the warped region and its padding fit the crop (rounding may overshoot) */
  if (q->pad_h + q->out_h > crop) q->out_h = crop - q->pad_h;
  if (q->pad_w + q->out_w > crop) q->out_w = crop - q->pad_w;
  if (q->out_h < 0) q->out_h = 0;
  if (q->out_w < 0) q->out_w = 0;
  return CT_OK;
}

typedef struct window_thread {
  ct_image img, roi, warped;
} window_thread;

static ct_status window_thread_init(void *ctx, void **tstate, ct_error *err) {
  *tstate = ct_xcalloc(1, sizeof(window_thread));
  return CT_OK;
}

static void window_thread_free(void *ctx, void *tstate) { free(tstate); }

/* Warps window w of the decoded image t->img into out (C, crop, crop). */
static ct_status warp_window(const window_priv *p, window_thread *t, const window *w, bool mirror,
                             float *out, ct_error *err) {
  const ct_image *img = &t->img;
  warp_plan q;
  CT_TRY(plan_warp(p, w, mirror, img->h, img->w, &q, err));
  const int C = img->c, crop = p->crop;
  memset(out, 0, (size_t)C * crop * crop * sizeof *out);
  if (q.out_h <= 0 || q.out_w <= 0) return CT_OK;
  const int rh = q.y2 - q.y1 + 1, rw = q.x2 - q.x1 + 1;
  ct_image_alloc(&t->roi, rh, rw, C);
  for (int y = 0; y < rh; y++)
    memcpy(t->roi.data + (size_t)y * rw * C, img->data + ((size_t)(q.y1 + y) * img->w + q.x1) * C,
           (size_t)rw * C);
  ct_image_resize_bilinear(&t->roi, q.out_h, q.out_w, &t->warped);
  ct_image_free(&t->roi);
  const uint8_t *px = t->warped.data;
  for (int h = 0; h < q.out_h; h++)
    for (int x = 0; x < q.out_w; x++) {
      const int sx = mirror ? q.out_w - 1 - x : x; /* horizontal flip of the warped crop */
      for (int c = 0; c < C; c++) {
        const float pixel = px[((size_t)h * q.out_w + sx) * C + c];
        const int th = h + q.pad_h, tw = x + q.pad_w;
        float mean = 0.0f;
        if (p->mean)
          mean = p->mean[((size_t)c * p->mean_h + th + p->mean_off) * p->mean_w + tw + p->mean_off];
        else if (p->mean_values)
          mean = p->mean_values[p->n_mean_values == 1 ? 0 : c];
        out[((size_t)c * crop + th) * crop + tw] = (pixel - mean) * p->scale;
      }
    }
  ct_image_free(&t->warped);
  return CT_OK;
}

static ct_status window_load(void *ctx, void *tstate, size_t index, ct_rng *rng, float *data,
                             float *label, ct_error *err) {
  const window_priv *p = ctx;
  window_thread *t = tstate;
  const bool fg = (int)index >= p->batch - p->num_fg; /* background first, as Caffe */
  const window *w = fg ? &p->fg[ct_rng_below(rng, p->nfg)] : &p->bg[ct_rng_below(rng, p->nbg)];
  const bool mirror = p->mirror && ct_rng_below(rng, 2) != 0;
  const window_image *im = &p->images[w->image];
  ct_status s = im->bytes ? ct_image_decode(im->bytes, im->nbytes, p->color, &t->img, err)
                          : ct_image_read_file(im->path, p->color, &t->img, err);
  if (s != CT_OK) return ct_error_prefix(err, "%s: image %d", p->source, w->image);
  s = warp_window(p, t, w, mirror, data, err);
  ct_image_free(&t->img);
  *label = (float)w->label;
  return s;
}

/* ---------------------------------------------------------------- setup */

/* One setting given in two places (transform_param and window_data_param's
 * old field): the one given, and an error when both are given and differ. */
static ct_status pick_string(const char *name, const char *tp, const char *wp, const char **out,
                             ct_error *err) {
  const bool has_t = tp && tp[0], has_w = wp && wp[0];
  if (has_t && has_w && strcmp(tp, wp) != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "transform_param.%s '%s' and window_data_param.%s '%s' differ (give one)",
                        name, tp, name, wp);
  *out = has_t ? tp : has_w ? wp : NULL;
  return CT_OK;
}

static ct_status read_settings(window_priv *p, const ct_layer *l,
                               const Caffe__WindowDataParameter *wp, ct_error *err) {
  static const Caffe__TransformationParameter k_tp = CAFFE__TRANSFORMATION_PARAMETER__INIT;
  const Caffe__TransformationParameter *tp =
      l->param->transform_param ? l->param->transform_param : &k_tp;
  if (!wp->source || !wp->source[0])
    return ct_error_set(err, CT_ERR_INVALID, "window_data_param.source must be given");
  if (wp->batch_size == 0 || wp->batch_size > (1u << 24))
    return ct_error_set(err, CT_ERR_INVALID, "window_data_param.batch_size must be positive");
  if (tp->crop_size && wp->crop_size && tp->crop_size != wp->crop_size)
    return ct_error_set(err, CT_ERR_INVALID,
                        "transform_param.crop_size %u and window_data_param.crop_size %u differ "
                        "(give one)",
                        tp->crop_size, wp->crop_size);
  const unsigned crop = tp->crop_size ? tp->crop_size : wp->crop_size;
  if (crop == 0 || crop > (1u << 15))
    return ct_error_set(err, CT_ERR_INVALID,
                        "WindowData needs transform_param.crop_size, the size windows are warped "
                        "to");
  if (2 * wp->context_pad >= crop)
    return ct_error_set(err, CT_ERR_INVALID,
                        "window_data_param.context_pad %u leaves nothing of a %u crop for the window",
                        wp->context_pad, crop);
  if (!(wp->fg_fraction >= 0.0f && wp->fg_fraction <= 1.0f))
    return ct_error_set(err, CT_ERR_INVALID, "window_data_param.fg_fraction %g is not in [0, 1]",
                        (double)wp->fg_fraction);
  const char *mode = wp->crop_mode ? wp->crop_mode : "warp";
  if (strcmp(mode, "warp") != 0 && strcmp(mode, "square") != 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "window_data_param.crop_mode must be 'warp' or 'square', got '%s'", mode);
  if (tp->has_scale && wp->has_scale && tp->scale != wp->scale)
    return ct_error_set(err, CT_ERR_INVALID,
                        "transform_param.scale %g and window_data_param.scale %g differ (give one)",
                        (double)tp->scale, (double)wp->scale);
  p->scale = wp->has_scale ? wp->scale : tp->has_scale ? tp->scale : 1.0f;
  p->crop = (int)crop;
  p->batch = (int)wp->batch_size;
  p->num_fg = (int)((float)wp->batch_size * wp->fg_fraction);
  p->context_pad = (int)wp->context_pad;
  p->square = strcmp(mode, "square") == 0;
  p->mirror = tp->mirror || wp->mirror;
  /* the mean, loaded by a transformer of the settings that apply */
  Caffe__TransformationParameter t = *tp;
  CT_TRY(pick_string("mean_file", tp->mean_file, wp->mean_file, (const char **)&t.mean_file, err));
  CT_TRY(ct_transform_create(&t, l->phase, &p->tf, err));
  p->mean = ct_transform_mean_file(p->tf, &p->mean_c, &p->mean_h, &p->mean_w);
  p->mean_values = ct_transform_mean_values(p->tf, &p->n_mean_values);
  p->color = ct_transform_color_mode(p->tf);
  return CT_OK;
}

/* The mean against the channels and the crop (Caffe centres the crop on
 * the mean by its width). */
static ct_status check_mean(window_priv *p, int C, ct_error *err) {
  if (p->mean) {
    p->mean_off = (p->mean_w - p->crop) / 2;
    if (p->mean_c != C || p->mean_off < 0 || p->mean_h < p->crop + p->mean_off)
      return ct_error_set(err, CT_ERR_INVALID,
                          "the mean_file (%dx%dx%d) does not fit %d-channel %dx%d crops", p->mean_c,
                          p->mean_h, p->mean_w, C, p->crop, p->crop);
  }
  if (p->mean_values && p->n_mean_values != 1 && p->n_mean_values != C)
    return ct_error_set(err, CT_ERR_INVALID, "%d mean_value(s) for %d-channel images (give 1 or %d)",
                        p->n_mean_values, C, C);
  return CT_OK;
}

static ct_status window_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                              ct_error *err) {
  const Caffe__WindowDataParameter *wp =
      CT_PARAM_OR_DEFAULT(l, window_data_param, CAFFE__WINDOW_DATA_PARAMETER__INIT);
  window_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  CT_TRY(read_settings(p, l, wp, err));
  p->source = ct_xstrdup(wp->source);
  CT_TRY(read_windows(p, wp, err));
  if (p->num_fg > 0 && p->nfg == 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: no foreground windows (overlap >= fg_threshold %g) for the %d per batch",
                        p->source, (double)wp->fg_threshold, p->num_fg);
  if (p->batch - p->num_fg > 0 && p->nbg == 0)
    return ct_error_set(err, CT_ERR_INVALID,
                        "%s: no background windows (overlap < bg_threshold %g) for the %d per batch",
                        p->source, (double)wp->bg_threshold, p->batch - p->num_fg);
  const int C = p->color == CT_COLOR_FORCE_GRAY    ? 1
                : p->color == CT_COLOR_FORCE_COLOR ? 3
                                                   : p->images[0].c;
  if (p->color == CT_COLOR_NATIVE) p->color = C == 1 ? CT_COLOR_FORCE_GRAY : CT_COLOR_FORCE_COLOR;
  CT_TRY(check_mean(p, C, err));
  p->feed.c = C;
  p->feed.h = p->feed.w = p->crop;
  p->feed.has_label = true;
  p->feed.source = (ct_pipeline_source){.ctx = p,
                                        .count = (size_t)p->batch,
                                        .thread_init = window_thread_init,
                                        .thread_free = window_thread_free,
                                        .load = window_load};
  ct_pipeline_config cfg = ct_feed_config(l, p->batch, 0, false, 0);
  /* every worker draws its own batches (see the header) */
  cfg.seed = l->ctx->rank ? ct_draw_seed(cfg.seed, (uint64_t)l->ctx->rank) : cfg.seed;
  cfg.rank = 0;
  cfg.world = 1;
  CT_TRY(ct_feed_start(&p->feed, &cfg, top, err));
  LOG_INFO("layer %s: %d background and %d foreground windows per batch (context_pad %d, "
           "crop_mode %s), output data size: %d,%d,%d,%d",
           l->name, p->batch - p->num_fg, p->num_fg, p->context_pad, p->square ? "square" : "warp",
           p->batch, C, p->crop, p->crop);
  return CT_OK;
}

const ct_layer_ops ct_window_data_ops = {
    .type = "WindowData",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 2, .max_tops = 2,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = window_setup,
    .reshape = ct_feed_reshape,
    .forward_cpu = ct_feed_forward,
    .forward_gpu = ct_feed_forward,
    .destroy = window_destroy,
    .get_position = ct_feed_get_position,
    .set_position = ct_feed_set_position,
    .next_batch = ct_feed_next_batch,
    .release_batch = ct_feed_release_batch,
};
