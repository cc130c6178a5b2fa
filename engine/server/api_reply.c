/* api_reply: how a route answers. Every answer is JSON (errors
 * {"error":{"status":N,"message":...}}) and goes out through json_for_output;
 * a write is answered only once the group commit made it durable. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "json.h"

/* ------------------------------------------------------------ answers --- */

void api_reply_json(httpd_req *r, int status, char *json, const char *const *headers) {
  char *out = json_for_output(json, strlen(json));
  free(json);
  size_t n = strlen(out);
  out = util_xrealloc(out, n + 2);
  out[n] = '\n';
  httpd_respond(r, status, "application/json", out, n + 1, headers);
}

static void reply_verror(httpd_req *r, int status, const char *const *headers, const char *fmt, va_list ap) {
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
  char *q = json_quote(msg ? msg : "out of memory");
  free(msg);
  static const char *retry[] = {"Retry-After: 1", NULL};
  api_reply_json(r, status, util_fmt("{\"error\":{\"status\":%d,\"message\":%s}}", status, q),
                 headers ? headers : status == 503 ? retry : NULL);
  free(q);
}

void api_reply_error(httpd_req *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reply_verror(r, status, NULL, fmt, ap);
  va_end(ap);
}

void api_reply_error_h(httpd_req *r, int status, const char *const *headers, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  reply_verror(r, status, headers, fmt, ap);
  va_end(ap);
}

void api_reply_store_error(api *a, httpd_req *r, store *st) {
  (void)a;
  api_reply_error(r, 503, "the store cannot be read or written now (%s); nothing was changed, retry", store_errmsg(st));
}

void api_reply_read_error(api *a, httpd_req *r, store *st, int rc) {
  /* a damaged log (its hash chain, a damaged page) is not a retry: 500 naming the first bad seq */
  if (rc == STORE_ECORRUPT) return api_reply_error(r, 500, "%s", store_errmsg(st));
  api_reply_store_error(a, r, st);
}

/* ------------------------------------------------------ writes, durably --- */

typedef struct pending {
  api *a;
  httpd_req *r;
  int status;
  char *body;   /* the answer once committed; NULL: the workflow's summary */
  char *id;     /* for the summary */
  char *headers[2];
} pending;

static char *summary_json(api *a, const char *id) {
  view_summary s;
  char err[600];
  if (view_summary_load(a->rd, id, &s, err, sizeof err) != 1) return NULL;
  char *json = view_summary_json(&s);
  view_summary_free(&s);
  return json;
}

static void on_committed(void *ud, int ok) {
  pending *p = ud;
  if (!ok) {
    api_reply_error(p->r, 503, "the store could not be written (%s); nothing was recorded, retry",
                    store_errmsg(engine_store(p->a->e)));
  } else {
    char *body = p->body ? p->body : summary_json(p->a, p->id);
    p->body = NULL;
    if (body) api_reply_json(p->r, p->status, body, (const char *const *)p->headers);
    else api_reply_error(p->r, 503, "the workflow was written but cannot be read back now; GET it to see it");
  }
  free(p->body);
  free(p->id);
  free(p->headers[0]);
  free(p);
}

/* Answers r once what was written so far is committed. */
void api_answer_when_committed(api *a, httpd_req *r, int status, char *body, const char *id, const char *location) {
  pending *p = util_xcalloc(1, sizeof *p);
  p->a = a;
  p->r = r;
  p->status = status;
  p->body = body;
  p->id = id ? util_strdup(id) : NULL;
  if (location) p->headers[0] = util_fmt("Location: %s", location);
  engine_when_committed(a->e, on_committed, p);
}

/* A write refused: a store that failed is 503 (nothing was recorded). */
int api_store_down(api *a, httpd_req *r) {
  store *st = engine_store(a->e);
  if (!store_batch_failed(st)) return 0;
  api_reply_store_error(a, r, st);
  return 1;
}

/* --------------------------------------------------------------- lists --- */

void api_items_add(json_items *x, char *json) {
  if (x->n++) ubuf_add(&x->b, ",", 1);
  ubuf_add(&x->b, json, strlen(json));
  free(json);
}

/* Answers {"KEY":[items]} when the scan succeeded (rc), else the store's error. */
void api_reply_items(api *a, httpd_req *r, const char *key, json_items *x, int rc) {
  if (rc != STORE_OK) {
    ubuf_free(&x->b);
    return api_reply_store_error(a, r, a->rd);
  }
  char *out = util_fmt("{\"%s\":[%.*s]}", key, (int)x->b.n, x->b.p ? x->b.p : "");
  ubuf_free(&x->b);
  api_reply_json(r, 200, out, NULL);
}
