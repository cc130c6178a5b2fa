/* metrics: the registry behind GET /metrics (see metrics.h for the contract).
 *
 * Families live in a strmap by name; each family's series live in a strmap
 * keyed by their rendered label text (`a="x",b="y"`, names sorted, values
 * escaped), so the key is also what is printed and what the output is sorted
 * by. Rendering sorts both levels, so two scrapes of the same state give the
 * same bytes. */
#include "metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

/* 1 ms .. 60 s: activity, model-turn and HTTP latencies. */
static const double default_bounds[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NDEFAULT_BOUNDS (sizeof default_bounds / sizeof default_bounds[0])

enum { SAID_MISUSE = 1, SAID_CAP = 2 }; /* what a family has said on stderr already */

typedef struct series {
  double value;      /* counter, gauge */
  double sum;        /* histogram */
  uint64_t count;    /* histogram: observations */
  uint64_t *buckets; /* histogram: nbounds + 1 counts, each of its own bucket (cumulated when rendered) */
} series;

typedef struct family {
  char *name, *help; /* help NULL: no # HELP line */
  metric_type type;
  double *bounds; /* histogram: increasing finite upper bounds; +Inf implied */
  size_t nbounds;
  int implicit; /* declared by a use, not by metrics_declare */
  int invalid;  /* the name is no metric name: every use is dropped */
  int said;     /* SAID_* */
  strmap series;
} family;

struct metrics {
  strmap families;
};

/* ------------------------------------------------------------ helpers --- */

/* Once per family and kind: the caller misused the registry, or a family is
 * full. A line on stderr, never an error: metrics must not fail the engine. */
static void say(family *f, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(family *f, int kind, const char *fmt, ...) {
  if (f->said & kind) return;
  f->said |= kind;
  va_list ap;
  va_start(ap, fmt);
  char *msg = util_vfmt(fmt, ap);
  va_end(ap);
  log_msg(LOGL_WARNING, "metrics: %s", msg);
  free(msg);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* */
static int valid_metric_name(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9')) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
      return 0;
  return 1;
}

/* [a-zA-Z_][a-zA-Z0-9_]*, and not a name the format reserves ("__" prefix). */
static int valid_label_name(const char *s) {
  if (!s || !*s || (*s >= '0' && *s <= '9') || strncmp(s, "__", 2) == 0) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

static const char *type_name(metric_type t) {
  switch (t) {
    case METRIC_COUNTER: return "counter";
    case METRIC_HISTOGRAM: return "histogram";
    default: return "gauge";
  }
}

/* Appends s[0..n) escaped for the format: \\ and \n always, \" inside a label
 * value (quoted). Invalid UTF-8 and control characters become U+FFFD, so the
 * output is valid UTF-8 whatever a script named its activity. At most max
 * input bytes are taken (0: all), cut before a character that would cross. */
static void put_escaped(ubuf *b, const char *s, size_t n, int quoted, size_t max) {
  static const char replacement[] = "\xef\xbf\xbd";
  size_t whole = n;
  if (max && n > max) n = max;
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    size_t bad, len = util_utf8_decode(s + i, n - i, &cp, &bad);
    if (!len) {
      /* a sequence the cut left incomplete is a character the cut dropped,
       * not an invalid one: stop there */
      uint32_t cp2;
      size_t bad2;
      if (n < whole && util_utf8_decode(s + i, whole - i, &cp2, &bad2) > n - i) break;
      ubuf_add(b, replacement, 3);
      i += bad;
      continue;
    }
    if (cp == '\\')
      ubuf_add(b, "\\\\", 2);
    else if (cp == '\n')
      ubuf_add(b, "\\n", 2);
    else if (cp == '"' && quoted)
      ubuf_add(b, "\\\"", 2);
    else if (util_unsafe_codepoint(cp))
      ubuf_add(b, replacement, 3);
    else
      ubuf_add(b, s + i, len);
    i += len;
  }
}

/* A sample value or bucket bound: an integer below 1e15 in plain digits
 * ("10", not the "1e+01" that is %g's shortest), any other number in the
 * shortest %g form that reads back as the same double ("0.005", "1e+20"),
 * and the spellings the format uses for the others: NaN, +Inf, -Inf. */
static void put_double(ubuf *b, double v) {
  char tmp[40];
  if (isnan(v)) {
    ubuf_add(b, "NaN", 3);
    return;
  }
  if (isinf(v)) {
    ubuf_add(b, v > 0 ? "+Inf" : "-Inf", 4);
    return;
  }
  if (v == 0) v = 0; /* -0 as 0 */
  int n = 0;
  if (v == floor(v) && fabs(v) < 1e15) {
    n = snprintf(tmp, sizeof tmp, "%.0f", v);
    ubuf_add(b, tmp, (size_t)n);
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
    if (strtod(tmp, NULL) == v) break;
  }
  ubuf_add(b, tmp, (size_t)n);
}

static void put_str(ubuf *b, const char *s) {
  ubuf_add(b, s, strlen(s));
}

/* ----------------------------------------------------------- families --- */

static void free_series_map(strmap *sm) {
  for (size_t i = 0; i < sm->cap; i++) {
    if (!STRMAP_LIVE(sm, i)) continue;
    series *s = sm->vals[i];
    free(s->buckets);
    free(s);
  }
  strmap_free(sm);
}

static void free_family(family *f) {
  free_series_map(&f->series);
  free(f->name);
  free(f->help);
  free(f->bounds);
  free(f);
}

/* Sets f's bounds from buckets[0..n) when they are finite and increasing (a
 * trailing +Inf dropped: it is implied), else from the defaults (n = 0, or
 * reported). */
static void set_bounds(family *f, const double *buckets, size_t n) {
  if (n && buckets && isinf(buckets[n - 1]) && buckets[n - 1] > 0) n--;
  for (size_t i = 0; buckets && i < n; i++) {
    if (!isfinite(buckets[i]) || (i > 0 && !(buckets[i] > buckets[i - 1]))) {
      say(f, SAID_MISUSE,
          "histogram %s: bucket bound %zu (%g) is not a finite number above the one before: the default buckets "
          "are used",
          f->name, i + 1, buckets[i]);
      n = 0;
      break;
    }
  }
  if (!buckets || !n) {
    buckets = default_bounds;
    n = NDEFAULT_BOUNDS;
  }
  free(f->bounds);
  f->bounds = util_xmalloc(n * sizeof *f->bounds);
  memcpy(f->bounds, buckets, n * sizeof *f->bounds);
  f->nbounds = n;
}

/* A new family in m (name already valid or flagged invalid). */
static family *add_family(metrics *m, const char *name, metric_type type, int implicit) {
  family *f = util_xcalloc(1, sizeof *f);
  f->name = util_strdup(name);
  f->type = type;
  f->implicit = implicit;
  strmap_init(&f->series);
  if (!valid_metric_name(name)) {
    f->invalid = 1;
    say(f, SAID_MISUSE, "\"%s\" is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*): its uses are dropped", name);
  } else if (type == METRIC_HISTOGRAM) {
    set_bounds(f, NULL, 0);
  }
  strmap_put(&m->families, name, f);
  return f;
}

/* The family a use of name records into, declared implicitly as type when
 * new; NULL when its name is invalid. */
static family *family_for_use(metrics *m, const char *name, metric_type type) {
  if (!m || !name) return NULL;
  family *f = strmap_get(&m->families, name);
  if (!f) f = add_family(m, name, type, 1);
  return f->invalid ? NULL : f;
}

void metrics_declare(metrics *m, const char *name, metric_type type, const char *help, const double *buckets,
                     size_t nbuckets) {
  if (!m || !name) return;
  if (type != METRIC_COUNTER && type != METRIC_GAUGE && type != METRIC_HISTOGRAM) type = METRIC_GAUGE;
  family *f = strmap_get(&m->families, name);
  if (f && !f->implicit) return; /* declared once: the first declaration stands */
  if (!f) {
    f = add_family(m, name, type, 0);
    if (f->invalid) return;
  } else {
    if (f->invalid) return;
    f->implicit = 0;
  }
  int was_histogram = f->type == METRIC_HISTOGRAM;
  size_t old_n = f->nbounds;
  double *old = NULL;
  if (was_histogram) {
    old = util_xmalloc((old_n ? old_n : 1) * sizeof *old);
    memcpy(old, f->bounds, old_n * sizeof *old);
  }
  f->type = type;
  free(f->help);
  f->help = help && *help ? util_strdup(help) : NULL;
  if (type == METRIC_HISTOGRAM) set_bounds(f, buckets, nbuckets);
  /* series recorded before the declaration keep their values when the
   * shape is the same: a number stays a number, buckets stay the buckets */
  int same = was_histogram == (type == METRIC_HISTOGRAM) &&
             (!was_histogram || (old_n == f->nbounds && memcmp(old, f->bounds, old_n * sizeof *old) == 0));
  if (!same) {
    free_series_map(&f->series);
    strmap_init(&f->series);
  }
  free(old);
}

metrics *metrics_new(void) {
  metrics *m = util_xcalloc(1, sizeof *m);
  strmap_init(&m->families);
  return m;
}

void metrics_free(metrics *m) {
  if (!m) return;
  for (size_t i = 0; i < m->families.cap; i++)
    if (STRMAP_LIVE(&m->families, i)) free_family(m->families.vals[i]);
  strmap_free(&m->families);
  free(m);
}

/* ------------------------------------------------------------- series --- */

typedef struct label {
  const char *name, *value;
} label;

static int by_label_name(const void *a, const void *b) {
  return strcmp(((const label *)a)->name, ((const label *)b)->name);
}

/* The key (and rendered text) of a label set into *key: names sorted, values
 * escaped, or every value "_other" when other is set. Returns 0, or -1 (said
 * once) for labels the format cannot carry. */
static int label_key(family *f, const char *const *labels, int other, ubuf *key) {
  size_t n = 0;
  while (labels && labels[2 * n]) {
    if (!labels[2 * n + 1]) {
      say(f, SAID_MISUSE, "%s: label \"%s\" has no value: the use is dropped", f->name, labels[2 * n]);
      return -1;
    }
    n++;
  }
  label *ls = util_xmalloc((n ? n : 1) * sizeof *ls);
  for (size_t i = 0; i < n; i++) ls[i] = (label){labels[2 * i], labels[2 * i + 1]};
  qsort(ls, n, sizeof *ls, by_label_name);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    const char *why = NULL;
    if (!valid_label_name(ls[i].name))
      why = "is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, no leading __)";
    else if (i > 0 && strcmp(ls[i].name, ls[i - 1].name) == 0)
      why = "appears twice";
    else if (f->type == METRIC_HISTOGRAM && strcmp(ls[i].name, "le") == 0)
      why = "is the histogram's bucket label";
    if (why) {
      say(f, SAID_MISUSE, "%s: label \"%s\" %s: the use is dropped", f->name, ls[i].name, why);
      rc = -1;
      break;
    }
    if (i > 0) ubuf_add(key, ",", 1);
    put_str(key, ls[i].name);
    ubuf_add(key, "=\"", 2);
    if (other)
      put_str(key, "_other");
    else
      put_escaped(key, ls[i].value, strlen(ls[i].value), 1, METRICS_MAX_VALUE_BYTES);
    ubuf_add(key, "\"", 1);
  }
  ubuf_add(key, "", 1);
  free(ls);
  return rc;
}

/* The series of labels in f, created when new; past METRICS_MAX_SERIES a new
 * label set is the "_other" series instead. NULL for labels that are refused. */
static series *series_for(family *f, const char *const *labels) {
  ubuf key = {0};
  if (label_key(f, labels, 0, &key) != 0) {
    ubuf_free(&key);
    return NULL;
  }
  series *s = strmap_get(&f->series, key.p);
  if (!s && f->series.len >= METRICS_MAX_SERIES) {
    say(f, SAID_CAP, "%s has %d series: further label sets are counted with the label values \"_other\"", f->name,
        METRICS_MAX_SERIES);
    key.n = 0;
    label_key(f, labels, 1, &key); /* the same names passed above */
    s = strmap_get(&f->series, key.p);
  }
  if (!s) {
    s = util_xcalloc(1, sizeof *s);
    if (f->type == METRIC_HISTOGRAM) s->buckets = util_xcalloc(f->nbounds + 1, sizeof *s->buckets);
    strmap_put(&f->series, key.p, s);
  }
  ubuf_free(&key);
  return s;
}

void metrics_add(metrics *m, const char *name, const char *const *labels, double delta) {
  family *f = family_for_use(m, name, METRIC_GAUGE);
  if (!f) return;
  if (f->type == METRIC_HISTOGRAM) {
    say(f, SAID_MISUSE, "%s is a histogram: metrics_add is dropped (metrics_observe records into it)", name);
    return;
  }
  if (f->type == METRIC_COUNTER && !(delta >= 0)) {
    say(f, SAID_MISUSE, "%s is a counter: an increment of %g is dropped (a counter only goes up)", name, delta);
    return;
  }
  series *s = series_for(f, labels);
  if (s) s->value += delta;
}

void metrics_set(metrics *m, const char *name, const char *const *labels, double value) {
  family *f = family_for_use(m, name, METRIC_GAUGE);
  if (!f) return;
  if (f->type == METRIC_HISTOGRAM) {
    say(f, SAID_MISUSE, "%s is a histogram: metrics_set is dropped (metrics_observe records into it)", name);
    return;
  }
  series *s = series_for(f, labels);
  if (s) s->value = value;
}

void metrics_observe(metrics *m, const char *name, const char *const *labels, double value) {
  family *f = family_for_use(m, name, METRIC_HISTOGRAM);
  if (!f) return;
  if (f->type != METRIC_HISTOGRAM) {
    say(f, SAID_MISUSE, "%s is a %s: metrics_observe is dropped (it records into histograms)", name,
        type_name(f->type));
    return;
  }
  if (isnan(value)) return; /* in no bucket, and it would make the sum NaN for good */
  series *s = series_for(f, labels);
  if (!s) return;
  size_t lo = 0, hi = f->nbounds; /* the first bound >= value: a value equal to a bound is in its bucket */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (f->bounds[mid] < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  s->buckets[lo]++;
  s->count++;
  s->sum += value;
}

void metrics_clear(metrics *m, const char *name) {
  family *f = m && name ? strmap_get(&m->families, name) : NULL;
  if (!f) return;
  free_series_map(&f->series);
  strmap_init(&f->series);
}

/* ---------------------------------------------------------- rendering --- */

typedef struct entry {
  const char *key;
  void *val;
} entry;

static int by_key(const void *a, const void *b) {
  return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* The live entries of sm sorted by key, malloc'd; *n their number. */
static entry *sorted_entries(const strmap *sm, size_t *n) {
  entry *es = util_xmalloc((sm->len ? sm->len : 1) * sizeof *es);
  size_t k = 0;
  for (size_t i = 0; i < sm->cap; i++)
    if (STRMAP_LIVE(sm, i)) es[k++] = (entry){sm->keys[i], sm->vals[i]};
  qsort(es, k, sizeof *es, by_key);
  *n = k;
  return es;
}

/* name suffix{labels[,extra]} value\n */
static void put_sample(ubuf *b, const char *name, const char *suffix, const char *labels, const char *extra, double v) {
  put_str(b, name);
  put_str(b, suffix);
  if (*labels || extra) {
    ubuf_add(b, "{", 1);
    put_str(b, labels);
    if (*labels && extra) ubuf_add(b, ",", 1);
    if (extra) put_str(b, extra);
    ubuf_add(b, "}", 1);
  }
  ubuf_add(b, " ", 1);
  put_double(b, v);
  ubuf_add(b, "\n", 1);
}

static void render_family(ubuf *b, const family *f) {
  if (f->help) {
    put_str(b, "# HELP ");
    put_str(b, f->name);
    ubuf_add(b, " ", 1);
    put_escaped(b, f->help, strlen(f->help), 0, 0);
    ubuf_add(b, "\n", 1);
  }
  put_str(b, "# TYPE ");
  put_str(b, f->name);
  ubuf_add(b, " ", 1);
  put_str(b, type_name(f->type));
  ubuf_add(b, "\n", 1);
  size_t n;
  entry *es = sorted_entries(&f->series, &n);
  ubuf le = {0};
  for (size_t i = 0; i < n; i++) {
    const series *s = es[i].val;
    if (f->type != METRIC_HISTOGRAM) {
      put_sample(b, f->name, "", es[i].key, NULL, s->value);
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t j = 0; j <= f->nbounds; j++) {
      cumulative += s->buckets[j];
      le.n = 0;
      put_str(&le, "le=\"");
      put_double(&le, j < f->nbounds ? f->bounds[j] : INFINITY);
      ubuf_add(&le, "\"", 2); /* with the NUL */
      put_sample(b, f->name, "_bucket", es[i].key, le.p, (double)cumulative);
    }
    put_sample(b, f->name, "_sum", es[i].key, NULL, s->sum);
    put_sample(b, f->name, "_count", es[i].key, NULL, (double)s->count);
  }
  ubuf_free(&le);
  free(es);
}

char *metrics_render(const metrics *m) {
  ubuf b = {0};
  if (m) {
    size_t n;
    entry *es = sorted_entries(&m->families, &n);
    for (size_t i = 0; i < n; i++)
      if (!((const family *)es[i].val)->invalid) render_family(&b, es[i].val);
    free(es);
  }
  ubuf_add(&b, "", 1);
  return b.p;
}
