/* Drawing `cortado plot`'s charts with cairo (see plot.h): one chart per
 * quantity, one under the other, each a frame with ticks at round numbers,
 * grid lines, axis titles, a line per run in a palette colour (the test
 * loss dashed) and a legend. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli/plot.h"

#ifdef CORTADO_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>

/* Margins of a chart inside its band of the image, in pixels. */
enum { M_LEFT = 78, M_RIGHT = 24, M_TOP = 34, M_BOTTOM = 52 };

/* Tableau-like colours, one per run. */
static const double palette[][3] = {
    {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
    {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
    {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};
#define NCOLORS (sizeof palette / sizeof palette[0])

typedef struct range {
  double lo, hi;
} range;

static void range_add(range *r, double v) {
  if (!isfinite(v)) return;
  if (v < r->lo) r->lo = v;
  if (v > r->hi) r->hi = v;
}

/* A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks. */
static double nice_step(double span, int ticks) {
  const double raw = span / ticks, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return mag * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

/* Widens r to whole steps (a flat or empty range gets a span). */
static double nice_range(range *r, int ticks) {
  if (r->lo > r->hi) *r = (range){0, 1};
  if (r->hi - r->lo < 1e-12 * (fabs(r->hi) + 1)) {
    const double pad = fabs(r->hi) > 0 ? fabs(r->hi) * 0.1 : 1;
    r->lo -= pad;
    r->hi += pad;
  }
  const double step = nice_step(r->hi - r->lo, ticks);
  r->lo = floor(r->lo / step) * step;
  r->hi = ceil(r->hi / step) * step;
  return step;
}

static void fmt_tick(char *buf, size_t size, double v, double step) {
  if (fabs(v) < step * 1e-6) v = 0;
  if (fabs(v) >= 1e5 || (fabs(v) > 0 && step < 1e-3)) snprintf(buf, size, "%.3g", v);
  else snprintf(buf, size, "%.*f", step >= 1 ? 0 : (int)ceil(-log10(step)), v);
}

static const double *xs_of(const plot_series *s, bool seconds) { return seconds ? s->sec : s->iter; }

typedef struct chart {
  cairo_t *cr;
  double x0, y0, w, h; /* the plotting area */
  range xr, yr;
} chart;

static double px(const chart *c, double x) { return c->x0 + (x - c->xr.lo) / (c->xr.hi - c->xr.lo) * c->w; }
static double py(const chart *c, double y) { return c->y0 + c->h - (y - c->yr.lo) / (c->yr.hi - c->yr.lo) * c->h; }

static void text_at(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s, &e);
  cairo_move_to(cr, x - ax * e.width - e.x_bearing, y - ay * e.height - e.y_bearing);
  cairo_show_text(cr, s);
}

static void draw_series(const chart *c, const plot_series *s, bool seconds, const double *rgb, bool dashed) {
  cairo_t *cr = c->cr;
  const double *xs = xs_of(s, seconds);
  cairo_save(cr);
  cairo_rectangle(cr, c->x0, c->y0, c->w, c->h);
  cairo_clip(cr);
  cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
  cairo_set_line_width(cr, 1.6);
  const double dash[] = {6, 4};
  cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
  bool pen = false;
  for (size_t i = 0; i < s->n; i++) {
    if (!isfinite(xs[i])) {
      pen = false;
      continue;
    }
    if (pen) cairo_line_to(cr, px(c, xs[i]), py(c, s->y[i]));
    else cairo_move_to(cr, px(c, xs[i]), py(c, s->y[i]));
    pen = true;
  }
  if (s->n == 1 && isfinite(xs[0])) { /* a single point: a dot */
    cairo_new_path(cr);
    cairo_arc(cr, px(c, xs[0]), py(c, s->y[0]), 2.5, 0, 2 * M_PI);
    cairo_fill(cr);
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

static const char *y_title(plot_y y) {
  switch (y) {
    case PLOT_LOSS: return "loss";
    case PLOT_ACCURACY: return "test accuracy";
    case PLOT_LR: return "learning rate";
    case PLOT_RATE: return "iterations / s";
    default: return "?";
  }
}

/* Points of chart y's curves (and 16 along each segment) that fall in the
 * box (x, y, w, h). */
static size_t covered(const chart *c, const plot_run *runs, int nruns, plot_y y, bool seconds, double bx,
                      double by, double bw, double bh) {
  size_t n = 0;
  for (int r = 0; r < nruns; r++) {
    const plot_series *s = &runs[r].curve[y];
    const double *xs = xs_of(s, seconds);
    for (size_t i = 0; i < s->n; i++)
      for (int k = 0; k < (i + 1 < s->n ? 16 : 1); k++) {
        const double f = k / 16.0, x1 = i + 1 < s->n ? xs[i + 1] : xs[i];
        const double y1 = i + 1 < s->n ? s->y[i + 1] : s->y[i];
        const double X = px(c, xs[i] + f * (x1 - xs[i])), Y = py(c, s->y[i] + f * (y1 - s->y[i]));
        n += X >= bx && X <= bx + bw && Y >= by && Y <= by + bh;
      }
  }
  return n;
}

static void draw_chart(cairo_t *cr, double top, const plot_run *runs, int nruns, plot_y y, bool seconds) {
  chart c = {.cr = cr, .x0 = M_LEFT, .y0 = top + M_TOP, .w = PLOT_WIDTH - M_LEFT - M_RIGHT,
             .h = PLOT_CHART_HEIGHT - M_TOP - M_BOTTOM, .xr = {INFINITY, -INFINITY},
             .yr = {INFINITY, -INFINITY}};
  bool dashed_any = false;
  for (int r = 0; r < nruns; r++) {
    const plot_series *ss[2] = {&runs[r].curve[y], y == PLOT_LOSS ? &runs[r].test_loss : NULL};
    for (int k = 0; k < 2 && ss[k]; k++) {
      const double *xs = xs_of(ss[k], seconds);
      for (size_t i = 0; i < ss[k]->n; i++) {
        if (!isfinite(xs[i])) continue;
        range_add(&c.xr, xs[i]);
        range_add(&c.yr, ss[k]->y[i]);
        dashed_any |= k == 1;
      }
    }
  }
  const double xstep = nice_range(&c.xr, 8), ystep = nice_range(&c.yr, 5);
  /* grid and ticks */
  cairo_set_font_size(cr, 12);
  cairo_set_line_width(cr, 1);
  char buf[48];
  for (double v = c.xr.lo; v <= c.xr.hi + xstep * 1e-6; v += xstep) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, round(px(&c, v)) + 0.5, c.y0);
    cairo_line_to(cr, round(px(&c, v)) + 0.5, c.y0 + c.h);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    fmt_tick(buf, sizeof buf, v, xstep);
    text_at(cr, buf, px(&c, v), c.y0 + c.h + 6, 0.5, 0);
  }
  for (double v = c.yr.lo; v <= c.yr.hi + ystep * 1e-6; v += ystep) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, c.x0, round(py(&c, v)) + 0.5);
    cairo_line_to(cr, c.x0 + c.w, round(py(&c, v)) + 0.5);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
    fmt_tick(buf, sizeof buf, v, ystep);
    text_at(cr, buf, c.x0 - 6, py(&c, v), 1, 0.5);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, c.x0 + 0.5, c.y0 + 0.5, c.w, c.h);
  cairo_stroke(cr);
  /* titles */
  cairo_set_font_size(cr, 13);
  text_at(cr, seconds ? "seconds" : "iterations", c.x0 + c.w / 2, c.y0 + c.h + 26, 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, 16, c.y0 + c.h / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, y_title(y), 0, 0, 0.5, 0.5);
  cairo_restore(cr);
  cairo_set_font_size(cr, 14);
  char title[96];
  snprintf(title, sizeof title, "%s vs %s%s", y_title(y), seconds ? "seconds" : "iterations",
           dashed_any ? " (solid: train, dashed: test)" : "");
  text_at(cr, title, c.x0 + c.w / 2, top + 10, 0.5, 0);
  /* curves */
  for (int r = 0; r < nruns; r++) {
    const double *rgb = palette[(size_t)r % NCOLORS];
    draw_series(&c, &runs[r].curve[y], seconds, rgb, false);
    if (y == PLOT_LOSS) draw_series(&c, &runs[r].test_loss, seconds, rgb, true);
  }
  /* legend, top right inside the frame */
  cairo_set_font_size(cr, 12);
  double wmax = 0;
  for (int r = 0; r < nruns; r++) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, runs[r].label, &e);
    if (e.x_advance > wmax) wmax = e.x_advance;
  }
  /* top right, or bottom right when fewer points lie there */
  const double lw = wmax + 44, lh = 18.0 * nruns + 8, lx = c.x0 + c.w - lw - 8;
  const double ly = covered(&c, runs, nruns, y, seconds, lx, c.y0 + c.h - lh - 8, lw, lh) <
                            covered(&c, runs, nruns, y, seconds, lx, c.y0 + 8, lw, lh)
                        ? c.y0 + c.h - lh - 8
                        : c.y0 + 8;
  cairo_set_source_rgba(cr, 1, 1, 1, 0.85);
  cairo_rectangle(cr, lx, ly, lw, lh);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_stroke(cr);
  for (int r = 0; r < nruns; r++) {
    const double *rgb = palette[(size_t)r % NCOLORS];
    const double yy = ly + 13 + 18.0 * r;
    cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
    cairo_set_line_width(cr, 2);
    cairo_move_to(cr, lx + 8, yy);
    cairo_line_to(cr, lx + 30, yy);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, runs[r].label, lx + 36, yy, 0, 0.5);
  }
}

static bool ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

ct_status plot_draw(const char *path, const plot_run *runs, int nruns, const plot_y *ys, int nys,
                    bool seconds, ct_error *err) {
  const int height = PLOT_CHART_HEIGHT * nys;
  const bool svg = ends_with(path, ".svg");
  cairo_surface_t *surface = svg ? cairo_svg_surface_create(path, PLOT_WIDTH, height)
                                 : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, PLOT_WIDTH, height);
  cairo_t *cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  for (int k = 0; k < nys; k++) draw_chart(cr, (double)k * PLOT_CHART_HEIGHT, runs, nruns, ys[k], seconds);
  cairo_status_t st = cairo_status(cr);
  cairo_destroy(cr);
  if (st == CAIRO_STATUS_SUCCESS && !svg) st = cairo_surface_write_to_png(surface, path);
  cairo_surface_finish(surface);
  if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  if (st != CAIRO_STATUS_SUCCESS)
    return ct_error_set(err, CT_ERR_IO, "%s: cannot write the %s: %s", path, svg ? "SVG" : "PNG",
                        cairo_status_to_string(st));
  return CT_OK;
}

#else

ct_status plot_draw(const char *path, const plot_run *runs, int nruns, const plot_y *ys, int nys,
                    bool seconds, ct_error *err) {
  (void)runs, (void)nruns, (void)ys, (void)nys, (void)seconds;
  return ct_error_set(err, CT_ERR_UNSUPPORTED,
                      "%s: this cortado was built without cairo, which draws the plots (Debian: "
                      "libcairo2-dev; scripts/install-deps.sh installs it)",
                      path);
}

#endif
