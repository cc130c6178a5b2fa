/* otel_config: see otel_config.h. The names, defaults and meanings are the
 * OpenTelemetry specification's (configuration/sdk-environment-variables.md,
 * protocol/exporter.md, resource/sdk.md); where the engine departs from it,
 * the comment at that place says so. */
#include "otel_config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "json.h"
#include "render.h"
#include "util.h"

#ifndef ENGINE_VERSION
#define ENGINE_VERSION "unknown"
#endif

/* How much of a bad value an error shows (render_buf cuts the rest). */
#define SHOWN_MAX 160

/* The variable's value, or NULL when it is unset or empty (the same thing,
 * the spec says). */
static const char *var(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The signal-specific variable when set, else the general one; *name is
 * the one read, for messages. */
static const char *var2(const char *traces, const char *general, const char **name) {
  const char *v = var(traces);
  *name = v ? traces : general;
  return v ? v : var(general);
}

/* Sets err to "NAME must be WHAT, not "VALUE"" with the value terminal-safe. */
static int bad(char *err, size_t errlen, const char *name, const char *value, const char *what) {
  char shown[SHOWN_MAX];
  render_buf(shown, sizeof shown, value, strlen(value), 0);
  util_seterr(err, errlen, "%s must be %s, not \"%s\"", name, what, shown);
  return -1;
}

/* --------------------------------------------------- key=value lists --- */

typedef struct pairs {
  char **keys, **values;
  size_t n, cap;
} pairs;

/* Sets key to value, replacing an earlier one of that key (the last wins). */
static void pairs_put(pairs *p, const char *key, size_t keylen, const char *value, size_t valuelen) {
  for (size_t i = 0; i < p->n; i++)
    if (strlen(p->keys[i]) == keylen && memcmp(p->keys[i], key, keylen) == 0) {
      free(p->values[i]);
      p->values[i] = util_fmt("%.*s", (int)valuelen, value);
      return;
    }
  if (p->n == p->cap) {
    p->cap = p->cap ? p->cap * 2 : 8;
    p->keys = util_xrealloc(p->keys, p->cap * sizeof *p->keys);
    p->values = util_xrealloc(p->values, p->cap * sizeof *p->values);
  }
  p->keys[p->n] = util_fmt("%.*s", (int)keylen, key);
  p->values[p->n++] = util_fmt("%.*s", (int)valuelen, value);
}

static void pairs_free(pairs *p) {
  for (size_t i = 0; i < p->n; i++) {
    free(p->keys[i]);
    free(p->values[i]);
  }
  free(p->keys);
  free(p->values);
  memset(p, 0, sizeof *p);
}

static int hexval(int c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* s[0..n) percent-decoded into *out (malloc'd): 0, or -1 for a '%' without
 * two hex digits after it, or one that makes a NUL byte. */
static int percent_decode(const char *s, size_t n, char **out, size_t *outlen) {
  char *d = util_xmalloc(n + 1);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '%') {
      d[k++] = s[i];
      continue;
    }
    int hi = i + 2 < n ? hexval((unsigned char)s[i + 1]) : -1;
    int lo = hi >= 0 ? hexval((unsigned char)s[i + 2]) : -1;
    if (lo < 0 || (hi == 0 && lo == 0)) {
      free(d);
      return -1;
    }
    d[k++] = (char)(hi * 16 + lo);
    i += 2;
  }
  d[k] = 0;
  *out = d;
  *outlen = k;
  return 0;
}

static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* An HTTP header name's character (RFC 9110's tchar). */
static int is_tchar(unsigned char c) { return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c)); }

/* A list "k1=v1,k2=v2" (W3C Baggage's form, without properties) into p:
 * spaces around keys and values dropped, values percent-decoded (keys too
 * for resource attributes; a header's name is a token, checked as one). An
 * empty member (",,", a trailing ",") is skipped. Headers are secrets as
 * often as not (Authorization=...): their errors name the member by its
 * place and the header by its name, never show a value. 0, or -1 with err. */
static int parse_list(const char *name, const char *value, int headers, pairs *p, char *err, size_t errlen) {
  char shown[SHOWN_MAX];
  int member = 0;
  for (const char *s = value; *s;) {
    const char *end = strchr(s, ',');
    if (!end) end = s + strlen(s);
    const char *a = s, *b = end;
    s = *end ? end + 1 : end;
    while (a < b && is_ows(*a)) a++;
    while (b > a && is_ows(b[-1])) b--;
    if (a == b) continue;
    member++;
    const char *eq = memchr(a, '=', (size_t)(b - a));
    if (!eq) {
      if (headers)
        util_seterr(err, errlen, "%s: member %d has no '=' (it must be name=value, comma-separated; not shown: it may "
                    "hold a secret)", name, member);
      else
        util_seterr(err, errlen, "%s: \"%s\" has no '=' (it must be key=value, comma-separated)", name,
                    render_buf(shown, sizeof shown, a, (size_t)(b - a), 0));
      return -1;
    }
    const char *ka = a, *kb = eq, *va = eq + 1, *vb = b;
    while (kb > ka && is_ows(kb[-1])) kb--;
    while (va < vb && is_ows(*va)) va++;
    char *key = NULL, *val = NULL;
    size_t keylen = 0, vallen = 0;
    if (headers) {
      int token = kb > ka;
      for (const char *c = ka; c < kb && token; c++) token = is_tchar((unsigned char)*c);
      if (!token) {
        util_seterr(err, errlen, "%s: member %d has no header name before '=', or one with a character a header name "
                    "cannot have", name, member);
        return -1;
      }
      key = util_fmt("%.*s", (int)(kb - ka), ka);
      keylen = (size_t)(kb - ka);
    } else if (percent_decode(ka, (size_t)(kb - ka), &key, &keylen) != 0 || keylen == 0) {
      free(key);
      util_seterr(err, errlen, "%s: the key of \"%s\" is %s", name, render_buf(shown, sizeof shown, a, (size_t)(b - a), 0),
                  kb == ka ? "empty" : "not percent-encoded right (%XX, two hex digits, not %00)");
      return -1;
    }
    if (percent_decode(va, (size_t)(vb - va), &val, &vallen) != 0) {
      if (headers)
        util_seterr(err, errlen, "%s: the value of header %s is not percent-encoded right (%%XX, two hex digits, not "
                    "%%00)", name, render_buf(shown, sizeof shown, key, keylen, 0));
      else
        util_seterr(err, errlen, "%s: the value of \"%s\" is not percent-encoded right (%%XX, two hex digits, not %%00)",
                    name, render_buf(shown, sizeof shown, a, (size_t)(b - a), 0));
      free(key);
      return -1;
    }
    for (size_t i = 0; headers && i < vallen; i++) { /* no second header smuggled in, no bytes a server refuses */
      unsigned char c = (unsigned char)val[i];
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        util_seterr(err, errlen, "%s: the value of header %s holds a control character (a line break?)", name,
                    render_buf(shown, sizeof shown, key, keylen, 0));
        free(key);
        free(val);
        return -1;
      }
    }
    pairs_put(p, key, keylen, val, vallen);
    free(key);
    free(val);
  }
  return 0;
}

/* ------------------------------------------------------------ parts --- */

/* A URL the exporter can POST to: http:// or https://, a host, no space or
 * control character. 0, or -1 with err. */
static int check_url(const char *name, const char *url, char *err, size_t errlen) {
  for (const unsigned char *c = (const unsigned char *)url; *c; c++)
    if (*c <= 0x20 || *c == 0x7f) return bad(err, errlen, name, url, "a URL without spaces or control characters");
  size_t scheme = strncasecmp(url, "http://", 7) == 0 ? 7 : strncasecmp(url, "https://", 8) == 0 ? 8 : 0;
  if (!scheme) return bad(err, errlen, name, url, "an http:// or https:// URL");
  if (!url[scheme] || strchr("/?#", url[scheme])) return bad(err, errlen, name, url, "a URL with a host");
  return 0;
}

/* The URL batches go to: the traces endpoint as it is, or the base endpoint
 * with v1/traces appended (protocol/exporter.md, "Endpoint URLs for
 * OTLP/HTTP"). NULL when neither is set (tracing off); -1 in *rc on error. */
static char *traces_url(int *rc, char *err, size_t errlen) {
  *rc = 0;
  const char *v = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (v) {
    if (check_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, err, errlen) != 0) *rc = -1;
    return *rc ? NULL : util_strdup(v);
  }
  v = var("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!v) return NULL;
  if (check_url("OTEL_EXPORTER_OTLP_ENDPOINT", v, err, errlen) != 0) {
    *rc = -1;
    return NULL;
  }
  return util_fmt("%s%sv1/traces", v, v[strlen(v) - 1] == '/' ? "" : "/");
}

/* url for the log (malloc'd): scheme://host[:port]/path, without the
 * user:password@ and the ?query or #fragment that may carry a credential. */
static char *url_for_log(const char *url) {
  const char *host = strstr(url, "://") + 3, *end = host + strcspn(host, "/?#");
  const char *at = memchr(host, '@', (size_t)(end - host));
  const char *from = at ? at + 1 : host, *path_end = end + strcspn(end, "?#");
  return util_fmt("%.*s%s%.*s%.*s", (int)(host - url), url, at ? "***@" : "", (int)(end - from), from,
                  (int)(path_end - end), end);
}

/* A whole-number setting of the table (settings.c, where its range is), in
 * *out; an empty or unset one is its default. */
static int setting_int(const char *key, long long *out, char *err, size_t errlen) {
  return config_int(key, out, err, errlen);
}

/* The sampler and its argument. */
static int read_sampler(otel_config *c, char *err, size_t errlen) {
  static const struct {
    const char *name;
    otel_root_sampler root;
    int parent_based;
  } SAMPLERS[] = {{"always_on", OTEL_ROOT_ALWAYS_ON, 0},
                  {"always_off", OTEL_ROOT_ALWAYS_OFF, 0},
                  {"traceidratio", OTEL_ROOT_RATIO, 0},
                  {"parentbased_always_on", OTEL_ROOT_ALWAYS_ON, 1},
                  {"parentbased_always_off", OTEL_ROOT_ALWAYS_OFF, 1},
                  {"parentbased_traceidratio", OTEL_ROOT_RATIO, 1}};
  const char *s = var("OTEL_TRACES_SAMPLER");
  c->root = OTEL_ROOT_ALWAYS_ON; /* the spec's default: parentbased_always_on */
  c->parent_based = 1;
  c->ratio = 1;
  if (s) {
    size_t i = 0, n = sizeof SAMPLERS / sizeof *SAMPLERS;
    while (i < n && strcasecmp(s, SAMPLERS[i].name) != 0) i++; /* enums are case-insensitive */
    if (i == n)
      return bad(err, errlen, "OTEL_TRACES_SAMPLER", s,
                 "one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, "
                 "parentbased_traceidratio");
    c->root = SAMPLERS[i].root;
    c->parent_based = SAMPLERS[i].parent_based;
  }
  /* the argument means something to the ratio samplers only, and only when
   * OTEL_TRACES_SAMPLER names one; the others ignore it, as the spec says */
  const char *arg = var("OTEL_TRACES_SAMPLER_ARG");
  if (c->root == OTEL_ROOT_RATIO && arg) {
    char *end;
    errno = 0;
    double r = strtod(arg, &end);
    while (is_ows(*end)) end++;
    if (errno || end == arg || *end || !(r >= 0 && r <= 1))
      return bad(err, errlen, "OTEL_TRACES_SAMPLER_ARG", arg, "a number from 0 to 1 (the ratio of traces kept)");
    c->ratio = r;
  }
  /* rejection threshold T on 56 bits: a trace id whose last 56 bits R are
   * >= T is kept (trace/sdk.md, ProbabilitySampler; the TraceIdRatioBased
   * requirements: deterministic, and a trace kept at one ratio is kept at
   * every higher one) */
  double t = ldexp(1.0 - c->ratio, 56);
  c->threshold = t >= ldexp(1.0, 56) ? (uint64_t)1 << 56 : (uint64_t)llround(t);
  return 0;
}

/* The resource's attributes as OTLP JSON: the SDK's own, then
 * OTEL_RESOURCE_ATTRIBUTES over them, then OTEL_SERVICE_NAME over both
 * (resource/sdk.md: it takes precedence). */
static char *resource_json(const char *version, char *err, size_t errlen) {
  pairs p = {0};
  static const char *const SDK[][2] = {{"service.name", "engine"},
                                       {"telemetry.sdk.name", "engine"},
                                       {"telemetry.sdk.language", "c"}};
  for (size_t i = 0; i < sizeof SDK / sizeof *SDK; i++)
    pairs_put(&p, SDK[i][0], strlen(SDK[i][0]), SDK[i][1], strlen(SDK[i][1]));
  pairs_put(&p, "telemetry.sdk.version", 21, version, strlen(version));
  pairs_put(&p, "service.version", 15, version, strlen(version));
  const char *attrs = var("OTEL_RESOURCE_ATTRIBUTES");
  if (attrs && parse_list("OTEL_RESOURCE_ATTRIBUTES", attrs, 0, &p, err, errlen) != 0) {
    pairs_free(&p);
    return NULL;
  }
  const char *service = var("OTEL_SERVICE_NAME");
  if (service) pairs_put(&p, "service.name", 12, service, strlen(service));
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  for (size_t i = 0; i < p.n; i++) {
    char *k = json_quote(p.keys[i]), *v = json_quote(p.values[i]); /* JSON is UTF-8: invalid bytes become U+FFFD */
    char *kv = util_fmt("%s{\"key\":%s,\"value\":{\"stringValue\":%s}}", i ? "," : "", k, v);
    ubuf_add(&b, kv, strlen(kv));
    free(kv);
    free(k);
    free(v);
  }
  ubuf_add(&b, "]", 2);
  pairs_free(&p);
  return b.p;
}

/* The request's headers: the configured ones (the _TRACES_ form replaces
 * the general one), then Content-Type and User-Agent unless configured. */
static int read_headers(otel_config *c, char *err, size_t errlen) {
  const char *name, *v = var2("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS", &name);
  pairs p = {0};
  if (v && parse_list(name, v, 1, &p, err, errlen) != 0) {
    pairs_free(&p);
    return -1;
  }
  int has_type = 0, has_agent = 0;
  c->headers = util_xcalloc(p.n + 2, sizeof *c->headers);
  for (size_t i = 0; i < p.n; i++) {
    has_type |= strcasecmp(p.keys[i], "content-type") == 0;
    has_agent |= strcasecmp(p.keys[i], "user-agent") == 0;
    c->headers[c->nheaders++] = util_fmt("%s: %s", p.keys[i], p.values[i]);
  }
  if (!has_type) c->headers[c->nheaders++] = util_strdup("Content-Type: application/json");
  if (!has_agent) c->headers[c->nheaders++] = util_fmt("User-Agent: engine-otlp-exporter/%s", c->version);
  pairs_free(&p);
  return 0;
}

/* Whether tracing is switched off by name: OTEL_SDK_DISABLED=true, or
 * OTEL_TRACES_EXPORTER=none. 1 off, 0 not, -1 with err for a value that is
 * neither of what they take. */
static int switched_off(char *err, size_t errlen) {
  const char *v = var("OTEL_SDK_DISABLED");
  /* the spec reads any other value as false with a warning; the engine
   * refuses it, as every bad value ("yes" or "1" meant something) */
  if (v && strcasecmp(v, "true") != 0 && strcasecmp(v, "false") != 0)
    return bad(err, errlen, "OTEL_SDK_DISABLED", v, "true or false");
  if (v && strcasecmp(v, "true") == 0) return 1;
  v = var("OTEL_TRACES_EXPORTER");
  if (v && strcasecmp(v, "none") == 0) return 1;
  if (v && strcasecmp(v, "otlp") != 0)
    return bad(err, errlen, "OTEL_TRACES_EXPORTER", v, "otlp or none (the engine has the OTLP exporter only)");
  return 0;
}

/* The variables of what is not built; set, they are refused rather than
 * ignored: a certificate the operator named and the engine did not use
 * would be a silent downgrade. */
static int refuse_unbuilt(char *err, size_t errlen) {
  static const char *const TLS[] = {"CERTIFICATE", "CLIENT_KEY", "CLIENT_CERTIFICATE"};
  for (size_t i = 0; i < sizeof TLS / sizeof *TLS; i++) {
    char general[64], traces[64];
    snprintf(general, sizeof general, "OTEL_EXPORTER_OTLP_%s", TLS[i]);
    snprintf(traces, sizeof traces, "OTEL_EXPORTER_OTLP_TRACES_%s", TLS[i]);
    const char *name, *v = var2(traces, general, &name);
    if (v) {
      util_seterr(err, errlen, "%s is set, and the engine's exporter has no TLS settings of its own (it trusts the "
                  "system's certificates): unset it", name);
      return -1;
    }
  }
  const char *name, *v = var2("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL", &name);
  if (v && strcasecmp(v, "http/json") != 0) {
    char shown[SHOWN_MAX];
    render_buf(shown, sizeof shown, v, strlen(v), 0);
    if (strcasecmp(v, "http/protobuf") == 0 || strcasecmp(v, "grpc") == 0)
      util_seterr(err, errlen, "%s is \"%s\": this engine is built with OTLP over HTTP in JSON only; set it to "
                  "http/json (every collector takes it on its HTTP port, 4318)", name, shown);
    else
      util_seterr(err, errlen, "%s must be http/json (or http/protobuf, grpc: not built), not \"%s\"", name, shown);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------- read --- */

int otel_config_read(otel_config *c, char *err, size_t errlen) {
  memset(c, 0, sizeof *c);
  if (errlen) *err = 0;
  int off = switched_off(err, errlen);
  if (off != 0) return off < 0 ? -1 : 0;
  int rc;
  c->url = traces_url(&rc, err, errlen);
  if (rc) return -1;
  if (!c->url) return 0; /* no endpoint: off (SDKs default to localhost:4318; the engine sends nothing unasked) */
  c->url_shown = url_for_log(c->url);
  c->version = util_strdup(ENGINE_VERSION);
  long long timeout, delay, export_timeout, queue, batch;
  const char *tname;
  var2("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", &tname);
  if (refuse_unbuilt(err, errlen) != 0 ||
      setting_int(strcmp(tname, "OTEL_EXPORTER_OTLP_TIMEOUT") == 0 ? "otel_exporter_otlp_timeout"
                                                                   : "otel_exporter_otlp_traces_timeout",
                  &timeout, err, errlen) != 0 ||
      setting_int("otel_bsp_schedule_delay", &delay, err, errlen) != 0 ||
      setting_int("otel_bsp_export_timeout", &export_timeout, err, errlen) != 0 ||
      setting_int("otel_bsp_max_queue_size", &queue, err, errlen) != 0 ||
      setting_int("otel_bsp_max_export_batch_size", &batch, err, errlen) != 0 || read_sampler(c, err, errlen) != 0 ||
      read_headers(c, err, errlen) != 0 || !(c->resource = resource_json(c->version, err, errlen))) {
    otel_config_free(c);
    return -1;
  }
  /* "must be less than or equal to OTEL_BSP_MAX_QUEUE_SIZE": one set above
   * the queue is an error; the default 512 under a smaller queue becomes it */
  if (batch > queue) {
    if (var("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")) {
      util_seterr(err, errlen, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE (%lld) must not be more than OTEL_BSP_MAX_QUEUE_SIZE "
                  "(%lld)", batch, queue);
      otel_config_free(c);
      return -1;
    }
    batch = queue;
  }
  c->timeout_ms = (long)timeout;
  c->schedule_delay_ms = (long)delay;
  c->export_timeout_ms = (long)export_timeout;
  c->max_queue = (size_t)queue;
  c->max_batch = (size_t)batch;
  return 1;
}

void otel_config_free(otel_config *c) {
  free(c->url);
  free(c->url_shown);
  for (size_t i = 0; i < c->nheaders; i++) free(c->headers[i]);
  free(c->headers);
  free(c->resource);
  free(c->version);
  memset(c, 0, sizeof *c);
}
