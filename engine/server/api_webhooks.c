/* api_webhooks: POST /hooks/{name}, a delivery to a trigger (verified and
 * mapped by lua/triggers.lua, deduplicated and recorded here), and GET
 * /v1/triggers/{name}/deliveries, what was delivered. */
#include <ctype.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_internal.h"
#include "json.h"

/* ------------------------------------------------------------ webhooks --- */

typedef struct headers_json {
  ubuf b;
  int n;
  const char *bad; /* a header whose name or value is not UTF-8 */
} headers_json;

static int add_header(void *ud, const char *name, const char *value) {
  headers_json *h = ud;
  char err[8];
  if (json_check_text(name, strlen(name), "h", err, sizeof err) || json_check_text(value, strlen(value), "h", err, sizeof err)) {
    h->bad = name;
    return 1;
  }
  /* a repeated header reaches the trigger as one list (RFC 9110): a second
   * signature header makes the pair fail verification, never pick one */
  char lower[256];
  size_t i = 0;
  for (; name[i] && i < sizeof lower - 1; i++) lower[i] = (char)tolower((unsigned char)name[i]);
  lower[i] = 0;
  char *k = json_quote(lower), *v = json_quote(value);
  if (h->n++) ubuf_add(&h->b, ",", 1);
  ubuf_add(&h->b, "[", 1);
  ubuf_add(&h->b, k, strlen(k));
  ubuf_add(&h->b, ",", 1);
  ubuf_add(&h->b, v, strlen(v));
  ubuf_add(&h->b, "]", 1);
  free(k);
  free(v);
  return 0;
}

typedef struct delivery_found {
  char wf_id[ENGINE_ID_MAX + 1];
} delivery_found;

static int found_delivery(void *ud, const delivery_row *d) {
  delivery_found *f = ud;
  snprintf(f->wf_id, sizeof f->wf_id, "%s", d->wf_id ? d->wf_id : "");
  return 1;
}

/* Records the delivery and answers once that is committed. */
static void hook_answer(api *a, httpd_req *r, delivery_row *d, const char *message) {
  d->received_at = util_now_ms();
  if (!d->detail && strcmp(d->outcome, "started") != 0) d->detail = message; /* why, in the record too */
  if (store_delivery_put(engine_store(a->e), d) < 0 && api_store_down(a, r)) return;
  char *qo = json_quote(d->outcome), *qm = json_quote(message ? message : ""), *qt = json_quote(d->trigger);
  char *qd = d->delivery && *d->delivery ? json_quote(d->delivery) : util_strdup("null");
  char *qw = d->wf_id ? json_quote(d->wf_id) : util_strdup("null");
  char *body = d->status >= 400
                   ? util_fmt("{\"error\":{\"status\":%d,\"message\":%s},\"outcome\":%s,\"trigger\":%s,\"delivery\":%s}",
                              d->status, qm, qo, qt, qd)
                   : util_fmt("{\"outcome\":%s,\"trigger\":%s,\"delivery\":%s,\"workflow_id\":%s,\"message\":%s}", qo, qt,
                              qd, qw, qm);
  char location[ENGINE_ID_MAX + 32];
  if (d->wf_id) snprintf(location, sizeof location, "/v1/workflows/%s", d->wf_id);
  api_answer_when_committed(a, r, d->status, body, NULL, d->wf_id && d->status < 300 ? location : NULL);
  free(qo), free(qm), free(qt), free(qd), free(qw);
}

/* A string field of the hook's answer on the api's Lua stack top into out
 * ("" when absent). Returns 1 when it had to be cut, at a UTF-8 boundary (a
 * record PostgreSQL takes, an id never silently shortened). */
static int answer_field(lua_State *L, const char *key, char *out, size_t n) {
  lua_getfield(L, -1, key);
  size_t len = 0;
  const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : "";
  size_t k = len < n ? len : n - 1;
  if (k < len)
    while (k > 0 && ((unsigned char)v[k] & 0xC0) == 0x80) k--;
  memcpy(out, v, k);
  out[k] = 0;
  lua_pop(L, 1);
  return k < len;
}

/* POST /hooks/{name}: the trigger verifies the exact bytes and maps the
 * delivery (worker.trigger, lua/triggers.lua); here it is deduplicated and the
 * workflow started, the delivery recorded in the same batch, and the sender
 * answered only once that is durable: an accepted delivery is never lost and
 * never started twice. */
void api_h_hook(api *a, httpd_req *r, ctx *c) {
  delivery_row d = {0};
  d.trigger = c->p1;
  size_t nl = strlen(c->p1), ok_chars = strspn(c->p1, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-");
  if (nl > 64 || ok_chars != nl) { /* no trigger can have it: kept with the others to no trigger */
    d.trigger = "*", d.outcome = "rejected", d.status = 404;
    return hook_answer(a, r, &d, "no trigger answers this path (trigger routes are 1-64 of A-Z a-z 0-9 _ -)");
  }
  if (!a->triggers_dir) {
    d.outcome = "rejected", d.status = 404;
    return hook_answer(a, r, &d, "no trigger answers this: the server has no workflows directory (--workflows DIR) "
                                 "and so no triggers/ in it");
  }
  size_t len;
  const char *body = httpd_body(r, &len);
  char err[512];
  if (json_check_text(body, len, "the body", err, sizeof err) != 0) {
    d.outcome = "rejected", d.status = 400;
    return hook_answer(a, r, &d, err);
  }
  headers_json h = {0};
  httpd_each_header(r, add_header, &h);
  if (h.bad) {
    ubuf_free(&h.b);
    d.outcome = "rejected", d.status = 400;
    return hook_answer(a, r, &d, "a header is not UTF-8 text");
  }
  ubuf_add(&h.b, "", 1);
  /* the call's args, appended (not formatted: the body may be 25 MB); the
   * headers as [name, value] pairs, which Lua joins when one repeats */
  char *qdir = json_quote(a->triggers_dir), *qname = json_quote(c->p1), *qbody = json_quote(body), now[64];
  snprintf(now, sizeof now, "],\"now\":%lld,\"body\":", (long long)(util_now_ms() / 1000));
  ubuf p = {0};
  const char *parts[] = {"{\"args\":{\"dir\":", qdir, ",\"name\":", qname, ",\"header_list\":[", h.b.p ? h.b.p : "", now,
                         qbody, "}}", NULL};
  for (const char **q = parts; *q; q++) ubuf_add(&p, *q, strlen(*q));
  ubuf_add(&p, "", 1);
  free(qdir), free(qname), free(qbody);
  ubuf_free(&h.b);
  int ok = 0;
  char *json = NULL;
  int done = engine_hook_now(a->e, "trigger", p.p, &ok, &json);
  ubuf_free(&p);
  lua_State *L = a->L;
  lua_settop(L, 0);
  if (!done || !ok || json_decode_safe(L, json, strlen(json), err, sizeof err) != 0 || !lua_istable(L, -1)) {
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger could not run: %s", !done ? "it waited for something" : json ? json : err);
    hook_answer(a, r, &d, msg);
    free(msg);
    free(json);
    lua_settop(L, 0);
    return;
  }
  free(json);
  char outcome[16], detail[1024], delivery[256], workflow[256], id[ENGINE_ID_MAX + 1];
  answer_field(L, "outcome", outcome, sizeof outcome);
  answer_field(L, "detail", detail, sizeof detail);
  answer_field(L, "delivery", delivery, sizeof delivery); /* at most 200 bytes (lua/triggers.lua) */
  int long_name = answer_field(L, "workflow", workflow, sizeof workflow);
  int long_id = answer_field(L, "id", id, sizeof id);
  lua_getfield(L, -1, "status");
  d.status = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  char *input = api_field_json(a, "input");
  /* what the trigger's file says its starts may hold (lua/triggers.lua), as JSON */
  lua_getfield(L, -1, "starter_grants");
  char *held = util_strdup(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "[]");
  lua_settop(L, 0);
  d.delivery = delivery;
  if (strcmp(outcome, "start") != 0) {
    d.outcome = strcmp(outcome, "ignored") == 0 ? "ignored" : "rejected";
    /* deliveries to no trigger are kept together under "*" (no route has that
     * name), so a sender guessing names cannot spread rows over many keys */
    if (d.status == 404) d.trigger = "*";
    if (d.status < 200 || d.status > 599) d.status = 500;
    d.detail = detail;
    free(input);
    free(held);
    return hook_answer(a, r, &d, detail);
  }
  store *st = engine_store(a->e);
  delivery_found f = {""};
  int seen = *delivery ? store_delivery_find(st, c->p1, delivery, found_delivery, &f) : 0;
  if (seen < 0) {
    free(input);
    free(held);
    return api_reply_store_error(a, r, st);
  }
  if (seen == 1) {
    free(input);
    free(held);
    d.outcome = "duplicate", d.status = 200, d.wf_id = f.wf_id;
    char *msg = util_fmt("delivery %s was accepted before (workflow %s): this one starts nothing", delivery, f.wf_id);
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  char path[PATH_MAX], why[PATH_MAX + 256];
  if (long_name || long_id) snprintf(why, sizeof why, "its %s is too long", long_id ? "id" : "workflow name");
  if (long_name || long_id || api_script_path(a, workflow, path, sizeof path, why, sizeof why) != 0 ||
      (*id && engine_check_id(id, why, sizeof why) != 0)) {
    free(input);
    free(held);
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger's answer cannot start: %s", why);
    d.detail = msg;
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  if (!*id) engine_generate_id(workflow, id, sizeof id);
  char identity[sizeof c->p1 + 16];
  snprintf(identity, sizeof identity, "trigger:%s", c->p1);
  char *with = engine_input_with_starter(input ? input : "{}", identity, held, 1, err, sizeof err);
  free(input);
  free(held);
  if (!with) {
    d.outcome = "rejected", d.status = 500;
    char *msg = util_fmt("the trigger's input cannot start: %s", err);
    d.detail = msg;
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  d.wf_id = id;
  wf_row w;
  int exists = store_wf_get(st, id, &w);
  if (exists < 0) {
    free(with);
    return api_reply_store_error(a, r, st);
  }
  if (exists == 1) {
    /* the same work (a PR head delivered twice under two ids) runs once */
    wf_row_free(&w);
    free(with);
    d.outcome = "existing", d.status = 200;
    char *msg = util_fmt("workflow %s exists: this delivery starts nothing", id);
    hook_answer(a, r, &d, msg);
    return free(msg);
  }
  int existed = 0;
  trace_start trace; /* the sender's trace, if it sends one, recorded in the start */
  api_trace_context(r, &trace);
  int rc = engine_submit_queued(a->e, id, path, with, &trace, &existed, err, sizeof err);
  free(with);
  if (rc != 0) {
    if (api_store_down(a, r)) return;
    d.outcome = "rejected", d.status = 500, d.wf_id = NULL;
    d.detail = err;
    return hook_answer(a, r, &d, err);
  }
  d.outcome = "started", d.status = 202;
  hook_answer(a, r, &d, "accepted: the workflow starts");
  (void)c;
}

static int delivery_item(void *ud, const delivery_row *d) {
  api_items_add(ud, view_delivery_json(d));
  return 0;
}

/* GET /v1/triggers/{name}/deliveries: the newest first ("*": requests to no trigger). */
void api_h_deliveries(api *a, httpd_req *r, ctx *c) {
  int64_t limit;
  if (api_query_int(r, "limit", 50, 1000, &limit) != 0) return;
  if (limit == 0) limit = 50;
  json_items x = {{0}, 0};
  api_reply_items(a, r, "deliveries", &x, store_delivery_list(a->rd, c->p1, (int)limit, delivery_item, &x));
}
