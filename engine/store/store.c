/* store: what store.h declares, dispatched to the backend that opened the
 * store (backend.h). */
#include "store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"

#include <string.h>

#include "crash.h"
#include "util.h"

/* A session's domain events as read (raw), owned: checked before any is
 * handed on. */
typedef struct domain_list {
  domain_event *v;
  size_t n, cap;
} domain_list;

static int domain_keep(void *ud, const domain_event *e) {
  domain_list *l = ud;
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 16;
    l->v = util_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = (domain_event){util_strdup(e->session_id ? e->session_id : ""), e->seq,
                                util_strdup(e->type ? e->type : ""), e->time,
                                e->payload ? util_strdup(e->payload) : NULL, e->chain ? util_strdup(e->chain) : NULL};
  return 0;
}

static void domain_list_free(domain_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free((char *)l->v[i].session_id);
    free((char *)l->v[i].type);
    free((char *)l->v[i].payload);
    free((char *)l->v[i].chain);
  }
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* A commit of store_commit_start still on its way is answered before
 * anything else uses the connection (its result stays for store_commit_poll). */
static void settle(store *s) {
  s->pending_rc = s->pending_read ? s->ops->op_read_settle(s) : s->ops->op_commit_settle(s);
  s->pending = 2;
}
#define SETTLE(s)                       \
  do {                                  \
    if ((s)->pending == 1) settle(s); \
  } while (0)

int store_open_as(const char *path, int must_exist, const char *who, store **out, char *err, size_t errlen) {
  if (store_is_url(path)) return store_pg_open(path, must_exist, who ? who : "engine", out, err, errlen);
  return store_sqlite_open(path, must_exist, out, err, errlen);
}

int store_open(const char *path, int must_exist, store **out, char *err, size_t errlen) {
  return store_open_as(path, must_exist, NULL, out, err, errlen);
}

int store_open_readonly(const char *path, int busy_ms, store **out, char *err, size_t errlen) {
  if (store_is_url(path)) return store_pg_open_readonly(path, busy_ms, out, err, errlen);
  return store_sqlite_open_readonly(path, busy_ms, out, err, errlen);
}

int store_schema_version(const char *path) {
  return store_is_url(path) ? STORE_PG_SCHEMA_VERSION : STORE_SQLITE_SCHEMA_VERSION;
}

int store_write_probe(store *s, char *err, size_t errlen) { SETTLE(s); return s->ops->op_write_probe(s, err, errlen); }

int store_clock_skew(store *s, int64_t *skew_ms, int64_t *rtt_ms) {
  *skew_ms = *rtt_ms = 0;
  if (!s->ops->op_clock_skew) return 1;
  SETTLE(s);
  return s->ops->op_clock_skew(s, skew_ms, rtt_ms);
}

void store_close(store *s) {
  if (!s) return;
  SETTLE(s);
  code_cache_free(s);
  s->ops->op_close(s);
}

const char *store_errmsg(store *s) { return s->ops->op_errmsg(s); }

const char *store_path(store *s) { return s->ops->op_path(s); }

int store_instance_id(store *s, char *out, size_t n) { SETTLE(s); return s->ops->op_instance_id(s, out, n); }

int store_begin(store *s) { SETTLE(s); return s->ops->op_begin(s); }

int store_commit(store *s) { SETTLE(s); return s->ops->op_commit(s); }

int store_commit_start(store *s) {
  SETTLE(s);
  if (!s->ops->op_commit_start) return s->ops->op_commit(s);
  int rc = s->ops->op_commit_start(s);
  if (rc == STORE_PENDING) s->pending = 1;
  return rc;
}

int store_commit_socket(store *s, int *writable) {
  *writable = 0;
  return s->pending == 1 ? s->ops->op_commit_socket(s, writable) : -1;
}

int store_commit_poll(store *s) {
  if (s->pending == 1) {
    int rc = s->pending_read ? s->ops->op_read_progress(s) : s->ops->op_commit_progress(s);
    if (rc == STORE_PENDING) return rc;
    s->pending_rc = rc;
    s->pending = 2;
  }
  if (s->pending != 2) return STORE_OK;
  s->pending = s->pending_read = 0;
  return s->pending_rc;
}

/* A read sent without waiting is on its way (STORE_PENDING from its op), or its sending failed. */
static int read_sent(store *s, int rc) {
  if (rc != STORE_PENDING) return rc;
  s->pending = s->pending_read = 1;
  return STORE_PENDING;
}

int store_commit_wait(store *s) {
  SETTLE(s);
  return store_commit_poll(s);
}

void store_rollback(store *s) { SETTLE(s); s->ops->op_rollback(s); }

int store_in_txn(store *s) { SETTLE(s); return s->ops->op_in_txn(s); }

int store_batch_failed(store *s) { SETTLE(s); return s->ops->op_batch_failed(s); }

int64_t store_batch_writes(store *s) { SETTLE(s); return s->ops->op_batch_writes(s); }

int64_t store_round_trips(store *s) { return s->ops->op_round_trips ? s->ops->op_round_trips(s) : 0; }

int64_t store_data_version(store *s) { SETTLE(s); return s->ops->op_data_version(s); }
void store_wal_stats(store *s, int64_t *frames, int64_t *checkpoint_ns) {
  *frames = *checkpoint_ns = 0;
  if (s->ops->op_wal_stats) s->ops->op_wal_stats(s, frames, checkpoint_ns);
}
/* no SETTLE: it runs on another thread, beside the store's own calls */
int store_checkpoint(store *s, int64_t *log, int64_t *copied) {
  *log = *copied = 0;
  return s->ops->op_checkpoint ? s->ops->op_checkpoint(s, log, copied) : STORE_OK;
}
int store_commit_fd(store *s, int old) { return s->ops->op_commit_fd ? s->ops->op_commit_fd(s, old) : -1; }
int store_commit_drain(store *s, int fd) { return s->ops->op_commit_drain ? s->ops->op_commit_drain(s, fd) : 0; }

int store_wf_insert(store *s, const wf_row *w) { SETTLE(s); return s->ops->op_wf_insert(s, w); }

int store_wf_start(store *s, const wf_row *w, const hist_event *e, int queue, wf_row *existing) {
  SETTLE(s);
  memset(existing, 0, sizeof *existing);
  if (!s->ops->op_wf_start) { /* one after another, in the batch's order (SQLite's BEGIN IMMEDIATE) */
    /* an id that exists is answered before any batch begins: a refused
     * start writes nothing; one that does not is looked for again under
     * the write lock (another process may have made it meanwhile) */
    int found = s->ops->op_wf_get(s, w->id, existing);
    if (found == 0) {
      if (s->ops->op_begin(s) != STORE_OK) return STORE_ERR;
      found = s->ops->op_wf_get(s, w->id, existing);
    }
    if (found != 0) return found == 1 ? 0 : found;
    if (s->ops->op_wf_insert(s, w) != STORE_OK || store_hist_append(s, w->id, w->run, e) != STORE_OK ||
        (queue && s->ops->op_task_put(s, w->id, "workflow", 0, w->created_at, 0, 0, NULL, 0) != STORE_OK))
      return STORE_ERR;
    return 1;
  }
  /* a new workflow's chain starts at its first event: its link is known
   * before the answer, and becomes the batch's head only if it was written */
  char link[65], keep[65];
  chain_hist_first(w->id, w->run, e, keep);
  hist_event ev = *e;
  ev.chain = keep;
  int rc = s->ops->op_wf_start(s, w, &ev, queue, existing);
  if (rc == 1) chain_hist_link(s, w->id, w->run, e, NULL, link);
  return rc;
}

int store_can_send_starts(store *s) { return s->ops->op_wf_start_send != NULL; }

int store_wf_start_send(store *s, const wf_row *w, const hist_event *e, store_start **t) {
  SETTLE(s);
  *t = NULL;
  if (!s->ops->op_wf_start_send) return STORE_ERR;
  char keep[65], head[65];
  chain_hist_first_head(w->id, w->run, e, keep, head);
  hist_event ev = *e;
  ev.chain = keep;
  return s->ops->op_wf_start_send(s, w, &ev, head, t);
}

int store_start_result(store *s, store_start *t, wf_row *existing) {
  memset(existing, 0, sizeof *existing);
  return t ? s->ops->op_start_result(s, t, existing) : STORE_ERR;
}

void store_start_free(store *s, store_start *t) {
  if (t) s->ops->op_start_free(s, t);
}

int store_wf_get(store *s, const char *id, wf_row *out) { SETTLE(s); return s->ops->op_wf_get(s, id, out); }

int store_wf_set_status(store *s, const char *id, const char *status, const char *result, const char *error) { SETTLE(s); return s->ops->op_wf_set_status(s, id, status, result, error); }

int store_wf_set_cancel(store *s, const char *id, int cancel) { SETTLE(s); return s->ops->op_wf_set_cancel(s, id, cancel); }

int store_wf_set_code(store *s, const char *id, const char *code_hash, const char *script_name, const char *script_dir) { SETTLE(s); return s->ops->op_wf_set_code(s, id, code_hash, script_name, script_dir); }

int store_wf_new_run(store *s, const char *id, int64_t run, const char *input) { SETTLE(s); return s->ops->op_wf_new_run(s, id, run, input); }

int store_wf_list(store *s, const char *status, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_list(s, status, cb, ud); }

int store_wf_page(store *s, const char *status, const char *script, int64_t after_created, const char *after_id, int newest_first, int limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_page(s, status, script, after_created, after_id, newest_first, limit, cb, ud); }

int store_wf_ids(store *s, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_ids(s, prefix, statuses, limit, cb, ud); }
int store_wf_children(store *s, const char *parent, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_children(s, parent, cb, ud); }
int store_wf_forks(store *s, const char *source, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_forks(s, source, cb, ud); }
int store_wf_subtree(store *s, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud) { SETTLE(s); return s->ops->op_wf_subtree(s, root, depth, limit, cb, ud); }
int64_t store_wf_depth(store *s, const char *id, int64_t cap) { SETTLE(s); return s->ops->op_wf_depth(s, id, cap); }
int64_t store_wf_children_running(store *s, const char *parent) { SETTLE(s); return s->ops->op_wf_children_running(s, parent); }

/* ---- the hash chains (chain.c): every append links, every whole read is checked ---- */

int store_hist_append(store *s, const char *wf_id, int64_t run, const hist_event *e) {
  SETTLE(s);
  hist_event ev = *e;
  char link[65];
  if (!chain_hist_link(s, wf_id, run, e, NULL, link)) { /* the head is not known here: the row has it */
    chain_state cs;
    int rc = s->ops->op_chain_get(s, wf_id, &cs);
    if (rc != STORE_OK) return rc;
    if (chain_hist_link(s, wf_id, run, e, &cs, link) < 0) {
      util_seterr(s->errbuf, s->errlen,
                  "the history of %s is damaged: event #%lld is past the head recorded for its workflow (#%lld)",
                  wf_id, (long long)cs.hist_seq + 1, (long long)cs.hist_seq);
      return STORE_ECORRUPT;
    }
  }
  ev.chain = link;
  return s->ops->op_hist_append(s, wf_id, run, &ev);
}

/* What a read the backend found damaged (SQLite's damaged page) belongs to:
 * the history, the domain events, or either (a view's one round trip). */
enum { OF_HISTORY, OF_EVENTS, OF_LOG };

/* Names a damaged read as the workflow's damage. Returns rc. */
static int name_damage(store *s, int rc, int of, const char *wf_id) {
  if (rc != STORE_ECORRUPT || strstr(s->errbuf, " damaged: ")) return rc;
  char was[512];
  snprintf(was, sizeof was, "%s", s->errbuf);
  util_seterr(s->errbuf, s->errlen, "the %s of %s %s damaged: %s",
              of == OF_HISTORY ? "history" : of == OF_EVENTS ? "events" : "log", wf_id, of == OF_EVENTS ? "are" : "is",
              was);
  return rc;
}

/* A read and the chain check of it in one snapshot, where the backend has
 * them (op_read_begin): *snap 1 then. */
static int read_begin(store *s, int *began, int *snap) {
  *began = *snap = 0;
  if (!s->ops->op_read_begin) return STORE_OK;
  int rc = s->ops->op_read_begin(s, began);
  *snap = rc == STORE_OK;
  return rc;
}

static void read_end(store *s, int began) {
  if (s->ops->op_read_end) s->ops->op_read_end(s, began);
}

/* Drops h->v[from..] (a read to be made again). */
static void hist_truncate(hist_list *h, size_t from) {
  hist_list tail = {h->v + from, h->n - from, h->n - from};
  for (size_t i = 0; i < tail.n; i++) {
    free((char *)tail.v[i].type);
    free((char *)tail.v[i].name);
    free((char *)tail.v[i].hash);
    free((char *)tail.v[i].payload);
    free((char *)tail.v[i].chain);
  }
  h->n = from;
}

/* Walks every run of wf_id's history from the first (raw reads), checking
 * each link and each run's start against the end of the run before: what
 * store_verify_chains does, and a read of a run older than the current one.
 * cs was read before. keep (not NULL): run keep's events go there. */
static int walk_history(store *s, const char *wf_id, const chain_state *cs, int64_t keep_run, hist_list *keep,
                        chain_tally *t, int64_t *runs, char *err, size_t errlen) {
  char prev[65] = "";
  for (int64_t r = 1; r <= cs->run; r++) {
    hist_list h = {0};
    int rc = name_damage(s, s->ops->op_hist_load(s, wf_id, r, &h, NULL), OF_HISTORY, wf_id);
    if (rc == STORE_ECORRUPT) snprintf(err, errlen, "%s", s->errbuf);
    if (rc == STORE_OK && r == cs->run && r > cs->hist_from_run && strcmp(prev, cs->hist_base) != 0) {
      util_seterr(err, errlen,
                  "the history of %s is damaged: run %lld does not follow the end of run %lld (events missing or "
                  "altered at the end of run %lld, or the base recorded for its workflow changed)",
                  wf_id, (long long)r, (long long)r - 1, (long long)r - 1);
      rc = STORE_ECORRUPT;
    }
    if (rc == STORE_OK) rc = chain_check_run(s, wf_id, r, &h, 0, cs, prev, t, err, errlen);
    if (runs) (*runs)++;
    if (rc == STORE_OK) snprintf(prev, sizeof prev, "%s", t->last);
    if (rc == STORE_OK && r == keep_run && keep) {
      for (size_t i = 0; i < h.n; i++) { /* moved, strings and all */
        if (keep->n == keep->cap) {
          keep->cap = keep->cap ? keep->cap * 2 : 16;
          keep->v = util_xrealloc(keep->v, keep->cap * sizeof *keep->v);
        }
        keep->v[keep->n++] = h.v[i];
      }
      free(h.v);
    } else {
      hist_list_free(&h);
    }
    if (rc != STORE_OK) return rc;
  }
  return STORE_OK;
}

int store_hist_load(store *s, const char *wf_id, int64_t run, hist_list *out) {
  SETTLE(s);
  size_t from = out->n;
  for (int tries = 0;; tries++) {
    chain_state cs;
    int began, snap, rc = read_begin(s, &began, &snap);
    if (rc != STORE_OK) return rc;
    rc = s->ops->op_hist_load(s, wf_id, run, out, &cs);
    read_end(s, began);
    if (rc != STORE_OK) return name_damage(s, rc, OF_HISTORY, wf_id);
    cs.snapshot = snap;
    chain_overlay(s, wf_id, &cs);
    if (cs.found && run > cs.run) { /* a run begun between the two reads (again), or none yet */
      if (out->n == from) return STORE_OK;
      hist_truncate(out, from);
      if (tries < 3) continue;
      util_seterr(s->errbuf, s->errlen, "the history of %s changed while it was read", wf_id);
      return STORE_ERR;
    }
    if (cs.found && run < cs.run) { /* an older run: its chain is checked from the first run on */
      hist_truncate(out, from);
      chain_tally t = {0};
      return walk_history(s, wf_id, &cs, run, out, &t, NULL, s->errbuf, s->errlen);
    }
    chain_tally t = {0};
    rc = chain_check_run(s, wf_id, run, out, from, &cs, NULL, &t, s->errbuf, s->errlen);
    if (rc == STORE_OK) chain_learned(s, wf_id, run, out, &cs, t.last);
    return rc;
  }
}

static int verify_chains(store *s, const char *wf_id, store_verify *out, int snap);
int store_verify_chains(store *s, const char *wf_id, store_verify *out) {
  SETTLE(s);
  memset(out, 0, sizeof *out);
  int began, snap;
  if (read_begin(s, &began, &snap) != STORE_OK) return -1;
  int r = verify_chains(s, wf_id, out, snap);
  read_end(s, began);
  return r;
}

static int verify_chains(store *s, const char *wf_id, store_verify *out, int snap) {
  chain_state cs;
  int rc = s->ops->op_chain_get(s, wf_id, &cs);
  if (rc == STORE_ECORRUPT) {
    snprintf(out->problem, sizeof out->problem, "%s", s->errbuf);
    return 1;
  }
  if (rc != STORE_OK) return -1;
  if (!cs.found) return 0;
  cs.snapshot = snap;
  chain_overlay(s, wf_id, &cs);
  chain_tally t = {0};
  rc = walk_history(s, wf_id, &cs, 0, NULL, &t, &out->runs, out->problem, sizeof out->problem);
  if (rc == STORE_OK) {
    domain_list dl = {0};
    rc = name_damage(s, s->ops->op_domain_list(s, wf_id, 1, domain_keep, &dl, NULL), OF_EVENTS, wf_id);
    if (rc == STORE_ECORRUPT) snprintf(out->problem, sizeof out->problem, "%s", s->errbuf);
    if (rc == STORE_OK) rc = chain_check_domain(s, wf_id, dl.v, dl.n, &cs, &t, out->problem, sizeof out->problem);
    domain_list_free(&dl);
  }
  out->checked = t.checked;
  out->unchained = t.unchained;
  if (rc != STORE_OK && rc != STORE_ECORRUPT) return -1;
  out->ok = rc == STORE_OK;
  return 1;
}

int store_hist_range(store *s, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  SETTLE(s);
  return s->ops->op_hist_range(s, wf_id, run, from_seq, to_seq, out);
}

int64_t store_hist_max_seq(store *s, const char *wf_id, int64_t run) { SETTLE(s); return s->ops->op_hist_max_seq(s, wf_id, run); }

int store_hist_outcome(store *s, const char *wf_id, int64_t run, int64_t seq) { SETTLE(s); return s->ops->op_hist_outcome(s, wf_id, run, seq); }

int store_hist_get(store *s, const char *wf_id, int64_t run, int64_t seq, hist_list *out) { SETTLE(s); return s->ops->op_hist_get(s, wf_id, run, seq, out); }

/* A script's code once per store: a start of a script this store has put
 * and committed writes no row (a statement per start on PostgreSQL). */
int store_code_put(store *s, const char *hash, const char *name, const char *src, size_t len) {
  SETTLE(s);
  if (code_cache_has(s, hash)) return STORE_OK;
  int rc = s->ops->op_code_put(s, hash, name, src, len);
  if (rc == STORE_OK) code_cache_put(s, hash);
  return rc;
}

char *store_code_get(store *s, const char *hash, size_t *len) { SETTLE(s); return s->ops->op_code_get(s, hash, len); }

int store_module_pin(store *s, const char *wf_id, int64_t run, const char *module, const char *hash) { SETTLE(s); return s->ops->op_module_pin(s, wf_id, run, module, hash); }

char *store_module_get(store *s, const char *wf_id, int64_t run, const char *module) { SETTLE(s); return s->ops->op_module_get(s, wf_id, run, module); }

int store_modules_clear(store *s, const char *wf_id, int64_t run) { SETTLE(s); return s->ops->op_modules_clear(s, wf_id, run); }

int store_modules_copy(store *s, const char *wf_id, int64_t from_run, int64_t to_run) { SETTLE(s); return s->ops->op_modules_copy(s, wf_id, from_run, to_run); }

/* A fork's copy: src's events read through the checked reads (a damaged
 * source is refused, naming its first bad seq, and nothing of it copied),
 * then appended as dst's one by one, so that their links are dst's own
 * chain (a link hashes its workflow's id: src's would not check as dst's),
 * dst's domain events with their feed positions in seq order. */
int store_fork_copy(store *s, const char *src, int64_t run, int64_t hist_from, int64_t hist_to, int64_t domain_to,
                    int modules, const char *dst) {
  SETTLE(s);
  int rc = STORE_OK;
  if (hist_to >= hist_from) {
    hist_list h = {0};
    rc = store_hist_load(s, src, run, &h);
    for (size_t i = 0; i < h.n && rc == STORE_OK; i++) {
      if (h.v[i].seq < hist_from || h.v[i].seq > hist_to) continue;
      hist_event e = h.v[i];
      e.chain = NULL;
      rc = store_hist_append(s, dst, run, &e);
    }
    hist_list_free(&h);
  }
  if (rc == STORE_OK && domain_to > 0) {
    domain_list dl = {0};
    rc = store_domain_list(s, src, 0, domain_keep, &dl);
    for (size_t i = 0; i < dl.n && rc == STORE_OK && dl.v[i].seq <= domain_to; i++) {
      int64_t seq = store_domain_append(s, dst, dl.v[i].type, dl.v[i].time, dl.v[i].payload);
      if (seq < 0) {
        rc = (int)seq;
      } else if (seq != dl.v[i].seq) { /* dst had events of its own: the copy would not be the source's */
        util_seterr(s->errbuf, s->errlen, "fork: %s has domain events already (the copy of #%lld would be #%lld)", dst,
                    (long long)dl.v[i].seq, (long long)seq);
        rc = STORE_ERR;
      }
    }
    domain_list_free(&dl);
  }
  if (rc == STORE_OK && modules) rc = s->ops->op_fork_modules(s, src, run, dst);
  return rc;
}

int store_task_put(store *s, const char *wf_id, const char *kind, int64_t seq, int64_t run_at, int attempt, int64_t first_at, const char *owner, int64_t lease_until) { SETTLE(s); return s->ops->op_task_put(s, wf_id, kind, seq, run_at, attempt, first_at, owner, lease_until); }

int store_task_del(store *s, const char *wf_id, const char *kind, int64_t seq) { SETTLE(s); return s->ops->op_task_del(s, wf_id, kind, seq); }

int store_task_take(store *s, const char *wf_id, const char *kind, int64_t seq) { SETTLE(s); return s->ops->op_task_take(s, wf_id, kind, seq); }

static int task_start_one(store *s, const char *owner, int64_t now, int64_t until, task_start *t, chain_state *cs) {
  int rc = t->claim && s->ops->op_lease_claim ? s->ops->op_lease_claim(s, t->wf_id, owner, now, until) : 1;
  if (rc <= 0) return rc;
  t->owned = 1;
  if ((rc = s->ops->op_task_take(s, t->wf_id, t->kind, t->seq)) <= 0) return rc;
  t->took = 1;
  if ((rc = s->ops->op_wf_get(s, t->wf_id, &t->w)) <= 0) return rc;
  t->found = 1;
  if (!t->history) return STORE_OK;
  int began, snap;
  if ((rc = read_begin(s, &began, &snap)) != STORE_OK) return rc;
  rc = name_damage(s, s->ops->op_hist_load(s, t->wf_id, t->w.run, &t->h, cs), OF_HISTORY, t->wf_id);
  read_end(s, began);
  cs->snapshot = snap;
  if (rc == STORE_ECORRUPT) { /* a damaged page: this workflow's, not the dispatch's */
    t->damaged = util_strdup(s->errbuf);
    hist_list_free(&t->h);
    rc = STORE_OK;
  }
  return rc;
}

static void task_start_clear(task_start *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    t[i].owned = t[i].took = t[i].found = 0;
    t[i].damaged = NULL;
    memset(&t[i].w, 0, sizeof t[i].w);
    memset(&t[i].h, 0, sizeof t[i].h);
  }
}

/* Each history read is checked: a damaged one is that task's (damaged),
 * one read across a new run is read again when the run loads. */
static void task_start_check(store *s, task_start *t, size_t n, chain_state *cs) {
  for (size_t i = 0; i < n; i++) {
    if (!t[i].found || !t[i].history || t[i].damaged) continue;
    chain_overlay(s, t[i].wf_id, &cs[i]);
    char why[512];
    if (cs[i].found && cs[i].run != t[i].w.run) {
      hist_list_free(&t[i].h);
    } else {
      chain_tally tl = {0};
      int rc2 = chain_check_run(s, t[i].wf_id, t[i].w.run, &t[i].h, 0, &cs[i], NULL, &tl, why, sizeof why);
      if (rc2 == STORE_ECORRUPT) t[i].damaged = util_strdup(why);
      if (rc2 != STORE_OK) hist_list_free(&t[i].h); /* damaged, or read again when the run loads */
      else chain_learned(s, t[i].wf_id, t[i].w.run, &t[i].h, &cs[i], tl.last);
    }
  }
}

int store_task_start(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  SETTLE(s);
  task_start_clear(t, n);
  chain_state *cs = util_xcalloc(n ? n : 1, sizeof *cs);
  int rc = STORE_OK;
  if (s->ops->op_task_start) rc = s->ops->op_task_start(s, owner, now, until, t, n, cs);
  for (size_t i = 0; i < n && rc == STORE_OK && !s->ops->op_task_start; i++)
    rc = task_start_one(s, owner, now, until, &t[i], &cs[i]);
  if (rc == STORE_OK) task_start_check(s, t, n, cs);
  free(cs);
  return rc;
}

int store_task_start_send(store *s, const char *owner, int64_t now, int64_t until, task_start *t, size_t n) {
  SETTLE(s);
  if (!s->ops->op_task_start_send || s->pending) return 0; /* an answer not reported yet: ask at once */
  task_start_clear(t, n);
  return read_sent(s, s->ops->op_task_start_send(s, owner, now, until, t, n)) == STORE_PENDING ? 1 : -1;
}

int store_task_start_result(store *s, int rc, task_start *t, size_t n) {
  chain_state *cs = util_xcalloc(n ? n : 1, sizeof *cs);
  rc = s->ops->op_task_start_result(s, rc, t, n, cs);
  if (rc == STORE_OK) task_start_check(s, t, n, cs);
  free(cs);
  return rc;
}

void store_task_start_free(task_start *t) {
  if (t->found) wf_row_free(&t->w);
  hist_list_free(&t->h);
  free(t->damaged);
  t->damaged = NULL;
  t->found = 0;
}

int store_task_release(store *s, const char *owner) { SETTLE(s); return s->ops->op_task_release(s, owner); }

int store_task_del_wf(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_task_del_wf(s, wf_id); }

int store_task_get(store *s, const char *wf_id, const char *kind, int64_t seq, task_row *out) { SETTLE(s); return s->ops->op_task_get(s, wf_id, kind, seq, out); }

int store_task_due(store *s, int64_t now, const char *owner, int limit, int unheld, store_task_cb cb, void *ud) { SETTLE(s); return s->ops->op_task_due(s, now, owner, limit, unheld, cb, ud); }

int store_task_due_send(store *s, int64_t now, const char *owner, int limit, int unheld) {
  SETTLE(s);
  if (!s->ops->op_task_due_send || s->pending) return 0;
  return read_sent(s, s->ops->op_task_due_send(s, now, owner, limit, unheld)) == STORE_PENDING ? 1 : -1;
}

int store_task_due_result(store *s, int rc, store_task_cb cb, void *ud) {
  return s->ops->op_task_due_result(s, rc, cb, ud);
}

int64_t store_task_next_at(store *s, const char *owner) { SETTLE(s); return s->ops->op_task_next_at(s, owner); }

int store_task_next_send(store *s, const char *owner, int64_t *next_at) {
  SETTLE(s);
  int rc = s->ops->op_task_next_send ? s->ops->op_task_next_send(s, owner) : 0;
  if (rc == 0) *next_at = s->ops->op_task_next_at(s, owner);
  return rc;
}

int64_t store_task_next_result(store *s) { return s->ops->op_task_next_result ? s->ops->op_task_next_result(s) : -2; }

int store_shared(store *s) { return s->ops->op_lease_claim != NULL; }
int store_lease_claim(store *s, const char *wf_id, const char *owner, int64_t now, int64_t until) {
  SETTLE(s);
  return s->ops->op_lease_claim ? s->ops->op_lease_claim(s, wf_id, owner, now, until) : 1;
}
int store_lease_held(store *s, const char *wf_id) { return s->ops->op_lease_held ? s->ops->op_lease_held(s, wf_id) : 1; }
int64_t store_lease_count(store *s) { return s->ops->op_lease_count ? s->ops->op_lease_count(s) : 0; }
int store_lease_fence(store *s, const char *wf_id) {
  SETTLE(s);
  return s->ops->op_lease_fence ? s->ops->op_lease_fence(s, wf_id) : STORE_OK;
}
int store_lease_renew(store *s, const char *owner, int64_t until, void (*lost)(void *ud, const char *wf_id),
                      void *ud) {
  SETTLE(s);
  return s->ops->op_lease_renew ? s->ops->op_lease_renew(s, owner, until, lost, ud) : STORE_OK;
}
int store_lease_release(store *s, const char *owner, const char *wf_id) {
  SETTLE(s);
  return s->ops->op_lease_release ? s->ops->op_lease_release(s, owner, wf_id) : STORE_OK;
}

int store_task_count(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_task_count(s, wf_id); }

int store_signal_put(store *s, const char *wf_id, const char *name, const char *payload, int64_t time) { SETTLE(s); return s->ops->op_signal_put(s, wf_id, name, payload, time); }

int store_signal_take(store *s, const char *wf_id, const char *name, char **payload) { SETTLE(s); return s->ops->op_signal_take(s, wf_id, name, payload); }

int store_signal_wake(store *s, const char *wf_id, const char *name, const char *payload, int64_t time) { SETTLE(s); return s->ops->op_signal_wake(s, wf_id, name, payload, time); }

int store_signal_count(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_signal_count(s, wf_id); }

int store_signal_has(store *s, const char *wf_id, const char *name) { SETTLE(s); return s->ops->op_signal_has(s, wf_id, name); }

int store_signal_del_wf(store *s, const char *wf_id) { SETTLE(s); return s->ops->op_signal_del_wf(s, wf_id); }

int64_t store_domain_append(store *s, const char *session_id, const char *type, int64_t time, const char *payload) { SETTLE(s); return s->ops->op_domain_append(s, session_id, type, time, payload); }

int store_domain_list(store *s, const char *session_id, int64_t after_seq, store_domain_cb cb, void *ud) {
  SETTLE(s);
  if (after_seq < 0) after_seq = 0;
  domain_list dl = {0};
  chain_state cs;
  /* all of them, from #1: an event keeps only the start of its link, so the
   * chain is computed on from the first (what is handed on is after_seq's) */
  int began, snap, rc = read_begin(s, &began, &snap);
  if (rc != STORE_OK) return rc;
  rc = s->ops->op_domain_list(s, session_id, 1, domain_keep, &dl, &cs);
  read_end(s, began);
  name_damage(s, rc, OF_EVENTS, session_id);
  if (rc == STORE_OK) {
    cs.snapshot = snap;
    chain_overlay(s, session_id, &cs);
    rc = chain_check_domain(s, session_id, dl.v, dl.n, &cs, NULL, s->errbuf, s->errlen);
  }
  for (size_t i = 0; i < dl.n && rc == STORE_OK; i++)
    if (dl.v[i].seq > after_seq && cb(ud, &dl.v[i])) break;
  domain_list_free(&dl);
  return rc;
}

/* The view's reads as they are (raw), the chain's columns first: the
 * backend's pipeline, or one call after another. */
static int wf_view_raw(store *s, const char *id, wf_view *out, domain_list *dl, chain_state *cs) {
  if (s->ops->op_wf_view) return s->ops->op_wf_view(s, id, out, domain_keep, dl, cs);
  int rc = s->ops->op_chain_get(s, id, cs);
  if (rc != STORE_OK) return rc;
  int found = s->ops->op_wf_get(s, id, &out->w);
  if (found != 1) return found;
  if ((rc = name_damage(s, s->ops->op_hist_load(s, id, out->w.run, &out->h, NULL), OF_HISTORY, id)) != STORE_OK ||
      (out->tasks = s->ops->op_task_count(s, id)) < 0 || (out->signals = s->ops->op_signal_count(s, id)) < 0 ||
      (rc = name_damage(s, s->ops->op_domain_list(s, id, 1, domain_keep, dl, NULL), OF_EVENTS, id)) !=
          STORE_OK) {
    store_wf_view_free(out);
    return rc < 0 ? rc : STORE_ERR;
  }
  return 1;
}

int store_wf_view(store *s, const char *id, wf_view *out, store_domain_cb cb, void *ud) {
  SETTLE(s);
  for (int tries = 0;; tries++) {
    memset(out, 0, sizeof *out);
    domain_list dl = {0};
    chain_state cs;
    int began, snap, found = read_begin(s, &began, &snap);
    if (found != STORE_OK) return found;
    found = name_damage(s, wf_view_raw(s, id, out, &dl, &cs), OF_LOG, id);
    read_end(s, began);
    if (found == 1) {
      cs.snapshot = snap;
      chain_overlay(s, id, &cs);
      if (cs.found && cs.run != out->w.run && tries < 3) { /* a run begun while it was read: again */
        store_wf_view_free(out);
        domain_list_free(&dl);
        continue;
      }
      int rc = chain_check_run(s, id, out->w.run, &out->h, 0, &cs, NULL, NULL, s->errbuf, s->errlen);
      if (rc == STORE_OK) rc = chain_check_domain(s, id, dl.v, dl.n, &cs, NULL, s->errbuf, s->errlen);
      if (rc != STORE_OK) {
        store_wf_view_free(out);
        found = rc;
      }
    }
    for (size_t i = 0; i < dl.n && found == 1; i++)
      if (cb(ud, &dl.v[i])) break;
    domain_list_free(&dl);
    return found;
  }
}

int store_feed_after(store *s, int64_t after_id, int limit, store_feed_cb cb, void *ud) { SETTLE(s); return s->ops->op_feed_after(s, after_id, limit, cb, ud); }

int64_t store_feed_last(store *s) { SETTLE(s); return s->ops->op_feed_last(s); }

int store_meta_get(store *s, const char *key, char **value) { SETTLE(s); return s->ops->op_meta_get(s, key, value); }

int store_meta_put(store *s, const char *key, const char *value) { SETTLE(s); return s->ops->op_meta_put(s, key, value); }

int store_token_put(store *s, const char *name, const char *hash, unsigned scopes, const char *grants,
                    int64_t created_at) { SETTLE(s); return s->ops->op_token_put(s, name, hash, scopes, grants, created_at); }

int store_token_revoke(store *s, const char *name, int64_t revoked_at) { SETTLE(s); return s->ops->op_token_revoke(s, name, revoked_at); }

int store_token_list(store *s, store_token_cb cb, void *ud) { SETTLE(s); return s->ops->op_token_list(s, cb, ud); }

int store_token_live(store *s, store_token_cb cb, void *ud) { SETTLE(s); return s->ops->op_token_live(s, cb, ud); }

int64_t store_token_live_count(store *s) { SETTLE(s); return s->ops->op_token_live_count(s); }

int store_slot_put(store *s, const char *pool, const char *key, const char *wf_id, int64_t seq, int64_t limit, int64_t since) { SETTLE(s); return s->ops->op_slot_put(s, pool, key, wf_id, seq, limit, since); }

int store_slot_get(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_get(s, wf_id, pool, key, cb, ud); }

int store_slot_head(store *s, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_head(s, pool, key, cb, ud); }

int64_t store_slot_count(store *s, const char *pool, const char *key, int held) { SETTLE(s); return s->ops->op_slot_count(s, pool, key, held); }

int store_slot_hold(store *s, const char *wf_id, const char *pool, const char *key, int64_t since) { SETTLE(s); return s->ops->op_slot_hold(s, wf_id, pool, key, since); }

int store_slot_del(store *s, const char *wf_id, const char *pool, const char *key) { SETTLE(s); return s->ops->op_slot_del(s, wf_id, pool, key); }

int store_slot_list(store *s, const char *wf_id, const char *pool, const char *key, store_slot_cb cb, void *ud) { SETTLE(s); return s->ops->op_slot_list(s, wf_id, pool, key, cb, ud); }

int store_delivery_put(store *s, const delivery_row *d) { SETTLE(s); return s->ops->op_delivery_put(s, d); }

int store_delivery_find(store *s, const char *trigger, const char *delivery, store_delivery_cb cb, void *ud) { SETTLE(s); return s->ops->op_delivery_find(s, trigger, delivery, cb, ud); }

int store_delivery_list(store *s, const char *trigger, int limit, store_delivery_cb cb, void *ud) { SETTLE(s); return s->ops->op_delivery_list(s, trigger, limit, cb, ud); }

int store_table_page(store *s, const store_table *t, const store_value *after, int limit, store_row_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_table_page(s, t, after, limit, cb, ud);
}

int store_table_insert(store *s, const store_table *t, const store_value *row, int replace) {
  SETTLE(s);
  return s->ops->op_table_insert(s, t, row, replace);
}

int64_t store_table_count(store *s, const store_table *t) { SETTLE(s); return s->ops->op_table_count(s, t); }

int store_table_finish(store *s, const store_table *t) { SETTLE(s); return s->ops->op_table_finish(s, t); }

int store_counter_get(store *s, const char *name, counter_row *out) { SETTLE(s); return s->ops->op_counter_get(s, name, out); }

int store_counter_put(store *s, const char *name, const counter_row *c) { SETTLE(s); return s->ops->op_counter_put(s, name, c); }

int store_counter_list(store *s, const char *prefix, store_counter_cb cb, void *ud) { SETTLE(s); return s->ops->op_counter_list(s, prefix, cb, ud); }

int store_group_count(store *s, store_group what, const char *const *types,
                      int (*cb)(void *ud, const char *key, int64_t n), void *ud) {
  SETTLE(s);
  return s->ops->op_group_count(s, what, types, cb, ud);
}
int store_live_list(store *s, const char *const *types, store_live_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_live_list(s, types, cb, ud);
}

int64_t store_count(store *s, const char *what, const char *wf_id) { SETTLE(s); return s->ops->op_count(s, what, wf_id); }

int store_schedule_insert(store *s, const schedule_row *r) { SETTLE(s); return s->ops->op_schedule_insert(s, r); }

int store_schedule_update(store *s, const schedule_row *r) { SETTLE(s); return s->ops->op_schedule_update(s, r); }

int store_schedule_get(store *s, const char *name, store_schedule_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_schedule_get(s, name, cb, ud);
}

int store_schedule_list(store *s, store_schedule_cb cb, void *ud) { SETTLE(s); return s->ops->op_schedule_list(s, cb, ud); }

int store_schedule_del(store *s, const char *name) { SETTLE(s); return s->ops->op_schedule_del(s, name); }

int store_memory_put(store *s, const memory_row *m) { SETTLE(s); return s->ops->op_memory_put(s, m); }

int store_memory_revoke(store *s, const char *id, int64_t at, const char *by, const char *reason) {
  SETTLE(s);
  return s->ops->op_memory_revoke(s, id, at, by, reason);
}

int store_memory_list(store *s, const char *id, const char *kind, const char *identity, int live_only,
                      store_memory_cb cb, void *ud) {
  SETTLE(s);
  return s->ops->op_memory_list(s, id, kind, identity, live_only, cb, ud);
}


int store_is_url(const char *path) {
  return path && (strncmp(path, "postgres://", 11) == 0 || strncmp(path, "postgresql://", 13) == 0);
}

int store_remote_lock(const char *url, const char *mode, char *holder, size_t holderlen) {
  return store_pg_lock(url, mode, holder, holderlen);
}

int store_remote_unlock(int fd) { return store_pg_unlock(fd); }
