/* Unit tests for engine/metrics: the exact text GET /metrics serves (format
 * 0.0.4): counters, gauges, labelled series in sorted order, histograms
 * (cumulative buckets, a value equal to a bound in that bucket), escaping of
 * label values and help, invalid UTF-8 and long label values, the series cap,
 * clear, declaring twice, and uses that are dropped as misuse.
 * tests/integration/metrics_format.py parses a rendered registry with the
 * Prometheus client's own parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "metrics.h"
#include "otel_export.h"
#include "util.h"

/* The registry renders exactly want. */
static void expect_render(const metrics *m, const char *want) {
  char *got = metrics_render(m);
  assert_non_null(got);
  if (strcmp(got, want) != 0) {
    print_error("rendered:\n%s\nwanted:\n%s\n", got, want);
    free(got);
    fail();
  }
  free(got);
}

/* The number of lines of text that start with prefix. */
static size_t count_lines(const char *text, const char *prefix) {
  size_t n = 0, plen = strlen(prefix);
  for (const char *p = text; *p;) {
    if (strncmp(p, prefix, plen) == 0) n++;
    const char *nl = strchr(p, '\n');
    if (!nl) break;
    p = nl + 1;
  }
  return n;
}

/* ------------------------------------------------------------- scalar --- */

static void test_counter(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "engine_activities_total", METRIC_COUNTER, "Activities started.", NULL, 0);
  /* declared, nothing recorded: the family's lines, no sample */
  expect_render(m,
                "# HELP engine_activities_total Activities started.\n"
                "# TYPE engine_activities_total counter\n");
  metrics_add(m, "engine_activities_total", NULL, 1);
  metrics_add(m, "engine_activities_total", NULL, 2);
  expect_render(m,
                "# HELP engine_activities_total Activities started.\n"
                "# TYPE engine_activities_total counter\n"
                "engine_activities_total 3\n");
  metrics_add(m, "engine_activities_total", NULL, 0.5);
  expect_render(m,
                "# HELP engine_activities_total Activities started.\n"
                "# TYPE engine_activities_total counter\n"
                "engine_activities_total 3.5\n");
  metrics_free(m);
}

static void test_gauge_values(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "g", METRIC_GAUGE, "A gauge.", NULL, 0);
  const char *const a[] = {"k", "a", NULL}, *const b[] = {"k", "b", NULL}, *const c[] = {"k", "c", NULL},
                    *const d[] = {"k", "d", NULL}, *const e[] = {"k", "e", NULL}, *const f[] = {"k", "f", NULL},
                    *const g[] = {"k", "g", NULL}, *const h[] = {"k", "h", NULL};
  metrics_set(m, "g", a, 0.1);  /* shortest form that reads back */
  metrics_set(m, "g", b, 1e20); /* %g's exponent form */
  metrics_set(m, "g", c, -2.5); /* gauges go down */
  metrics_set(m, "g", d, NAN);  /* the format's spellings */
  metrics_set(m, "g", e, INFINITY);
  metrics_set(m, "g", f, -INFINITY);
  metrics_set(m, "g", g, 1.0 / 3); /* 16 digits read back the same */
  metrics_set(m, "g", h, 7);
  metrics_add(m, "g", h, -10);
  const char *const i[] = {"k", "i", NULL};
  metrics_add(m, "g", i, 0.1); /* 0.1 + 0.2: all 17 digits are needed */
  metrics_add(m, "g", i, 0.2);
  expect_render(m,
                "# HELP g A gauge.\n"
                "# TYPE g gauge\n"
                "g{k=\"a\"} 0.1\n"
                "g{k=\"b\"} 1e+20\n"
                "g{k=\"c\"} -2.5\n"
                "g{k=\"d\"} NaN\n"
                "g{k=\"e\"} +Inf\n"
                "g{k=\"f\"} -Inf\n"
                "g{k=\"g\"} 0.3333333333333333\n"
                "g{k=\"h\"} -3\n"
                "g{k=\"i\"} 0.30000000000000004\n");
  metrics_free(m);
}

/* Families sorted by name, series by their label text; the label names of a
 * set sorted, so the order the caller lists them in names the same series. */
static void test_sorted_output(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "zeta", METRIC_GAUGE, "Last.", NULL, 0);
  metrics_declare(m, "alpha_total", METRIC_COUNTER, "First.", NULL, 0);
  metrics_declare(m, "alpha", METRIC_GAUGE, "Before alpha_total.", NULL, 0);
  const char *const s1[] = {"status", "ok", "activity", "sandbox.provision", NULL};
  const char *const s2[] = {"activity", "model.turn", "status", "ok", NULL};
  const char *const s3[] = {"activity", "model.turn", "status", "error", NULL};
  const char *const s1_again[] = {"activity", "sandbox.provision", "status", "ok", NULL};
  metrics_add(m, "alpha_total", s1, 1);
  metrics_add(m, "alpha_total", s2, 2);
  metrics_add(m, "alpha_total", s3, 3);
  metrics_add(m, "alpha_total", s1_again, 10);
  metrics_set(m, "zeta", NULL, 1);
  metrics_set(m, "alpha", NULL, 2);
  expect_render(m,
                "# HELP alpha Before alpha_total.\n"
                "# TYPE alpha gauge\n"
                "alpha 2\n"
                "# HELP alpha_total First.\n"
                "# TYPE alpha_total counter\n"
                "alpha_total{activity=\"model.turn\",status=\"error\"} 3\n"
                "alpha_total{activity=\"model.turn\",status=\"ok\"} 2\n"
                "alpha_total{activity=\"sandbox.provision\",status=\"ok\"} 11\n"
                "# HELP zeta Last.\n"
                "# TYPE zeta gauge\n"
                "zeta 1\n");
  /* stable: the same state renders the same bytes */
  char *one = metrics_render(m), *two = metrics_render(m);
  assert_string_equal(one, two);
  free(one);
  free(two);
  metrics_free(m);
}

/* ---------------------------------------------------------- histogram --- */

static void test_histogram_buckets(void **state) {
  (void)state;
  metrics *m = metrics_new();
  const double bounds[] = {0.1, 0.5, 1};
  metrics_declare(m, "lat_seconds", METRIC_HISTOGRAM, "Latency.", bounds, 3);
  const char *const lbl[] = {"kind", "model", NULL};
  metrics_observe(m, "lat_seconds", lbl, 0.1);  /* equal to a bound: in that bucket */
  metrics_observe(m, "lat_seconds", lbl, 0.05); /* below the first */
  metrics_observe(m, "lat_seconds", lbl, 0.5);  /* equal to the second */
  metrics_observe(m, "lat_seconds", lbl, 0.75); /* between */
  metrics_observe(m, "lat_seconds", lbl, 1.5);  /* above every bound: +Inf only */
  metrics_observe(m, "lat_seconds", lbl, NAN);  /* dropped: in no bucket */
  metrics_observe(m, "lat_seconds", NULL, 2);
  expect_render(m,
                "# HELP lat_seconds Latency.\n"
                "# TYPE lat_seconds histogram\n"
                "lat_seconds_bucket{le=\"0.1\"} 0\n"
                "lat_seconds_bucket{le=\"0.5\"} 0\n"
                "lat_seconds_bucket{le=\"1\"} 0\n"
                "lat_seconds_bucket{le=\"+Inf\"} 1\n"
                "lat_seconds_sum 2\n"
                "lat_seconds_count 1\n"
                "lat_seconds_bucket{kind=\"model\",le=\"0.1\"} 2\n"
                "lat_seconds_bucket{kind=\"model\",le=\"0.5\"} 3\n"
                "lat_seconds_bucket{kind=\"model\",le=\"1\"} 4\n"
                "lat_seconds_bucket{kind=\"model\",le=\"+Inf\"} 5\n"
                "lat_seconds_sum{kind=\"model\"} 2.9\n"
                "lat_seconds_count{kind=\"model\"} 5\n");
  metrics_free(m);
}

static void test_histogram_default_buckets(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "h", METRIC_HISTOGRAM, "Default buckets.", NULL, 0);
  metrics_observe(m, "h", NULL, 0.001); /* the first bound */
  metrics_observe(m, "h", NULL, 60);    /* the last */
  metrics_observe(m, "h", NULL, 61);
  expect_render(m,
                "# HELP h Default buckets.\n"
                "# TYPE h histogram\n"
                "h_bucket{le=\"0.001\"} 1\n"
                "h_bucket{le=\"0.005\"} 1\n"
                "h_bucket{le=\"0.01\"} 1\n"
                "h_bucket{le=\"0.025\"} 1\n"
                "h_bucket{le=\"0.05\"} 1\n"
                "h_bucket{le=\"0.1\"} 1\n"
                "h_bucket{le=\"0.25\"} 1\n"
                "h_bucket{le=\"0.5\"} 1\n"
                "h_bucket{le=\"1\"} 1\n"
                "h_bucket{le=\"2.5\"} 1\n"
                "h_bucket{le=\"5\"} 1\n"
                "h_bucket{le=\"10\"} 1\n"
                "h_bucket{le=\"30\"} 1\n"
                "h_bucket{le=\"60\"} 2\n"
                "h_bucket{le=\"+Inf\"} 3\n"
                "h_sum 121.001\n"
                "h_count 3\n");
  metrics_free(m);
}

/* Bounds that do not increase are reported and the defaults stand in; a
 * trailing +Inf is accepted (it is implied) and printed once. */
static void test_histogram_bad_bounds(void **state) {
  (void)state;
  metrics *m = metrics_new();
  const double with_inf[] = {1, 2, INFINITY}, decreasing[] = {1, 0.5}, nan_bound[] = {NAN};
  metrics_declare(m, "a", METRIC_HISTOGRAM, NULL, with_inf, 3);
  metrics_declare(m, "b", METRIC_HISTOGRAM, NULL, decreasing, 2);
  metrics_declare(m, "c", METRIC_HISTOGRAM, NULL, nan_bound, 1);
  metrics_observe(m, "a", NULL, 1.5);
  metrics_observe(m, "b", NULL, 0.7);
  metrics_observe(m, "c", NULL, 0.7);
  char *got = metrics_render(m);
  assert_non_null(strstr(got,
                         "# TYPE a histogram\n"
                         "a_bucket{le=\"1\"} 0\n"
                         "a_bucket{le=\"2\"} 1\n"
                         "a_bucket{le=\"+Inf\"} 1\n"
                         "a_sum 1.5\n"));
  assert_int_equal(count_lines(got, "a_bucket"), 3);
  assert_int_equal(count_lines(got, "b_bucket"), 15); /* the 14 default bounds and +Inf */
  assert_non_null(strstr(got, "b_bucket{le=\"0.5\"} 0\nb_bucket{le=\"1\"} 1\n"));
  assert_int_equal(count_lines(got, "c_bucket"), 15);
  free(got);
  metrics_free(m);
}

/* ----------------------------------------------------------- escaping --- */

static void test_escaping(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "e", METRIC_GAUGE, "Back\\slash, \"quotes\" and a\nnew line.", NULL, 0);
  const char *const lbl[] = {"v", "a\\b \"q\" line\nnext", NULL};
  metrics_set(m, "e", lbl, 1);
  expect_render(m,
                "# HELP e Back\\\\slash, \"quotes\" and a\\nnew line.\n" /* help: \\ and \n, quotes as they are */
                "# TYPE e gauge\n"
                "e{v=\"a\\\\b \\\"q\\\" line\\nnext\"} 1\n");
  metrics_free(m);
}

/* Invalid UTF-8 becomes U+FFFD (one per maximal invalid part), control
 * characters too; valid multi-byte characters pass as they are. */
static void test_invalid_utf8(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "u", METRIC_COUNTER, "Bad bytes \xff in help.", NULL, 0);
  const char *const bad[] = {"activity",
                             "a\xff"
                             "b\xe2\x82"
                             "c\xc0\xaf"
                             "d\xed\xa0\x80"
                             "e\x1b[2J"
                             "\xc3\xa9\xe2\x82",
                             NULL};
  metrics_add(m, "u", bad, 1);
  expect_render(m,
                "# HELP u Bad bytes \xef\xbf\xbd in help.\n"
                "# TYPE u counter\n"
                "u{activity=\"a\xef\xbf\xbd"
                "b\xef\xbf\xbd"
                "c\xef\xbf\xbd\xef\xbf\xbd"
                "d\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                "e\xef\xbf\xbd[2J"
                "\xc3\xa9\xef\xbf\xbd\"} 1\n");
  char *got = metrics_render(m);
  char why[128];
  assert_int_equal(util_text_problem(got, strlen(got), 1, why, sizeof why), 0);
  free(got);
  metrics_free(m);
}

/* A label value keeps METRICS_MAX_VALUE_BYTES bytes, cut before a character
 * that would cross; values that differ only past the cut are one series. */
static void test_long_label_value(void **state) {
  (void)state;
  metrics *m = metrics_new();
  char odd[1 + 200 * 2 + 1], want_odd[1 + 127 * 2 + 1];
  odd[0] = want_odd[0] = 'x';
  for (int i = 0; i < 200; i++) memcpy(odd + 1 + 2 * i, "\xc3\xa9", 2);
  odd[sizeof odd - 1] = 0;
  for (int i = 0; i < 127; i++) memcpy(want_odd + 1 + 2 * i, "\xc3\xa9", 2);
  want_odd[sizeof want_odd - 1] = 0;
  assert_int_equal(strlen(want_odd), METRICS_MAX_VALUE_BYTES - 1);
  char plain[400], plain2[400];
  memset(plain, 'p', sizeof plain - 1);
  plain[sizeof plain - 1] = 0;
  memcpy(plain2, plain, sizeof plain);
  plain2[300] = 'q'; /* past the cut */
  const char *const l1[] = {"v", odd, NULL}, *const l2[] = {"v", plain, NULL}, *const l3[] = {"v", plain2, NULL};
  metrics_add(m, "long", l1, 1);
  metrics_add(m, "long", l2, 1);
  metrics_add(m, "long", l3, 1);
  char *got = metrics_render(m);
  char *want =
      util_fmt("# TYPE long gauge\nlong{v=\"%.*s\"} 2\nlong{v=\"%s\"} 1\n", METRICS_MAX_VALUE_BYTES, plain, want_odd);
  assert_string_equal(got, want);
  free(want);
  free(got);
  metrics_free(m);
}

/* ------------------------------------------------------------ the cap --- */

static void test_series_cap(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "acts_total", METRIC_COUNTER, "Per activity.", NULL, 0);
  char name[32];
  for (int i = 0; i < METRICS_MAX_SERIES; i++) {
    snprintf(name, sizeof name, "act%04d", i);
    const char *const lbl[] = {"activity", name, "status", "ok", NULL};
    metrics_add(m, "acts_total", lbl, 1);
  }
  /* past the cap: new label sets fold into one series, old ones still count */
  for (int i = 0; i < 5; i++) {
    snprintf(name, sizeof name, "invented%d", i);
    const char *const lbl[] = {"activity", name, "status", i == 4 ? "error" : "ok", NULL};
    metrics_add(m, "acts_total", lbl, 1);
  }
  const char *const old[] = {"activity", "act0007", "status", "ok", NULL};
  metrics_add(m, "acts_total", old, 1);
  char *got = metrics_render(m);
  assert_int_equal(count_lines(got, "acts_total{"), METRICS_MAX_SERIES + 1);
  assert_non_null(strstr(got, "\nacts_total{activity=\"_other\",status=\"_other\"} 5\n"));
  assert_non_null(strstr(got, "\nacts_total{activity=\"act0007\",status=\"ok\"} 2\n"));
  assert_non_null(strstr(got, "\nacts_total{activity=\"act0999\",status=\"ok\"} 1\n"));
  assert_null(strstr(got, "invented"));
  free(got);
  /* other families are not affected */
  metrics_add(m, "other_total", old, 1);
  got = metrics_render(m);
  assert_non_null(strstr(got, "\nother_total{activity=\"act0007\",status=\"ok\"} 1\n"));
  free(got);
  /* clear gives the family its room back */
  metrics_clear(m, "acts_total");
  const char *const fresh[] = {"activity", "fresh", "status", "ok", NULL};
  metrics_add(m, "acts_total", fresh, 1);
  got = metrics_render(m);
  assert_int_equal(count_lines(got, "acts_total{"), 1);
  assert_non_null(strstr(got, "\nacts_total{activity=\"fresh\",status=\"ok\"} 1\n"));
  free(got);
  metrics_free(m);
}

/* ------------------------------------------------ clear and declaring --- */

static void test_clear(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "running", METRIC_GAUGE, "Running workflows.", NULL, 0);
  metrics_declare(m, "kept_total", METRIC_COUNTER, "Not cleared.", NULL, 0);
  const char *const a[] = {"state", "running", NULL}, *const b[] = {"state", "waiting", NULL};
  metrics_set(m, "running", a, 3);
  metrics_set(m, "running", b, 4);
  metrics_add(m, "kept_total", NULL, 1);
  metrics_clear(m, "running");
  metrics_clear(m, "never_declared"); /* nothing to clear: nothing happens */
  expect_render(m,
                "# HELP kept_total Not cleared.\n"
                "# TYPE kept_total counter\n"
                "kept_total 1\n"
                "# HELP running Running workflows.\n"
                "# TYPE running gauge\n");
  metrics_set(m, "running", b, 1); /* set afresh at the next scrape */
  expect_render(m,
                "# HELP kept_total Not cleared.\n"
                "# TYPE kept_total counter\n"
                "kept_total 1\n"
                "# HELP running Running workflows.\n"
                "# TYPE running gauge\n"
                "running{state=\"waiting\"} 1\n");
  /* a histogram's series go too */
  metrics_observe(m, "lat", NULL, 1);
  metrics_clear(m, "lat");
  char *got = metrics_render(m);
  assert_non_null(strstr(got, "# TYPE lat histogram\n"));
  assert_null(strstr(got, "lat_"));
  free(got);
  metrics_free(m);
}

static void test_declare_twice(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "c_total", METRIC_COUNTER, "The first.", NULL, 0);
  metrics_add(m, "c_total", NULL, 4);
  metrics_declare(m, "c_total", METRIC_GAUGE, "The second.", NULL, 0); /* ignored, value kept */
  metrics_add(m, "c_total", NULL, -1);                                 /* still a counter: cannot go down */
  expect_render(m,
                "# HELP c_total The first.\n"
                "# TYPE c_total counter\n"
                "c_total 4\n");
  metrics_free(m);
}

/* A use before any declaration makes a gauge (observe: a histogram) without
 * help; the declaration that comes later takes effect, and keeps the values
 * when their shape fits. */
static void test_use_before_declare(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_add(m, "early", NULL, 2);
  metrics_observe(m, "early_hist", NULL, 0.2);
  metrics_observe(m, "reshaped", NULL, 0.2);
  expect_render(m,
                "# TYPE early gauge\n"
                "early 2\n"
                "# TYPE early_hist histogram\n"
                "early_hist_bucket{le=\"0.001\"} 0\n"
                "early_hist_bucket{le=\"0.005\"} 0\n"
                "early_hist_bucket{le=\"0.01\"} 0\n"
                "early_hist_bucket{le=\"0.025\"} 0\n"
                "early_hist_bucket{le=\"0.05\"} 0\n"
                "early_hist_bucket{le=\"0.1\"} 0\n"
                "early_hist_bucket{le=\"0.25\"} 1\n"
                "early_hist_bucket{le=\"0.5\"} 1\n"
                "early_hist_bucket{le=\"1\"} 1\n"
                "early_hist_bucket{le=\"2.5\"} 1\n"
                "early_hist_bucket{le=\"5\"} 1\n"
                "early_hist_bucket{le=\"10\"} 1\n"
                "early_hist_bucket{le=\"30\"} 1\n"
                "early_hist_bucket{le=\"60\"} 1\n"
                "early_hist_bucket{le=\"+Inf\"} 1\n"
                "early_hist_sum 0.2\n"
                "early_hist_count 1\n"
                "# TYPE reshaped histogram\n"
                "reshaped_bucket{le=\"0.001\"} 0\n"
                "reshaped_bucket{le=\"0.005\"} 0\n"
                "reshaped_bucket{le=\"0.01\"} 0\n"
                "reshaped_bucket{le=\"0.025\"} 0\n"
                "reshaped_bucket{le=\"0.05\"} 0\n"
                "reshaped_bucket{le=\"0.1\"} 0\n"
                "reshaped_bucket{le=\"0.25\"} 1\n"
                "reshaped_bucket{le=\"0.5\"} 1\n"
                "reshaped_bucket{le=\"1\"} 1\n"
                "reshaped_bucket{le=\"2.5\"} 1\n"
                "reshaped_bucket{le=\"5\"} 1\n"
                "reshaped_bucket{le=\"10\"} 1\n"
                "reshaped_bucket{le=\"30\"} 1\n"
                "reshaped_bucket{le=\"60\"} 1\n"
                "reshaped_bucket{le=\"+Inf\"} 1\n"
                "reshaped_sum 0.2\n"
                "reshaped_count 1\n");
  const double one[] = {1};
  metrics_declare(m, "early", METRIC_COUNTER, "Now a counter.", NULL, 0);       /* a number stays a number */
  metrics_declare(m, "early_hist", METRIC_HISTOGRAM, "Same buckets.", NULL, 0); /* the same buckets */
  metrics_declare(m, "reshaped", METRIC_HISTOGRAM, "Other buckets.", one, 1);   /* cannot be re-bucketed */
  metrics_declare(m, "early", METRIC_GAUGE, "A third time.", NULL, 0);          /* declared now: ignored */
  char *got = metrics_render(m);
  assert_non_null(strstr(got, "# HELP early Now a counter.\n# TYPE early counter\nearly 2\n"));
  assert_non_null(strstr(got, "# HELP early_hist Same buckets.\n# TYPE early_hist histogram\n"));
  assert_non_null(strstr(got, "early_hist_count 1\n"));
  assert_non_null(strstr(got, "# HELP reshaped Other buckets.\n# TYPE reshaped histogram\n"));
  assert_null(strstr(got, "reshaped_"));
  free(got);
  metrics_observe(m, "reshaped", NULL, 0.2);
  got = metrics_render(m);
  assert_non_null(strstr(got,
                         "# TYPE reshaped histogram\n"
                         "reshaped_bucket{le=\"1\"} 1\n"
                         "reshaped_bucket{le=\"+Inf\"} 1\n"
                         "reshaped_sum 0.2\n"
                         "reshaped_count 1\n"));
  free(got);
  metrics_free(m);
}

/* ------------------------------------------------------------- misuse --- */

/* Uses the format cannot carry are dropped (each family says so once on
 * stderr); nothing invalid reaches the output. */
static void test_misuse_dropped(void **state) {
  (void)state;
  metrics *m = metrics_new();
  metrics_declare(m, "9starts_with_digit", METRIC_COUNTER, "Bad name.", NULL, 0);
  metrics_add(m, "9starts_with_digit", NULL, 1);
  metrics_add(m, "has-dash", NULL, 1);
  metrics_add(m, "has space", NULL, 1);
  metrics_add(m, "", NULL, 1);
  metrics_declare(m, "ok_total", METRIC_COUNTER, "Fine.", NULL, 0);
  metrics_add(m, "ok_total", NULL, -1);  /* a counter does not go down */
  metrics_add(m, "ok_total", NULL, NAN); /* nor becomes NaN */
  metrics_observe(m, "ok_total", NULL, 1);
  const char *const bad_name[] = {"bad-label", "x", NULL}, *const reserved[] = {"__name__", "x", NULL},
                    *const twice[] = {"a", "1", "a", "2", NULL}, *const no_value[] = {"a", NULL},
                    *const le[] = {"le", "1", NULL};
  metrics_add(m, "ok_total", bad_name, 1);
  metrics_add(m, "ok_total", reserved, 1);
  metrics_add(m, "ok_total", twice, 1);
  metrics_add(m, "ok_total", no_value, 1);
  metrics_declare(m, "h", METRIC_HISTOGRAM, "A histogram.", (const double[]){1}, 1);
  metrics_observe(m, "h", le, 0.5); /* le is the bucket label */
  metrics_add(m, "h", NULL, 1);
  metrics_set(m, "h", NULL, 1);
  metrics_add(m, "ok_total", NULL, 1);
  metrics_add(NULL, "ok_total", NULL, 1);
  metrics_add(m, NULL, NULL, 1);
  expect_render(m,
                "# HELP h A histogram.\n"
                "# TYPE h histogram\n"
                "# HELP ok_total Fine.\n"
                "# TYPE ok_total counter\n"
                "ok_total 1\n");
  /* a counter can be set, mirroring a count kept elsewhere */
  metrics_set(m, "ok_total", NULL, 42);
  char *got = metrics_render(m);
  assert_non_null(strstr(got, "\nok_total 42\n"));
  free(got);
  metrics_free(m);
  got = metrics_render(NULL);
  assert_string_equal(got, "");
  free(got);
}

/* ---------------------------------------------------------------- bugs --- */

/* The shortest %g precision that reads back printed 10 as "1e+01" (%.1g),
 * so the default buckets showed le="1e+01", le="3e+01", le="6e+01" and a
 * counter at 120 read "1.2e+02": valid, but not what anyone reads or greps
 * for. Integers below 1e15 are now printed in plain digits. */
static void BUG_integer_in_exponent_form(void **state) {
  (void)state;
  metrics *m = metrics_new();
  const double bounds[] = {10, 30, 100};
  metrics_declare(m, "h", METRIC_HISTOGRAM, NULL, bounds, 3);
  metrics_observe(m, "h", NULL, 20);
  metrics_set(m, "big", NULL, 123456789012345);
  metrics_set(m, "huge", NULL, 1e15);
  metrics_set(m, "negative", NULL, -120);
  expect_render(m,
                "# TYPE big gauge\n"
                "big 123456789012345\n"
                "# TYPE h histogram\n"
                "h_bucket{le=\"10\"} 0\n"
                "h_bucket{le=\"30\"} 1\n"
                "h_bucket{le=\"100\"} 1\n"
                "h_bucket{le=\"+Inf\"} 1\n"
                "h_sum 20\n"
                "h_count 1\n"
                "# TYPE huge gauge\n"
                "huge 1e+15\n"
                "# TYPE negative gauge\n"
                "negative -120\n");
  metrics_free(m);
}

/* The span exporter's counts (api_metrics_otel, GET /metrics while tracing
 * is on): each field of otel_stats in its series. */
static void test_otel_families(void **state) {
  (void)state;
  metrics *m = metrics_new();
  otel_stats s = {.spans_queued = 99, .spans_exported = 11, .spans_dropped_queue_full = 12,
                  .spans_dropped_export = 13, .spans_rejected = 14, .spans_dropped_invalid = 15,
                  .exports_ok = 21, .exports_failed = 22, .export_retries = 23, .queue_len = 31, .in_flight = 2};
  api_metrics_otel(m, &s);
  s.spans_exported = 41; /* set, not added: the counts are the exporter's */
  api_metrics_otel(m, &s);
  char *text = metrics_render(m);
  static const char *const want[] = {
      "# TYPE engine_otel_spans_total counter\n",
      "engine_otel_spans_total{outcome=\"exported\"} 41\n",
      "engine_otel_spans_total{outcome=\"dropped_queue_full\"} 12\n",
      "engine_otel_spans_total{outcome=\"dropped_export\"} 13\n",
      "engine_otel_spans_total{outcome=\"rejected\"} 14\n",
      "engine_otel_spans_total{outcome=\"dropped_invalid\"} 15\n",
      "# TYPE engine_otel_exports_total counter\n",
      "engine_otel_exports_total{result=\"ok\"} 21\n",
      "engine_otel_exports_total{result=\"failed\"} 22\n",
      "engine_otel_exports_total{result=\"retry\"} 23\n",
      "# TYPE engine_otel_queue_spans gauge\n",
      "engine_otel_queue_spans 31\n",
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    if (!strstr(text, want[i])) fail_msg("no line %s in:\n%s", want[i], text);
  assert_int_equal(count_lines(text, "engine_otel_"), 9);
  free(text);
  metrics_free(m);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counter),
      cmocka_unit_test(test_gauge_values),
      cmocka_unit_test(test_sorted_output),
      cmocka_unit_test(test_histogram_buckets),
      cmocka_unit_test(test_histogram_default_buckets),
      cmocka_unit_test(test_histogram_bad_bounds),
      cmocka_unit_test(test_escaping),
      cmocka_unit_test(test_invalid_utf8),
      cmocka_unit_test(test_long_label_value),
      cmocka_unit_test(test_series_cap),
      cmocka_unit_test(test_clear),
      cmocka_unit_test(test_declare_twice),
      cmocka_unit_test(test_use_before_declare),
      cmocka_unit_test(test_misuse_dropped),
      cmocka_unit_test(test_otel_families),
  };
  const struct CMUnitTest bugs[] = {
      cmocka_unit_test(BUG_integer_in_exponent_form),
  };
  if (argc > 1 && strcmp(argv[1], "bugs") == 0)
    return cmocka_run_group_tests_name("unit_metrics_bugs", bugs, NULL, NULL);
  return cmocka_run_group_tests_name("unit_metrics", tests, NULL, NULL);
}
