/* api_workflows: the routes of /v1/workflows: start one (idempotent by id),
 * list them (pages, filters), show one, its history, send it a signal or a
 * message, cancel it, fork it (ops/fork.h), and the artifacts its session
 * saved. What each does is
 * the operation the CLI performs (client.c, session_view.c). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api_internal.h"
#include "approval.h"
#include "json.h"

/* ---- artifacts: the files a session saved (artifact.saved events), stored
 * by content hash (lua/activities/session.lua) ---- */

void api_h_artifacts(api *a, httpd_req *r, ctx *c) {
  (void)a;
  view_summary s;
  if (!api_load_summary(a, r, c->p1, &s)) return;
  api_reply_json(r, 200, util_fmt("{\"artifacts\":%s}", s.artifacts ? s.artifacts : "[]"), NULL);
  view_summary_free(&s);
}

typedef struct artifact_find {
  const char *sha;
  char *stored, *path;
} artifact_find;

static int artifact_item(void *ud, const char *v, size_t vn) {
  artifact_find *f = ud;
  char *sha = json_get_string(v, vn, "sha256");
  int hit = sha && strcmp(sha, f->sha) == 0;
  free(sha);
  if (!hit) return 0;
  f->stored = json_get_string(v, vn, "stored");
  f->path = json_get_string(v, vn, "path");
  return 1;
}

/* A name for Content-Disposition: the artifact's base name with anything
 * but A-Z a-z 0-9 . _ - replaced, so no header can be forged from it. */
static void download_name(const char *path, char *out, size_t n) {
  const char *base = path ? strrchr(path, '/') : NULL;
  base = base ? base + 1 : path && *path ? path : "artifact";
  size_t k = 0;
  for (; *base && k + 1 < n; base++)
    out[k++] = (isalnum((unsigned char)*base) || strchr("._-", *base)) ? *base : '_';
  out[k] = 0;
  if (!k || out[0] == '.') snprintf(out, n, "artifact");
}

#define ARTIFACT_MAX_DOWNLOAD (256u << 20)

void api_h_artifact(api *a, httpd_req *r, ctx *c) {
  if (strlen(c->p2) != 64 || strspn(c->p2, "0123456789abcdef") != 64)
    return api_reply_error(r, 400, "an artifact is named by its sha256: 64 lowercase hex digits");
  view_summary s;
  if (!api_load_summary(a, r, c->p1, &s)) return;
  artifact_find f = {c->p2, NULL, NULL};
  if (s.artifacts) json_each(s.artifacts, strlen(s.artifacts), artifact_item, &f);
  view_summary_free(&s);
  /* only a file this session saved, at the place the store put it, with the
   * content its hash names: the path in the event is never trusted alone */
  const char *slash = f.stored ? strrchr(f.stored, '/') : NULL;
  struct stat st;
  char *body = NULL;
  size_t len = 0;
  if (f.stored && slash && strcmp(slash + 1, c->p2) == 0 && lstat(f.stored, &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_size <= (off_t)ARTIFACT_MAX_DOWNLOAD)
    body = util_read_file(f.stored, &len);
  char hash[65] = "";
  if (body) util_sha256_hex(body, len, hash);
  if (!body || strcmp(hash, c->p2) != 0) {
    free(body);
    int saved = f.stored != NULL;
    free(f.stored);
    free(f.path);
    if (!saved) return api_reply_error(r, 404, "workflow '%s' saved no artifact %s", c->p1, c->p2);
    return api_reply_error(r, 404, "artifact %s of workflow '%s' is no longer stored (or not as saved)", c->p2, c->p1);
  }
  char name[120], disp[200];
  download_name(f.path, name, sizeof name);
  snprintf(disp, sizeof disp, "Content-Disposition: attachment; filename=\"%s\"", name);
  const char *headers[] = {disp, "Content-Security-Policy: default-src 'none'; sandbox", NULL};
  free(f.stored);
  free(f.path);
  httpd_respond(r, 200, "application/octet-stream", body, len, headers);
}

static const char *START_KEYS[] = {"script", "id", "input", NULL};

/* A start of an id that exists: the same script and input (whoever asks) is
 * the run that exists (200, its page), else 409; told once what the batch
 * holds is durable (a lost batch makes it a 503). */
static void answer_existing(api *a, httpd_req *r, const char *id, const char *path, const char *with, const wf_row *w,
                            const char *location) {
  char err[256];
  char *mine = engine_input_with_identity(with, "", 0, err, sizeof err),
       *theirs = engine_input_with_identity(w->input ? w->input : "null", "", 0, err, sizeof err);
  int same_input = mine && theirs && strcmp(mine, theirs) == 0, same_script = strcmp(w->script_name, path) == 0;
  free(mine);
  free(theirs);
  char *msg = NULL;
  if (!same_script)
    msg = util_fmt("workflow '%s' exists with another script (%s)", id, w->script_name);
  else if (!same_input)
    msg = util_fmt("workflow '%s' exists with a different input; choose another id, or send the same input", id);
  if (msg) {
    char *q = json_quote(msg);
    api_answer_when_committed(a, r, 409, util_fmt("{\"error\":{\"status\":409,\"message\":%s}}", q), NULL, NULL);
    free(q);
    free(msg);
  } else {
    api_answer_when_committed(a, r, 200, NULL, id, location);
  }
}

/* A start sent ahead (engine_start_sent): answered when its batch committed. */
typedef struct start_req {
  api *a;
  httpd_req *r;
  char *with;
  char path[PATH_MAX];
  char id[ENGINE_ID_MAX + 1];
  char location[ENGINE_ID_MAX + 32];
} start_req;

static void on_started(void *ud, int rc, const wf_row *w, const char *err) {
  start_req *q = ud;
  if (rc == 1) {
    /* its page from what the start wrote (a row, its first event, its task):
     * no read after the commit */
    char *hdr = util_fmt("Location: %s", q->location);
    const char *headers[] = {hdr, NULL};
    api_reply_json(q->r, 201, view_summary_json_started(w), headers);
    free(hdr);
  } else if (rc == 0) {
    answer_existing(q->a, q->r, q->id, q->path, q->with, w, q->location);
  } else {
    api_reply_error(q->r, 503, "the store could not be written (%s); nothing was recorded, retry", err);
  }
  free(q->with);
  free(q);
}

void api_h_start(api *a, httpd_req *r, ctx *c) {
  if (api_body_object(a, r, START_KEYS) != 0) return;
  char script[256], id[ENGINE_ID_MAX + 1], err[1024], path[PATH_MAX];
  int got = api_field_string(a, "script", script, sizeof script);
  if (got != 1)
    return api_reply_error(r, 400, "\"script\" is required: a string naming a file in the workflows directory");
  got = api_field_string(a, "id", id, sizeof id);
  if (got < 0) return api_reply_error(r, 400, "\"id\" must be a string of at most %d bytes", ENGINE_ID_MAX);
  char *input = api_field_json(a, "input");
  if (api_resolve_script(a, r, script, path, sizeof path) != 0) return free(input);
  if (got == 0) engine_generate_id(script, id, sizeof id);
  else if (engine_check_id(id, err, sizeof err) != 0) {
    free(input);
    return api_reply_error(r, 400, "%s", err);
  }
  /* what the starter holds (docs/grants.md): a token's grants, or every
   * grant without tokens (a single-user machine, as its scopes are) */
  char *held = NULL;
  if (strncmp(c->identity, "token:", 6) == 0 && token_grants_of_cached(a->tokens, a->rd, c->identity + 6, &held) < 0) {
    free(input);
    return api_reply_store_error(a, r, a->rd);
  }
  char *with = engine_input_with_starter(input ? input : "{}", c->identity,
                                         strncmp(c->identity, "token:", 6) == 0 ? (held ? held : "[]") : "\"*\"", 1,
                                         err, sizeof err);
  free(held);
  free(input);
  if (!with) return api_reply_error(r, 400, "%s", err);
  char location[ENGINE_ID_MAX + 32];
  snprintf(location, sizeof location, "/v1/workflows/%s", id);
  trace_start trace; /* the caller's trace, recorded in the start (an existing id's is kept as it is) */
  api_trace_context(r, &trace);
  if (store_can_send_starts(engine_store(a->e))) {
    /* PostgreSQL: the insert goes with the batch, the loop does not wait for it */
    start_req *q = util_xcalloc(1, sizeof *q);
    *q = (start_req){a, r, with, "", "", ""};
    snprintf(q->path, sizeof q->path, "%s", path);
    snprintf(q->id, sizeof q->id, "%s", id);
    snprintf(q->location, sizeof q->location, "%s", location);
    if (engine_start_sent(a->e, id, path, with, &trace, on_started, q, err, sizeof err) == 0) return;
    free(q);
    free(with);
    if (api_store_down(a, r)) return;
    return api_reply_error(r, 400, "%s", err);
  }
  /* one insert that starts it or finds the id's workflow (store_wf_start) */
  wf_row w;
  int rc = engine_start_or_find(a->e, id, path, with, &trace, &w, err, sizeof err);
  if (rc < 0) {
    free(with);
    if (api_store_down(a, r)) return;
    return api_reply_error(r, 400, "%s", err);
  }
  if (rc == 0) {
    /* idempotent: the workflow may be in the batch not yet committed: the
     * answer is told once it is durable too */
    answer_existing(a, r, id, path, with, &w, location);
    free(with);
    wf_row_free(&w);
    return;
  }
  free(with);
  api_answer_when_committed(a, r, 201, NULL, id, location);
}

static const char *STATUSES[] = {"running", "waiting", "queued", "completed", "failed", "cancelled", "stuck", NULL};

/* A filtered page reads at most this many workflows: with 100,000 of them
 * and a text few match, the answer comes quickly, short, with a next_cursor
 * to read on from. */
#define LIST_SCAN_MAX 20000

typedef struct page {
  store *st;
  ubuf b;
  int n, limit;
  const char *q; /* the text filter, or NULL */
  int session;   /* fields=session: each item with the session's numbers */
  int scanned;
  int64_t last_created;
  char last_id[ENGINE_ID_MAX * 2 + 1];
} page;

/* The string member key of JSON object text, decoded and cut to at most max
 * bytes (on a UTF-8 boundary), or NULL. */
static char *member_text(const char *text, const char *key, size_t max) {
  const char *v;
  size_t vn;
  if (!text || json_get(text, strlen(text), key, &v, &vn) != 1 || vn == 0 || *v != '"') return NULL;
  char *out = json_string(v, vn);
  if (out && strlen(out) > max) {
    size_t k = max;
    while (k > 0 && ((unsigned char)out[k] & 0xC0) == 0x80) k--;
    out[k] = 0;
  }
  return out;
}

/* The member key of a result object when it is a number: appended as
 * ,"key":N to b. */
static void add_number(ubuf *b, const char *result, const char *key) {
  const char *v;
  size_t vn;
  if (!result || json_get(result, strlen(result), key, &v, &vn) != 1 || vn == 0 || vn > 40) return;
  if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return;
  char *part = util_fmt(",\"%s\":%.*s", key, (int)vn, v);
  ubuf_add(b, part, strlen(part));
  free(part);
}

/* A list item with fields=session: what `engine list --json` prints (the
 * item without it, so `list --server` prints the same), plus what the web
 * page's table shows of a session: its objective and who started it
 * (from the input), and once it ended its turns, tool calls, tokens and cost
 * (from the result). */
static char *list_item(store *st, const wf_row *w, const char *objective, const char *by) {
  char *base = view_list_item_json(st, w);
  ubuf b = {0};
  ubuf_add(&b, base, strlen(base) - 1); /* without its closing brace */
  free(base);
  if (objective) {
    char *q = json_quote(objective);
    ubuf_add(&b, ",\"objective\":", 13);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  if (by) {
    char *q = json_quote(by);
    ubuf_add(&b, ",\"started_by\":", 14);
    ubuf_add(&b, q, strlen(q));
    free(q);
  }
  static const char *const COUNTS[] = {"turns", "tool_calls", "tokens", "cost_usd", NULL};
  for (const char *const *k = COUNTS; *k; k++) add_number(&b, w->result, *k);
  ubuf_add(&b, "}", 2); /* with the NUL */
  return b.p;
}

static int page_row(void *ud, const wf_row *w) {
  page *p = ud;
  if (p->n == p->limit) {
    p->n++; /* there is more */
    return 1;
  }
  if (p->q && p->scanned == LIST_SCAN_MAX) {
    p->n = p->limit + 1; /* read on from the cursor */
    return 1;
  }
  p->scanned++;
  p->last_created = w->created_at; /* the cursor: the last row read, shown or not */
  snprintf(p->last_id, sizeof p->last_id, "%s", w->id);
  char *objective = member_text(w->input, "objective", 300), *by = member_text(w->input, "identity", 100);
  int shown = !p->q || strcasestr(w->id, p->q) || strcasestr(w->script_name, p->q) ||
              (objective && strcasestr(objective, p->q)) || (by && strcasestr(by, p->q));
  if (shown) {
    char *item = p->session ? list_item(p->st, w, objective, by) : view_list_item_json(p->st, w);
    if (p->n) ubuf_add(&p->b, ",", 1);
    ubuf_add(&p->b, item, strlen(item));
    free(item);
    p->n++;
  }
  free(objective);
  free(by);
  return 0;
}

void api_h_list(api *a, httpd_req *r, ctx *c) {
  (void)c;
  char status[32], script[256], cursor[ENGINE_ID_MAX + 40], path[PATH_MAX], text[201];
  int64_t limit;
  int hs = api_query(r, "status", status, sizeof status),
      hc = hs < 0 ? -1 : api_query(r, "script", script, sizeof script);
  int hk = hc < 0 ? -1 : api_query(r, "cursor", cursor, sizeof cursor);
  int hq = hk < 0 ? -1 : api_query(r, "q", text, sizeof text);
  char order[16] = "", fields[16] = "";
  int ho = hq < 0 ? -1 : api_query(r, "order", order, sizeof order);
  int hf = ho < 0 ? -1 : api_query(r, "fields", fields, sizeof fields);
  if (hf < 0 || api_query_int(r, "limit", 100, 1000, &limit) != 0) return;
  if (hf == 1 && strcmp(fields, "session") != 0)
    return api_reply_error(r, 400, "unknown fields '%.16s' (session)", fields);
  if (ho == 1 && strcmp(order, "newest") != 0 && strcmp(order, "oldest") != 0)
    return api_reply_error(r, 400, "unknown order '%.16s' (oldest, newest)", order);
  int newest = ho == 1 && strcmp(order, "newest") == 0;
  if (hs == 1) {
    int ok = 0;
    for (const char **k = STATUSES; *k; k++) ok |= strcmp(*k, status) == 0;
    if (!ok)
      return api_reply_error(r, 400, "unknown status '%.32s' (running, waiting, completed, failed, cancelled, stuck)",
                             status);
  }
  if (hc == 1) snprintf(path, sizeof path, "%s/%s", a->workflows_dir ? a->workflows_dir : ".", script);
  int64_t after_created = newest ? INT64_MAX : -1;
  const char *after_id = "";
  if (hk == 1) {
    /* the cursor is "CREATED_AT.ID" of the last row of the previous page */
    char *dot = strchr(cursor, '.'), *end;
    long long v = dot ? strtoll(cursor, &end, 10) : -1;
    if (!dot || end != dot || v < 0)
      return api_reply_error(r, 400, "invalid cursor (use next_cursor of a previous page)");
    after_created = v;
    after_id = dot + 1;
  }
  if (limit == 0) limit = 1;
  page p = {a->rd, {0}, 0, (int)limit, hq == 1 && *text ? text : NULL, hf == 1, 0, 0, ""};
  ubuf_add(&p.b, "{\"workflows\":[", 14);
  /* filtered: rows are read until the page is full (or LIST_SCAN_MAX) */
  int rows = p.q ? LIST_SCAN_MAX + 1 : (int)limit + 1;
  if (store_wf_page(a->rd, hs == 1 ? status : NULL, hc == 1 ? path : NULL, after_created, after_id, newest, rows,
                    page_row, &p) != STORE_OK) {
    ubuf_free(&p.b);
    return api_reply_store_error(a, r, a->rd);
  }
  char next[ENGINE_ID_MAX * 2 + 64] = "null";
  if (p.n > p.limit) {
    char raw[ENGINE_ID_MAX * 2 + 40];
    snprintf(raw, sizeof raw, "%lld.%s", (long long)p.last_created, p.last_id);
    char *q = json_quote(raw);
    snprintf(next, sizeof next, "%s", q);
    free(q);
  }
  char *tail = util_fmt("],\"next_cursor\":%s}", next);
  ubuf_add(&p.b, tail, strlen(tail) + 1);
  free(tail);
  api_reply_json(r, 200, p.b.p, NULL);
}

void api_h_show(api *a, httpd_req *r, ctx *c) {
  view_summary s;
  if (!api_load_summary(a, r, c->p1, &s)) return;
  api_reply_json(r, 200, view_summary_json(&s), NULL);
  view_summary_free(&s);
}

void api_h_history(api *a, httpd_req *r, ctx *c) {
  wf_row w;
  int64_t run;
  if (api_query_int(r, "run", 0, INT64_MAX / 2, &run) != 0 || !api_find_for_read(a, r, c->p1, &w)) return;
  if (run == 0) run = w.run;
  if (run > w.run) {
    int64_t last = w.run;
    wf_row_free(&w);
    return api_reply_error(r, 404, "workflow '%s' has no run %lld (its runs are 1 to %lld)", c->p1, (long long)run,
                           (long long)last);
  }
  hist_list h = {0};
  int rc = store_hist_load(a->rd, c->p1, run, &h);
  if (rc != STORE_OK) {
    hist_list_free(&h);
    wf_row_free(&w);
    return api_reply_read_error(a, r, a->rd, rc);
  }
  ubuf b = {0};
  char *qid = json_quote(c->p1);
  char *head = util_fmt("{\"id\":%s,\"run\":%lld,\"events\":[", qid, (long long)run);
  free(qid);
  ubuf_add(&b, head, strlen(head));
  free(head);
  for (size_t i = 0; i < h.n; i++) {
    char *item = view_hist_item_json(&h.v[i]); /* what `engine history --json` prints */
    if (i) ubuf_add(&b, ",", 1);
    ubuf_add(&b, item, strlen(item));
    free(item);
  }
  ubuf_add(&b, "]}", 3);
  hist_list_free(&h);
  wf_row_free(&w);
  api_reply_json(r, 200, b.p, NULL);
}

/* ------------------------------------------------------------ writes --- */

void api_h_signal(api *a, httpd_req *r, ctx *c) {
  char err[512];
  if (approval_request_of(c->p2))
    return api_reply_error(r, 403,
                           "approval signals cannot be sent here: answer the request with POST "
                           "/v1/workflows/{id}/approvals/{request_id} (scope approve)");
  if (engine_reserved_signal(c->p2, err, sizeof err)) return api_reply_error(r, 403, "%s", err);
  if (engine_check_signal_name(c->p2, err, sizeof err) != 0) return api_reply_error(r, 400, "%s", err);
  size_t len;
  const char *body = httpd_body(r, &len);
  char *payload = json_accept(len ? body : "null", len ? len : 4, "the signal payload", err, sizeof err);
  if (!payload) return api_reply_error(r, 400, "%s", err);
  wf_row w;
  if (!api_find_for_write(a, r, c->p1, &w)) return free(payload);
  int done = engine_status_terminal(w.status);
  if (done) api_reply_error(r, 409, "workflow '%s' is %s; signal not delivered", c->p1, w.status);
  wf_row_free(&w);
  if (done) return free(payload);
  trace_start trace; /* the sender's trace, beside who sent it (signal.sent) */
  api_trace_context(r, &trace);
  int rc = engine_signal_traced(a->e, c->p1, c->p2, payload, c->identity, &trace, err, sizeof err);
  free(payload);
  if (rc != 0) {
    if (api_store_down(a, r)) return;
    return api_reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1), *qn = json_quote(c->p2), *qs = json_quote(c->identity);
  api_answer_when_committed(a, r, 200, util_fmt("{\"id\":%s,\"signal\":%s,\"sent_by\":%s}", qi, qn, qs), NULL, NULL);
  free(qi);
  free(qn);
  free(qs);
}

/* POST /v1/workflows/{id}/messages {"kind": "message"|"interrupt"|"close",
 * "text": ...}: what a person tells a running session, sent by the token's
 * identity (the session records it as the sender). */
void api_h_message(api *a, httpd_req *r, ctx *c) {
  char err[512];
  size_t len;
  const char *body = httpd_body(r, &len);
  char *canon = json_accept(len ? body : "", len, "the message", err, sizeof err);
  if (!canon) return api_reply_error(r, 400, "%s", err);
  size_t n = strlen(canon);
  const char *v;
  size_t vn;
  if (canon[0] != '{') {
    free(canon);
    return api_reply_error(r, 400, "the message must be a JSON object {\"kind\", \"text\"}");
  }
  char *kind = json_get(canon, n, "kind", &v, &vn) == 1 ? json_get_string(canon, n, "kind") : util_strdup("message");
  char *text = json_get_string(canon, n, "text");
  int typed = (json_get(canon, n, "kind", &v, &vn) != 1 || kind) && (json_get(canon, n, "text", &v, &vn) != 1 || text);
  free(canon);
  char *payload = typed ? engine_session_input(kind, text, c->identity, err, sizeof err) : NULL;
  if (!typed) snprintf(err, sizeof err, "'kind' and 'text' must be strings");
  free(text);
  if (!payload) {
    free(kind);
    return api_reply_error(r, 400, "%s", err);
  }
  wf_row w;
  if (!api_find_for_write(a, r, c->p1, &w)) {
    free(kind);
    return free(payload);
  }
  int done = engine_status_terminal(w.status);
  if (done) api_reply_error(r, 409, "workflow '%s' is %s; %s not delivered", c->p1, w.status, kind);
  wf_row_free(&w);
  if (done) {
    free(kind);
    return free(payload);
  }
  trace_start trace;
  api_trace_context(r, &trace);
  int rc = engine_signal_traced(a->e, c->p1, ENGINE_SESSION_SIGNAL, payload, c->identity, &trace, err, sizeof err);
  free(payload);
  if (rc != 0) {
    free(kind);
    if (api_store_down(a, r)) return;
    return api_reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1), *qk = json_quote(kind), *qs = json_quote(c->identity);
  api_answer_when_committed(a, r, 200, util_fmt("{\"id\":%s,\"kind\":%s,\"sent_by\":%s}", qi, qk, qs), NULL, NULL);
  free(qi);
  free(qk);
  free(qs);
  free(kind);
}

void api_h_cancel(api *a, httpd_req *r, ctx *c) {
  char err[512];
  wf_row w;
  if (!api_find_for_write(a, r, c->p1, &w)) return;
  int done = engine_status_terminal(w.status);
  if (done) api_reply_error(r, 409, "workflow '%s' is %s; cancellation not delivered", c->p1, w.status);
  wf_row_free(&w);
  if (done) return;
  if (engine_cancel_local(a->e, c->p1, c->identity, err, sizeof err) != 0) {
    if (api_store_down(a, r)) return;
    return api_reply_error(r, 409, "%s", err);
  }
  char *qi = json_quote(c->p1);
  api_answer_when_committed(a, r, 202, util_fmt("{\"id\":%s,\"cancel\":\"requested\"}", qi), NULL, NULL);
  free(qi);
}

/* POST /v1/workflows/{id}/fork {at | turn, id?, input_patch?, script?, model?}:
 * a new workflow from a point of this one's history (ops/fork.h), made by
 * the token's identity; 201 with the fork's summary once it is committed.
 * The token needs scope start (the route's) and read (the source is read). A
 * retry of the same request with the same id answers 200 with the fork that
 * exists. */
static const char *FORK_KEYS[] = {"at", "turn", "id", "input_patch", "script", "model", "policies", NULL};

/* An integer field of the body: 1 given (*v), 0 absent, -1 not an integer. */
static int field_int(api *a, const char *key, int64_t *v) {
  int t = lua_getfield(a->L, -1, key), rc = 0;
  if (t == LUA_TNUMBER) {
    int whole = 0;
    lua_Integer n = lua_tointegerx(a->L, -1, &whole);
    rc = whole ? 1 : -1;
    *v = (int64_t)n;
  } else if (t != LUA_TNIL) {
    rc = -1;
  }
  lua_pop(a->L, 1);
  return rc;
}

void api_h_fork(api *a, httpd_req *r, ctx *c) {
  if (!token_allows(c->scopes, SCOPE_READ))
    return api_reply_error(r, 403, "this token lacks the 'read' scope (a fork reads its source)");
  if (api_body_object(a, r, FORK_KEYS) != 0) return;
  fork_req q = {0};
  q.source = c->p1;
  q.identity = c->identity;
  int ga = field_int(a, "at", &q.at), gt = field_int(a, "turn", &q.turn);
  if (ga < 0) return api_reply_error(r, 400, "\"at\" must be an integer: a domain event's seq");
  if (gt < 0) return api_reply_error(r, 400, "\"turn\" must be an integer: an agent session's model turn");
  q.at_given = ga == 1;
  q.turn_given = gt == 1;
  char id[ENGINE_ID_MAX + 1], script[256], path[PATH_MAX], err[2048];
  int gi = api_field_string(a, "id", id, sizeof id);
  if (gi < 0) return api_reply_error(r, 400, "\"id\" must be a string of at most %d bytes", ENGINE_ID_MAX);
  if (gi == 1) q.id = id;
  int gs = api_field_string(a, "script", script, sizeof script);
  if (gs < 0) return api_reply_error(r, 400, "\"script\" must be a string naming a file in the workflows directory");
  lua_getfield(a->L, -1, "policies");
  int policies = !lua_isnil(a->L, -1);
  lua_pop(a->L, 1);
  if (policies)
    return api_reply_error(r, 400, "\"policies\": a policy directory is named on the engine's host only "
                           "(engine fork --policies DIR), never over the API");
  char *patch = api_field_json(a, "input_patch"), *model = api_field_json(a, "model");
  if (patch && patch[0] != '{') {
    free(patch);
    free(model);
    return api_reply_error(r, 400, "\"input_patch\" must be a JSON object: a merge patch (RFC 7386) on the input");
  }
  if (gs == 1 && api_resolve_script(a, r, script, path, sizeof path) != 0) {
    free(patch);
    free(model);
    return;
  }
  q.input_patch = patch;
  q.model = model;
  q.script = gs == 1 ? path : NULL;
  fork_made made;
  int why = 0;
  int rc = engine_fork(a->e, &q, &made, &why, err, sizeof err);
  free(patch);
  free(model);
  char location[ENGINE_ID_MAX + 32];
  if (rc != 0) {
    if (why == FORK_EXISTS && made.same) {
      snprintf(location, sizeof location, "/v1/workflows/%s", made.id);
      return api_answer_when_committed(a, r, 200, NULL, made.id, location);
    }
    if (why == FORK_FAILED || api_store_down(a, r)) {
      if (!api_store_down(a, r)) api_reply_error(r, 503, "%s", err);
      return;
    }
    /* a damaged source's log: 500 naming its first bad seq, as a read of it */
    int status = why == FORK_UNKNOWN ? 404 : why == FORK_EXISTS ? 409 : why == FORK_DAMAGED ? 500 : 400;
    if (made.field[0] && status == 400) {
      char *msg = util_fmt("\"%s\": %s", made.field, err);
      char *q1 = json_quote(msg), *q2 = json_quote(made.field);
      free(msg);
      api_reply_json(r, 400, util_fmt("{\"error\":{\"status\":400,\"message\":%s,\"field\":%s}}", q1, q2), NULL);
      free(q1);
      free(q2);
      return;
    }
    return api_reply_error(r, status, "%s", err);
  }
  snprintf(location, sizeof location, "/v1/workflows/%s", made.id);
  api_answer_when_committed(a, r, 201, NULL, made.id, location);
}
