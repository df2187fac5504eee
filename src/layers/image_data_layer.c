/* ImageData: batches of image files named in a list file of "path label"
 * lines (path relative to root_folder), decoded (is_color: BGR, else gray),
 * resized to new_height x new_width when both are given, transformed by
 * transform_param and prefetched.  Tops: data (batch_size, C, H, W) and
 * optionally label (batch_size). */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/log.h"
#include "layers/data_feed.h"
#include "data/image.h"
#include "data/transform.h"
#include "layers/layer.h"

typedef struct image_item {
  char *path;  /* root_folder + the listed path */
  int label;
  int line;    /* in the list file, for messages */
} image_item;

typedef struct image_priv {
  ct_feed feed; /* first: the shared ops in layers/data_feed.h find it at l->priv */
  char *list_path;
  image_item *items; /* (nitems) */
  size_t nitems;
  int new_h, new_w;
  ct_color_mode color;
  ct_transform *tf;
} image_priv;
_Static_assert(offsetof(image_priv, feed) == 0, "ct_feed_* ops read the feed at l->priv");

static void image_destroy(ct_layer *l) {
  image_priv *p = l->priv;
  if (!p) return;
  ct_feed_stop(&p->feed);
  ct_transform_free(p->tf);
  for (size_t i = 0; i < p->nitems; i++) free(p->items[i].path);
  free(p->items);
  free(p->list_path);
  free(p);
  l->priv = NULL;
}

/* Lines "path label": the label is what follows the last space (paths may
 * hold spaces, as in Caffe).  Blank lines are skipped. */
static ct_status read_list(image_priv *p, const char *list, const char *root, ct_error *err) {
  char *text;
  size_t len;
  CT_TRY(ct_file_read_all(list, &text, &len, (size_t)1 << 31, err));
  size_t cap = 0;
  int lineno = 0;
  ct_status s = CT_OK;
  for (char *line = text, *next; line && *line && s == CT_OK; line = next) {
    lineno++;
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    size_t n = strlen(line);
    while (n && isspace((unsigned char)line[n - 1])) line[--n] = 0;
    if (n == 0) continue;
    char *sp = strrchr(line, ' ');
    char *end = NULL;
    long label = 0;
    if (sp) {
      errno = 0;
      label = strtol(sp + 1, &end, 10);
    }
    if (!sp || sp == line || end == sp + 1 || *end || errno || label < INT32_MIN || label > INT32_MAX) {
      s = ct_error_set(err, CT_ERR_PARSE, "%s:%d: expected 'path label', got '%.200s'", list, lineno,
                       line);
      break;
    }
    *sp = 0;
    if (p->nitems == cap) {
      cap = cap ? 2 * cap : 1024;
      p->items = ct_xrealloc(p->items, cap * sizeof *p->items);
    }
    image_item *it = &p->items[p->nitems++];
    size_t plen = strlen(root) + strlen(line) + 1;
    it->path = ct_xcalloc(plen, 1);
    snprintf(it->path, plen, "%s%s", root, line);
    it->label = (int)label;
    it->line = lineno;
  }
  free(text);
  if (s == CT_OK && p->nitems == 0)
    s = ct_error_set(err, CT_ERR_INVALID, "%s: the list has no images", list);
  return s;
}

/* Reads item i as the layer sees it (decoded, resized) into *img. */
static ct_status load_image(const image_priv *p, size_t i, ct_image *img, ct_image *tmp,
                            ct_error *err) {
  const image_item *it = &p->items[i];
  ct_status s = ct_image_read_file(it->path, p->color, p->new_h > 0 ? tmp : img, err);
  if (s == CT_OK && p->new_h > 0) {
    ct_image_resize_bilinear(tmp, p->new_h, p->new_w, img);
    ct_image_free(tmp);
  }
  if (s != CT_OK) ct_error_prefix(err, "%s:%d", p->list_path, it->line);
  return s;
}

typedef struct image_thread {
  ct_image img, tmp;
} image_thread;

static ct_status image_thread_init(void *ctx, void **tstate, ct_error *err) {
  *tstate = ct_xcalloc(1, sizeof(image_thread));
  return CT_OK;
}

static void image_thread_free(void *ctx, void *tstate) { free(tstate); }

static ct_status image_load(void *ctx, void *tstate, size_t index, ct_rng *rng, float *data,
                            float *label, ct_error *err) {
  image_priv *p = ctx;
  image_thread *t = tstate;
  CT_TRY(load_image(p, index, &t->img, &t->tmp, err));
  char where[600];
  snprintf(where, sizeof where, "%s:%d: %s", p->list_path, p->items[index].line,
           p->items[index].path);
  ct_pixels px = ct_pixels_hwc(CT_PIXEL_U8, t->img.data, t->img.c, t->img.h, t->img.w);
  ct_status s = CT_OK;
  if (ct_transform_crop_size(p->tf) == 0 && (px.h != p->feed.h || px.w != p->feed.w))
    s = ct_error_set(err, CT_ERR_INVALID,
                     "%s: image %dx%dx%d does not fit the top shape %dx%dx%d set from the first image",
                     where, px.c, px.h, px.w, p->feed.c, p->feed.h, p->feed.w);
  if (s == CT_OK) s = ct_transform_apply(p->tf, &px, rng, data, where, err);
  if (s == CT_OK) *label = (float)p->items[index].label;
  ct_image_free(&t->img);
  return s;
}

static ct_status image_setup(ct_layer *l, ct_tensor *const *bottom, ct_tensor *const *top,
                             ct_error *err) {
  const Caffe__ImageDataParameter *ip =
      CT_PARAM_OR_DEFAULT(l, image_data_param, CAFFE__IMAGE_DATA_PARAMETER__INIT);
  if (!ip->source || !ip->source[0])
    return ct_error_set(err, CT_ERR_INVALID, "image_data_param.source must be given");
  if (ip->batch_size == 0)
    return ct_error_set(err, CT_ERR_INVALID, "image_data_param.batch_size must be positive");
  if ((ip->new_height == 0) != (ip->new_width == 0))
    return ct_error_set(err, CT_ERR_INVALID,
                        "image_data_param.new_height and new_width must be given together");
  image_priv *p = ct_xcalloc(1, sizeof *p);
  l->priv = p;
  p->list_path = ct_xstrdup(ip->source);
  p->new_h = (int)ip->new_height;
  p->new_w = (int)ip->new_width;
  p->color = ip->is_color ? CT_COLOR_FORCE_COLOR : CT_COLOR_FORCE_GRAY;
  CT_TRY(ct_transform_create(l->param->transform_param, l->phase, &p->tf, err));
  CT_TRY(read_list(p, ip->source, ip->root_folder ? ip->root_folder : "", err));
  ct_image img = {0}, tmp = {0};
  CT_TRY(load_image(p, 0, &img, &tmp, err));
  char where[600];
  snprintf(where, sizeof where, "%s:%d: %s", p->list_path, p->items[0].line, p->items[0].path);
  ct_status s = ct_transform_output_shape(p->tf, img.c, img.h, img.w, &p->feed.c, &p->feed.h,
                                          &p->feed.w, where, err);
  ct_image_free(&img);
  CT_TRY(s);
  p->feed.has_label = l->ntop > 1;
  p->feed.source = (ct_pipeline_source){.ctx = p,
                                        .count = p->nitems,
                                        .thread_init = image_thread_init,
                                        .thread_free = image_thread_free,
                                        .load = image_load};
  ct_pipeline_config cfg = ct_feed_config(l, (int)ip->batch_size, 0, ip->shuffle, ip->rand_skip);
  CT_TRY(ct_feed_start(&p->feed, &cfg, top, err));
  LOG_INFO("layer %s: %zu images in %s, output data size: %d,%d,%d,%d", l->name, p->nitems,
           ip->source, (int)ip->batch_size, p->feed.c, p->feed.h, p->feed.w);
  return CT_OK;
}

const ct_layer_ops ct_image_data_ops = {
    .type = "ImageData",
    .min_bottoms = 0, .max_bottoms = 0, .min_tops = 1, .max_tops = 2,
    .flags = CT_LAYER_DATA | CT_LAYER_NO_BACKWARD,
    .setup = image_setup,
    .reshape = ct_feed_reshape,
    .forward_cpu = ct_feed_forward,
    .forward_gpu = ct_feed_forward,
    .destroy = image_destroy,
    .get_position = ct_feed_get_position,
    .set_position = ct_feed_set_position,
    .next_batch = ct_feed_next_batch,
    .release_batch = ct_feed_release_batch,
};
