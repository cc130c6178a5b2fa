/* audit: a session's signed export and its offline check (audit.h). */
#include "audit.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbfile.h"
#include "json.h"
#include "util.h"

/* ---- writing: each line chained to the one before ---- */

typedef struct writer {
  ubuf out;
  char prev[65]; /* the SHA-256 of the last line written */
  int64_t lines;
} writer;

/* Appends the line whose members (after "prev") are body, "{...}" without
 * its opening brace's content checked: body is a JSON object. */
static void put_line(writer *w, ubuf *body) {
  ubuf line = {0};
  char head[80];
  int n = snprintf(head, sizeof head, "{\"prev\":\"%s\",", w->prev);
  ubuf_add(&line, head, (size_t)n);
  ubuf_add(&line, body->p + 1, body->n - 1);
  util_sha256_hex(line.p, line.n, w->prev);
  ubuf_add(&w->out, line.p, line.n);
  ubuf_add(&w->out, "\n", 1);
  w->lines++;
  ubuf_free(&line);
  body->n = 0;
}

static void add_s(ubuf *b, const char *s) { ubuf_add(b, s, strlen(s)); }

/* ,"key":value with value a C string, quoted (null for NULL) */
static void add_str(ubuf *b, const char *key, const char *v) {
  char *q = v ? json_quote(v) : NULL;
  char *m = util_fmt(",\"%s\":%s", key, q ? q : "null");
  add_s(b, m);
  free(m);
  free(q);
}

/* ,"key":text for bytes from the log, kept exact: a JSON string when they
 * are UTF-8, else "key_hex" with their hex (what a check rehashes) */
static void add_text(ubuf *b, const char *key, const char *v) {
  if (!v) return add_str(b, key, NULL);
  size_t n = strlen(v), fixed;
  char *repaired = util_utf8_repair(v, n, &fixed);
  if (!repaired) return add_str(b, key, v);
  free(repaired);
  char *hex = util_xmalloc(2 * n + 1);
  util_hex(v, n, hex);
  char *k = util_fmt("%s_hex", key);
  add_str(b, k, hex);
  free(k);
  free(hex);
}

/* ,"key":JSON from the log as strict JSON (an invalid byte as U+FFFD), or null */
static void add_json(ubuf *b, const char *key, const char *v, size_t n) {
  char *m = util_fmt(",\"%s\":", key);
  add_s(b, m);
  free(m);
  char *j = v && n ? json_for_output(v, n) : NULL;
  add_s(b, j ? j : "null");
  free(j);
}

static void add_int(ubuf *b, const char *key, int64_t v) {
  char m[96];
  snprintf(m, sizeof m, ",\"%s\":%lld", key, (long long)v);
  add_s(b, m);
}

static void begin(ubuf *b, const char *kind) {
  add_s(b, "{\"kind\":");
  char *q = json_quote(kind);
  add_s(b, q);
  free(q);
}

static void end(writer *w, ubuf *b) {
  add_s(b, "}");
  put_line(w, b);
}

/* ---- what the export holds ---- */

typedef struct event_list {
  domain_event *v;
  size_t n, cap;
} event_list;

static int keep_event(void *ud, const domain_event *e) {
  event_list *l = ud;
  if (l->n == l->cap) l->cap = l->cap ? 2 * l->cap : 64, l->v = util_xrealloc(l->v, l->cap * sizeof *l->v);
  domain_event *c = &l->v[l->n++];
  *c = *e;
  c->session_id = NULL;
  c->type = util_strdup(e->type);
  c->payload = util_strdup(e->payload);
  c->chain = util_strdup(e->chain);
  return 0;
}

static void event_list_free(event_list *l) {
  for (size_t i = 0; i < l->n; i++)
    free((char *)l->v[i].type), free((char *)l->v[i].payload), free((char *)l->v[i].chain);
  free(l->v);
}

static const char *member(const char *json, const char *key, size_t *n) {
  const char *v;
  if (!json || json_get(json, strlen(json), key, &v, n) != 0) return NULL;
  return v;
}

/* the policy's decisions: each session.decide step and its recorded outcome */
static void put_decisions(writer *w, ubuf *b, int64_t run, const hist_list *h, int64_t *count) {
  for (size_t i = 0; i < h->n; i++) {
    const hist_event *s = &h->v[i];
    if (strcmp(s->type, "ActivityScheduled") != 0 || !s->name || strcmp(s->name, "session.decide") != 0) continue;
    const hist_event *o = NULL;
    for (size_t j = i + 1; j < h->n && !o; j++)
      if (h->v[j].ref == s->seq && (strcmp(h->v[j].type, "ActivityCompleted") == 0 ||
                                    strcmp(h->v[j].type, "ActivityFailed") == 0))
        o = &h->v[j];
    size_t an = 0, tn = 0, xn = 0;
    const char *args = member(s->payload, "args", &an);
    char *a = args ? util_fmt("%.*s", (int)an, args) : NULL;
    const char *tool = member(a, "tool", &tn), *targs = member(a, "args", &xn);
    begin(b, "decision");
    add_int(b, "run", run);
    add_int(b, "seq", s->seq);
    add_int(b, "at", s->time);
    add_json(b, "tool", tool, tn);
    add_json(b, "arguments", targs, xn);
    add_json(b, "outcome", o ? o->payload : NULL, o && o->payload ? strlen(o->payload) : 0);
    add_str(b, "outcome_type", o ? o->type : NULL);
    end(w, b);
    free(a);
    (*count)++;
  }
}

static int file_matches(const char *path, const char *sha) {
  char got[65];
  if (!path || util_file_sha256_hex(path, got) != 0) return -1;
  return sha && strcmp(got, sha) == 0;
}

/* the approvals (each request and its answer) and the artifacts */
static void put_approvals_artifacts(writer *w, ubuf *b, const event_list *ev, audit_check *c) {
  for (size_t i = 0; i < ev->n; i++) {
    const domain_event *r = &ev->v[i];
    if (strcmp(r->type, "approval.requested") != 0) continue;
    const char *rp = r->payload ? r->payload : "null"; /* a script may emit one with no payload */
    size_t pn = strlen(rp);
    char *rid = json_get_string(rp, pn, "request_id");
    const domain_event *d = NULL;
    for (size_t j = i + 1; j < ev->n && !d && rid; j++) {
      if (strcmp(ev->v[j].type, "approval.decided") != 0 || !ev->v[j].payload) continue;
      char *other = json_get_string(ev->v[j].payload, strlen(ev->v[j].payload), "request_id");
      if (other && strcmp(other, rid) == 0) d = &ev->v[j];
      free(other);
    }
    begin(b, "approval");
    add_str(b, "request_id", rid);
    add_int(b, "requested_seq", r->seq);
    add_int(b, "requested_at", r->time);
    add_json(b, "request", rp, pn);
    if (d) add_int(b, "decided_seq", d->seq), add_int(b, "decided_at", d->time);
    add_json(b, "decision", d ? d->payload : NULL, d ? strlen(d->payload) : 0);
    end(w, b);
    free(rid);
    c->approvals++;
  }
  for (size_t i = 0; i < ev->n; i++) {
    const domain_event *a = &ev->v[i];
    if (strcmp(a->type, "artifact.saved") != 0 || !a->payload) continue;
    size_t pn = strlen(a->payload);
    char *path = json_get_string(a->payload, pn, "path"), *sha = json_get_string(a->payload, pn, "sha256"),
         *stored = json_get_string(a->payload, pn, "stored");
    int m = file_matches(stored, sha);
    begin(b, "artifact");
    add_int(b, "seq", a->seq);
    add_str(b, "path", path);
    add_str(b, "sha256", sha);
    add_int(b, "size", json_get_int(a->payload, pn, "size", -1));
    add_s(b, m < 0 ? ",\"stored_matches\":null" : m ? ",\"stored_matches\":true" : ",\"stored_matches\":false");
    end(w, b);
    free(path), free(sha), free(stored);
    c->artifacts++;
  }
}

static void put_workflow(writer *w, ubuf *b, const wf_row *r) {
  begin(b, "workflow");
  add_str(b, "id", r->id);
  add_int(b, "run", r->run);
  add_str(b, "status", r->status);
  add_str(b, "script_name", r->script_name);
  add_str(b, "code_hash", r->code_hash);
  add_text(b, "input", r->input);
  add_text(b, "result", r->result);
  add_text(b, "error", r->error);
  add_int(b, "created_at", r->created_at);
  add_int(b, "updated_at", r->updated_at);
  add_str(b, "parent", r->parent);
  add_text(b, "forked_from", r->forked_from);
  end(w, b);
}

int audit_key_open(const char *db, sign_key **out, char *err, size_t errlen) {
  *out = NULL;
  char dir[PATH_MAX], keys[PATH_MAX + 8];
  if (engine_data_dir(db, dir) != 0)
    return util_seterr(err, errlen, "cannot find the data directory of %s: no key to sign with", db), -1;
  snprintf(keys, sizeof keys, "%s/keys", dir);
  return sign_key_open(keys, out, err, errlen);
}

int audit_export(store *st, const char *id, const sign_key *key, const char *exported_by, char **out, size_t *len,
                 char *err, size_t errlen) {
  *out = NULL;
  *len = 0;
  wf_row r;
  int got = store_wf_get(st, id, &r);
  if (got < 0) return util_seterr(err, errlen, "cannot read workflow %s: %s", id, store_errmsg(st)), -1;
  if (got == 0) return 0;
  writer w = {.lines = 0};
  memset(w.prev, '0', 64);
  w.prev[64] = 0;
  ubuf b = {0};
  unsigned char pub[SIGN_PUBLIC_BYTES];
  sign_key_public(key, pub);
  char pub_hex[2 * SIGN_PUBLIC_BYTES + 1];
  util_hex(pub, sizeof pub, pub_hex);
  int64_t now = util_now_ms();
  begin(&b, "header");
  add_str(&b, "format", AUDIT_FORMAT);
  add_str(&b, "workflow", id);
  add_int(&b, "exported_at", now);
  add_str(&b, "exported_by", exported_by);
  add_str(&b, "public_key", pub_hex);
  end(&w, &b);
  put_workflow(&w, &b, &r);
  audit_check counts = {0};
  int rc = 1;
  /* each chained event's full link of the database's hash chain (the store
   * keeps 16 hex digits of it): a check rebuilds them from the lines */
  char hhead[65] = "", dhead[65] = "";
  hist_list *runs = util_xcalloc((size_t)(r.run > 0 ? r.run : 1), sizeof *runs);
  for (int64_t run = 1; run <= r.run && rc == 1; run++) {
    hist_list *h = &runs[run - 1];
    if (store_hist_load(st, id, run, h) != 0) {
      util_seterr(err, errlen, "cannot read the history of %s (run %lld): %s", id, (long long)run, store_errmsg(st));
      rc = -1;
      break;
    }
    for (size_t i = 0; i < h->n; i++) {
      const hist_event *e = &h->v[i];
      begin(&b, "history");
      add_int(&b, "run", run);
      add_int(&b, "seq", e->seq);
      add_str(&b, "type", e->type);
      add_int(&b, "ref", e->ref);
      add_str(&b, "name", e->name);
      add_str(&b, "hash", e->hash);
      add_int(&b, "time", e->time);
      add_text(&b, "payload", e->payload);
      if (e->chain) {
        char link[65];
        store_chain_hist(hhead, id, run, e, link);
        memcpy(hhead, link, sizeof link);
        add_str(&b, "link", hhead);
      }
      end(&w, &b);
      counts.history++;
    }
  }
  event_list ev = {0};
  if (rc == 1 && store_domain_list(st, id, 0, keep_event, &ev) != 0) {
    util_seterr(err, errlen, "cannot read the events of %s: %s", id, store_errmsg(st));
    rc = -1;
  }
  if (rc == 1) {
    for (size_t i = 0; i < ev.n; i++) {
      const domain_event *e = &ev.v[i];
      begin(&b, "event");
      add_int(&b, "seq", e->seq);
      add_str(&b, "type", e->type);
      add_int(&b, "time", e->time);
      add_text(&b, "payload", e->payload);
      if (e->chain) {
        domain_event d = *e;
        d.session_id = id;
        char link[65];
        store_chain_domain(dhead, &d, link);
        memcpy(dhead, link, sizeof link);
        add_str(&b, "link", dhead);
      }
      end(&w, &b);
      counts.events++;
    }
    for (int64_t run = 1; run <= r.run; run++) put_decisions(&w, &b, run, &runs[run - 1], &counts.decisions);
    put_approvals_artifacts(&w, &b, &ev, &counts);
    /* the seal: signed as written without its signature */
    begin(&b, "seal");
    add_int(&b, "lines", w.lines);
    add_int(&b, "history", counts.history);
    add_int(&b, "events", counts.events);
    add_str(&b, "history_head", hhead[0] ? hhead : NULL);
    add_str(&b, "events_head", dhead[0] ? dhead : NULL);
    add_str(&b, "public_key", pub_hex);
    add_int(&b, "signed_at", now);
    add_s(&b, "}");
    ubuf seal = {0};
    char head[80];
    int hn = snprintf(head, sizeof head, "{\"prev\":\"%s\",", w.prev);
    ubuf_add(&seal, head, (size_t)hn);
    ubuf_add(&seal, b.p + 1, b.n - 1);
    unsigned char sig[SIGN_SIGNATURE_BYTES];
    if (sign_key_sign(key, seal.p, seal.n, sig) != 0) {
      util_seterr(err, errlen, "cannot sign the export of %s (OpenSSL)", id);
      rc = -1;
    } else {
      char sig_hex[2 * SIGN_SIGNATURE_BYTES + 1];
      util_hex(sig, sizeof sig, sig_hex);
      seal.n--; /* the closing brace */
      char *tail = util_fmt(",\"signature\":\"%s\"}\n", sig_hex);
      ubuf_add(&seal, tail, strlen(tail));
      free(tail);
      ubuf_add(&w.out, seal.p, seal.n);
    }
    ubuf_free(&seal);
  }
  for (int64_t run = 1; run <= r.run; run++) hist_list_free(&runs[run - 1]);
  free(runs);
  event_list_free(&ev);
  ubuf_free(&b);
  wf_row_free(&r);
  if (rc != 1) return ubuf_free(&w.out), rc;
  ubuf_add(&w.out, "", 1);
  *len = w.out.n - 1;
  *out = w.out.p;
  return 1;
}

/* ---- checking ---- */

static int fail_at(audit_check *c, int64_t line, const char *fmt, const char *detail) {
  c->ok = 0;
  char what[400];
  snprintf(what, sizeof what, fmt, detail ? detail : "");
  snprintf(c->problem, sizeof c->problem, "line %lld: %s", (long long)line, what);
  return -1;
}

/* the member key of the line as a string (malloc'd), or NULL */
static char *line_string(const char *line, size_t n, const char *key) { return json_get_string(line, n, key); }

/* Checks the seal line (its fields and signature): 0, or -1 with c's problem. */
static int check_seal(const char *line, size_t n, int64_t at, int64_t lines, const char *hhead, const char *dhead,
                      const unsigned char pub[SIGN_PUBLIC_BYTES], audit_check *c) {
  static const char sig_key[] = ",\"signature\":\"";
  const size_t sig_len = sizeof sig_key - 1 + 2 * SIGN_SIGNATURE_BYTES + 2; /* the key, hex, "} */
  if (n < sig_len || memcmp(line + n - sig_len, sig_key, sizeof sig_key - 1) != 0 || line[n - 2] != '"' ||
      line[n - 1] != '}')
    return fail_at(c, at, "the seal does not end with its signature", NULL);
  char sig_hex[2 * SIGN_SIGNATURE_BYTES + 1];
  memcpy(sig_hex, line + n - sig_len + sizeof sig_key - 1, 2 * SIGN_SIGNATURE_BYTES);
  sig_hex[2 * SIGN_SIGNATURE_BYTES] = 0;
  unsigned char sig[SIGN_SIGNATURE_BYTES];
  if (util_unhex(sig_hex, sig, sizeof sig) != 0) return fail_at(c, at, "the seal's signature is not hex", NULL);
  int64_t said = json_get_int(line, n, "lines", -1);
  if (said != lines) {
    char m[96];
    snprintf(m, sizeof m, "%lld lines", (long long)said);
    return fail_at(c, at, "the seal counts %s before it, and the file has another number (cut or added to)", m);
  }
  char *hh = line_string(line, n, "history_head"), *dh = line_string(line, n, "events_head");
  int heads = strcmp(hh ? hh : "", hhead) == 0 && strcmp(dh ? dh : "", dhead) == 0;
  free(hh), free(dh);
  if (!heads) return fail_at(c, at, "the seal's heads are not the last links of the lines before it", NULL);
  char *key = line_string(line, n, "public_key");
  char pub_hex[2 * SIGN_PUBLIC_BYTES + 1];
  util_hex(pub, SIGN_PUBLIC_BYTES, pub_hex);
  snprintf(c->key_id, sizeof c->key_id, "%.16s", key ? key : "");
  int same = key && strcmp(key, pub_hex) == 0;
  free(key);
  if (!same) return fail_at(c, at, "sealed by another key (%s...), not the one given", c->key_id);
  /* what was signed: the seal without its signature */
  ubuf signed_part = {0};
  ubuf_add(&signed_part, line, n - sig_len);
  ubuf_add(&signed_part, "}", 1);
  int good = sign_verify(pub, signed_part.p, signed_part.n, sig);
  ubuf_free(&signed_part);
  if (!good) return fail_at(c, at, "the seal's signature does not check (the seal was changed)", NULL);
  c->signed_at = json_get_int(line, n, "signed_at", 0);
  return 0;
}

/* A string member written by add_text: its value, or its _hex bytes decoded
 * (malloc'd; NULL for null or absent). */
static char *text_member(const char *line, size_t n, const char *key) {
  char *v = json_get_string(line, n, key);
  if (v) return v;
  char *k = util_fmt("%s_hex", key), *hex = json_get_string(line, n, k);
  free(k);
  if (!hex) return NULL;
  size_t bytes = strlen(hex) / 2;
  char *out = util_xmalloc(bytes + 1);
  if (util_unhex(hex, out, bytes) != 0) bytes = 0;
  out[bytes] = 0;
  free(hex);
  return out;
}

/* Checks a history or event line's "link" (when it has one) against the
 * database's chain rebuilt from its fields after prev (updated): 0, or -1
 * with c's problem. */
static int check_link(const char *line, size_t n, int history, int64_t at, char prev[65], audit_check *c) {
  char *link = json_get_string(line, n, "link");
  if (!link) return 0;
  char *type = json_get_string(line, n, "type"), *payload = text_member(line, n, "payload"), got[65];
  if (history) {
    char *name = json_get_string(line, n, "name"), *hash = json_get_string(line, n, "hash");
    hist_event e = {.seq = json_get_int(line, n, "seq", 0), .type = type, .ref = json_get_int(line, n, "ref", 0),
                    .name = name, .hash = hash, .payload = payload, .time = json_get_int(line, n, "time", 0)};
    store_chain_hist(prev, c->workflow, json_get_int(line, n, "run", 0), &e, got);
    free(name), free(hash);
  } else {
    domain_event e = {.session_id = c->workflow, .seq = json_get_int(line, n, "seq", 0), .type = type,
                      .time = json_get_int(line, n, "time", 0), .payload = payload};
    store_chain_domain(prev, &e, got);
  }
  int same = strcmp(got, link) == 0;
  free(type), free(payload), free(link);
  if (!same)
    return fail_at(c, at, "its link is not the database's hash chain rebuilt from its fields (%s)",
                   history ? "history" : "domain events");
  memcpy(prev, got, 65);
  return 0;
}

void audit_verify(const char *text, size_t len, const unsigned char pub[SIGN_PUBLIC_BYTES], audit_check *c) {
  memset(c, 0, sizeof *c);
  c->ok = 1;
  char prev[65];
  memset(prev, '0', 64);
  prev[64] = 0;
  const char *p = text, *stop = text + len;
  int64_t at = 0;
  int sealed = 0;
  char hprev[65] = "", dprev[65] = "";
  while (p < stop) {
    const char *nl = memchr(p, '\n', (size_t)(stop - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(stop - p);
    at++;
    if (sealed) return (void)fail_at(c, at, "a line after the seal", NULL);
    char *line_prev = line_string(p, n, "prev");
    int linked = line_prev && strcmp(line_prev, prev) == 0, whole = line_prev != NULL;
    free(line_prev);
    if (!linked && at == 1) return (void)fail_at(c, at, "not an audit export's first line (its \"prev\" is not zeros)", NULL);
    if (!whole) return (void)fail_at(c, at, "not a whole line of an export (a JSON object with its \"prev\"): cut or damaged", NULL);
    if (!linked) {
      c->ok = 0;
      snprintf(c->problem, sizeof c->problem,
               "line %lld: its \"prev\" is not the hash of the line before: line %lld was changed, or lines were "
               "removed, inserted or reordered there",
               (long long)at, (long long)(at - 1));
      return;
    }
    char *kind = line_string(p, n, "kind");
    if (!kind) return (void)fail_at(c, at, "a line without a kind", NULL);
    if (at == 1) {
      char *format = line_string(p, n, "format"), *wf = line_string(p, n, "workflow");
      int known = strcmp(kind, "header") == 0 && format && strcmp(format, AUDIT_FORMAT) == 0;
      snprintf(c->workflow, sizeof c->workflow, "%s", wf ? wf : "");
      free(format), free(wf);
      if (!known) return free(kind), (void)fail_at(c, at, "not a header of format " AUDIT_FORMAT, NULL);
    }
    if (strcmp(kind, "seal") == 0) {
      free(kind);
      if (check_seal(p, n, at, at - 1, hprev, dprev, pub, c) != 0) return;
      sealed = 1;
    } else {
      int rc = 0;
      if (strcmp(kind, "history") == 0) c->history++, rc = check_link(p, n, 1, at, hprev, c);
      else if (strcmp(kind, "event") == 0) c->events++, rc = check_link(p, n, 0, at, dprev, c);
      else if (strcmp(kind, "decision") == 0) c->decisions++;
      else if (strcmp(kind, "approval") == 0) c->approvals++;
      else if (strcmp(kind, "artifact") == 0) c->artifacts++;
      free(kind);
      if (rc) return;
    }
    util_sha256_hex(p, n, prev);
    p = nl ? nl + 1 : stop;
  }
  c->lines = at;
  if (!sealed) fail_at(c, at + 1, "the export ends without its seal (cut short)", NULL);
}
