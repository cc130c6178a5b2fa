/* pg_workflows: the PostgreSQL store's statements of workflows, their
 * history, code and pinned modules, and what a workflow's page reads in one
 * round trip (store_wf_view). pg.c has the overview. */
#include "pg_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- workflows ---- */

/* The row's columns as Q_WF_INSERT and Q_WF_START take them, in order. */
static void bind_row(pg *s, const wf_row *w) {
  pg_bind_text(s, w->id);
  pg_bind_int(s, w->run);
  pg_bind_text(s, w->status);
  pg_bind_text(s, w->script_name);
  pg_bind_text(s, w->script_dir);
  pg_bind_text(s, w->code_hash);
  pg_bind_text(s, w->input);
  pg_bind_text(s, w->result);
  pg_bind_text(s, w->error);
  pg_bind_int(s, w->cancel);
  pg_bind_int(s, w->created_at);
  pg_bind_int(s, w->updated_at);
  pg_bind_text(s, w->parent);
  pg_bind_text(s, w->parent_close);
  pg_bind_text(s, w->forked_from);
}

/* A fork's row (starts are pg_wf_start's): its id was found free under
 * its lock (pg_wf_get in a client's batch), taken again here in case not. */
int pg_wf_insert(store *st_, const wf_row *w) {
  pg *s = (pg *)st_;
  ORDERED_BEGIN(s, ORDER_WF_ID, w->id, NULL);
  pg_params_start(s);
  bind_row(s, w);
  return pg_exec_defer(s, Q_WF_INSERT, "insert workflow");
}

/* A history event's parameters, in its columns' order (seq to chain). */
static void bind_event(pg *s, const hist_event *e) {
  pg_bind_int(s, e->seq);
  pg_bind_text(s, e->type);
  pg_bind_int(s, e->ref);
  pg_bind_text(s, e->name);
  pg_bind_text(s, e->hash);
  pg_bind_text(s, e->payload);
  pg_bind_int(s, e->time);
  pg_bind_text(s, e->chain);
}

/* A start's parameters: its row, then its first event (Q_WF_START and
 * Q_WF_START_SEND begin alike). */
static void bind_start(pg *s, const wf_row *w, const hist_event *e) {
  pg_params_start(s);
  bind_row(s, w);
  bind_event(s, e);
}

/* store_wf_start in one statement (Q_WF_START), one round trip with the
 * batch's writes before it. INSERT ... ON CONFLICT waits for a batch that
 * inserted the id and has not committed: when that one commits, this
 * statement began before it and does not see its row, so it asks again. */
int pg_wf_start(store *st_, const wf_row *w, const hist_event *e, int queue, wf_row *existing) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  for (int tries = 0; tries < 3; tries++) {
    bind_start(s, w, e);
    pg_bind_int(s, queue ? 1 : 0);
    if (pg_injected(s, "insert workflow")) {
      s->bind_failed = 0;
      return STORE_ERR;
    }
    PGresult *r = pq_run(s, Q_WF_START, 0, "start workflow");
    if (!r) return STORE_ERR;
    int made = PQntuples(r) > 0 && pg_col_int(r, 0, 15) > 0, found = !made && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0);
    if (found) pg_read_wf(r, 0, existing);
    PQclear(r);
    if (made) s->writes += 2 + (queue ? 1 : 0);
    if (made || found) return made;
  }
  util_seterr(s->err, sizeof s->err, "start workflow %s: neither written nor found three times", w->id);
  return STORE_ERR;
}

/* A start sent ahead (store_wf_start_send): its answer lands in res when
 * the batch's answers are read (the pipeline's keep). */
struct store_start {
  PGresult *res;
};

int pg_wf_start_send(store *st_, const wf_row *w, const hist_event *e, const char *head, store_start **t) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  bind_start(s, w, e);
  pg_bind_text(s, head);
  if (pg_injected(s, "insert workflow")) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  store_start *x = util_xcalloc(1, sizeof *x);
  if (pg_pipe_send_q(s, Q_WF_START_SEND, "start workflow", &x->res) != STORE_OK) {
    free(x);
    return STORE_ERR;
  }
  s->writes += 4;
  *t = x;
  return STORE_OK;
}

int pg_start_result(store *st_, store_start *t, wf_row *existing) {
  (void)st_;
  PGresult *r = t->res;
  if (!r) return STORE_ERR;
  int made = PQntuples(r) > 0 && pg_col_int(r, 0, 15) > 0, found = !made && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0);
  if (found) pg_read_wf(r, 0, existing);
  return made ? 1 : found ? 0 : 2;
}

void pg_start_free(store *st_, store_start *t) {
  (void)st_;
  PQclear(t->res);
  free(t);
}

void pg_read_wf(const PGresult *r, int i, wf_row *w) {
  w->id = pg_col_dup(r, i, 0);
  w->run = pg_col_int(r, i, 1);
  w->status = pg_col_dup(r, i, 2);
  w->script_name = pg_col_dup(r, i, 3);
  w->script_dir = pg_col_dup(r, i, 4);
  w->code_hash = pg_col_dup(r, i, 5);
  w->input = pg_col_dup(r, i, 6);
  w->result = pg_col_dup(r, i, 7);
  w->error = pg_col_dup(r, i, 8);
  w->cancel = (int)pg_col_int(r, i, 9);
  w->created_at = pg_col_int(r, i, 10);
  w->updated_at = pg_col_int(r, i, 11);
  w->parent = pg_col_dup(r, i, 12);
  w->parent_close = pg_col_dup(r, i, 13);
  w->forked_from = pg_col_dup(r, i, 14);
}

/* In a client's batch (store_begin) a workflow found stays locked to its
 * commit (FOR SHARE), and an id found free stays free to it: its order lock
 * (ORDER_WF_ID) is taken and the id read again under it, so a fork's check
 * and its insert are not split by another's. */
int pg_wf_get(store *st_, const char *id, wf_row *out) {
  pg *s = (pg *)st_;
  memset(out, 0, sizeof *out);
  int client = s->client && s->in_txn && !s->failed, found = 0;
  for (int pass = 0; pass < 2; pass++) {
    if (pass && pg_lock_on(s, ORDER_WF_ID, id, NULL) != STORE_OK) return STORE_ERR;
    pg_params_start(s);
    pg_bind_text(s, id);
    PGresult *r = pq_run(s, client ? Q_WF_GET_SHARE : Q_WF_GET, 0, "get workflow");
    if (!r) return STORE_ERR;
    found = PQntuples(r) > 0;
    if (found) pg_read_wf(r, 0, out);
    PQclear(r);
    if (found || !client) break;
  }
  return found;
}

int pg_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, status);
  pg_bind_text(s, result);
  pg_bind_text(s, error);
  pg_bind_int(s, util_now_ms());
  pg_bind_text(s, id);
  return pg_rows_status(s); /* in a batch, its last for the workflow is sent with the others (pg_rows.c) */
}

int pg_wf_set_cancel(store *st_, const char *id, int cancel) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_int(s, cancel);
  pg_bind_int(s, util_now_ms());
  pg_bind_text(s, id);
  return pg_exec_defer(s, Q_WF_CANCEL, "set cancel");
}

int pg_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                   const char *script_dir) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, code_hash);
  pg_bind_text(s, script_name);
  pg_bind_text(s, script_dir);
  pg_bind_int(s, util_now_ms());
  pg_bind_text(s, id);
  return pg_exec_defer(s, Q_WF_CODE, "set code");
}

int pg_wf_new_run(store *st_, const char *id, int64_t run, const char *input) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_int(s, run);
  pg_bind_text(s, input);
  pg_bind_int(s, util_now_ms());
  pg_bind_text(s, id);
  return pg_exec_defer(s, Q_WF_NEWRUN, "new run");
}

/* Runs the bound workflow query q, each row to cb (nonzero stops). */
static int each_wf(pg *s, int q, store_wf_cb cb, void *ud) {
  PGresult *r = pq_run(s, q, 0, "list workflows");
  if (!r) return STORE_ERR;
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    wf_row w;
    pg_read_wf(r, i, &w);
    int stop = cb(ud, &w);
    wf_row_free(&w);
    if (stop) break;
  }
  PQclear(r);
  return STORE_OK;
}

int pg_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  if (status) pg_bind_text(s, status);
  return each_wf(s, status ? Q_WF_LIST_STATUS : Q_WF_LIST, cb, ud);
}

int pg_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
               int newest_first, int limit, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, status);
  pg_bind_text(s, script);
  pg_bind_int(s, after_created);
  pg_bind_text(s, after_id ? after_id : "");
  pg_bind_int(s, limit);
  return each_wf(s, newest_first ? Q_WF_PAGE_DESC : Q_WF_PAGE, cb, ud);
}

int pg_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  char *above = pg_prefix_above(prefix), *among = statuses ? util_fmt(",%s,", statuses) : NULL;
  pg_params_start(s);
  pg_bind_text(s, prefix);
  if (above) pg_bind_text(s, above);
  pg_bind_text(s, among);
  pg_bind_int(s, limit);
  int rc = each_wf(s, above ? Q_WF_IDS : Q_WF_IDS_FROM, cb, ud);
  free(above);
  free(among);
  return rc;
}

int pg_wf_children(store *st_, const char *parent, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, parent);
  return each_wf(s, Q_WF_CHILDREN, cb, ud);
}

int pg_wf_forks(store *st_, const char *source, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, source);
  return each_wf(s, Q_WF_FORKS, cb, ud);
}

int pg_wf_subtree(store *st_, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, root);
  pg_bind_int(s, depth);
  pg_bind_int(s, limit);
  return each_wf(s, Q_WF_SUBTREE, cb, ud);
}

int64_t pg_wf_depth(store *st_, const char *id, int64_t cap) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, id);
  pg_bind_int(s, cap);
  int64_t v;
  return pg_query_int(s, Q_WF_DEPTH, 0, &v) == STORE_OK ? v : -1;
}

int64_t pg_wf_children_running(store *st_, const char *parent) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, parent);
  int64_t v;
  return pg_query_int(s, Q_WF_CHILDREN_RUNNING, 0, &v) == STORE_OK ? v : -1;
}

/* ---- history ---- */

int pg_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  bind_event(s, e);
  /* in a batch, held and sent with the batch's others (pg_rows.c) */
  return pg_rows_add(s, &s->hist_rows, Q_HIST_APPEND, Q_HIST_APPEND_MANY, "append history");
}

/* ---- a workflow's hash chains: where they start (its row) and their heads (chain_heads) ---- */

/* cs from a result of Q_WF_CHAIN (no row: not found). */
void pg_chain_from(const PGresult *r, chain_state *cs) {
  memset(cs, 0, sizeof *cs);
  if (!r || PQntuples(r) < 1) return;
  cs->found = 1;
  cs->run = pg_col_int(r, 0, 0);
  snprintf(cs->hist_head, sizeof cs->hist_head, "%s", pg_col_text(r, 0, 1) ? pg_col_text(r, 0, 1) : "");
  cs->hist_seq = pg_col_int(r, 0, 2);
  snprintf(cs->hist_base, sizeof cs->hist_base, "%s", pg_col_text(r, 0, 3) ? pg_col_text(r, 0, 3) : "");
  cs->hist_from_run = pg_col_int(r, 0, 4);
  cs->hist_from_seq = pg_col_int(r, 0, 5);
  snprintf(cs->dom_head, sizeof cs->dom_head, "%s", pg_col_text(r, 0, 6) ? pg_col_text(r, 0, 6) : "");
  cs->dom_seq = pg_col_int(r, 0, 7);
  cs->dom_from = pg_col_int(r, 0, 8);
}

int pg_chain_get(store *st_, const char *wf_id, chain_state *cs) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  PGresult *r = pq_run(s, Q_WF_CHAIN, 0, "read the workflow's chain");
  if (!r) return STORE_ERR;
  pg_chain_from(r, cs);
  PQclear(r);
  return STORE_OK;
}

/* Sends the read of wf_id's chain columns into the pipeline (its result to *keep). */
int pg_chain_send(pg *s, const char *wf_id, PGresult **keep) {
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  return pg_pipe_send_q(s, Q_WF_CHAIN, "read the workflow's chain", keep);
}


void pg_events_from(const PGresult *r, hist_list *out) {
  for (int i = 0, n = PQntuples(r); i < n; i++) {
    if (out->n == out->cap) {
      out->cap = out->cap ? out->cap * 2 : 16;
      out->v = util_xrealloc(out->v, out->cap * sizeof(hist_event));
    }
    hist_event *e = &out->v[out->n++];
    e->seq = pg_col_int(r, i, 0);
    e->type = pg_col_dup(r, i, 1);
    e->ref = pg_col_int(r, i, 2);
    e->name = pg_col_dup(r, i, 3);
    e->hash = pg_col_dup(r, i, 4);
    e->payload = pg_col_dup(r, i, 5);
    e->time = pg_col_int(r, i, 6);
    e->chain = pg_col_dup(r, i, 7);
  }
}

int64_t pg_events_run(const PGresult *r) { return r && PQntuples(r) > 0 ? pg_col_int(r, 0, 8) : -1; }

static int read_events(pg *s, int q, hist_list *out) {
  PGresult *r = pq_run(s, q, 0, "load history");
  if (!r) return STORE_ERR;
  pg_events_from(r, out);
  PQclear(r);
  return STORE_OK;
}

/* The rows as they are (store.c checks them); with cs, the chain columns
 * read first in the same round trip. */
int pg_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out, chain_state *cs) {
  pg *s = (pg *)st_;
  if (!cs) {
    pg_params_start(s);
    pg_bind_text(s, wf_id);
    pg_bind_int(s, run);
    return read_events(s, Q_HIST_LOAD, out);
  }
  PGresult *r[2] = {0};
  int rc = pg_chain_send(s, wf_id, &r[0]);
  if (rc == STORE_OK) {
    pg_params_start(s);
    pg_bind_text(s, wf_id);
    pg_bind_int(s, run);
    rc = pg_pipe_send_q(s, Q_HIST_LOAD, "load history", &r[1]);
  }
  if (rc == STORE_OK) rc = pg_pipe_drain(s, 1);
  if (rc == STORE_OK) {
    pg_chain_from(r[0], cs);
    pg_events_from(r[1], out);
  }
  PQclear(r[0]);
  PQclear(r[1]);
  return rc;
}

int pg_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  pg_bind_int(s, from_seq);
  pg_bind_int(s, to_seq);
  return read_events(s, Q_HIST_RANGE, out);
}

int pg_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  pg_bind_int(s, seq);
  size_t before = out->n;
  if (read_events(s, Q_HIST_GET, out) != STORE_OK) return STORE_ERR;
  return out->n > before;
}

int64_t pg_hist_max_seq(store *st_, const char *wf_id, int64_t run) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  int64_t v;
  return pg_query_int(s, Q_HIST_MAX, 0, &v) == STORE_OK ? v : -1;
}

int pg_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  pg_bind_int(s, seq);
  pg_bind_int(s, seq);
  int64_t v;
  if (pg_query_int(s, Q_HIST_OUTCOME, 0, &v) != STORE_OK) return STORE_ERR;
  return v != 0;
}

/* ---- code ---- */

int pg_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, hash);
  pg_bind_text(s, name);
  pg_bind_blob(s, src, len);
  return pg_exec_defer(s, Q_CODE_PUT, "store code");
}

char *pg_code_get(store *st_, const char *hash, size_t *len) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, hash);
  PGresult *r = pq_run(s, Q_CODE_GET, 1, "get code"); /* binary: the source's bytes as they are */
  if (!r) return NULL;
  char *out = NULL;
  if (PQntuples(r) > 0) {
    int n = PQgetlength(r, 0, 0);
    out = util_xmalloc((size_t)n + 1);
    if (n > 0) memcpy(out, PQgetvalue(r, 0, 0), (size_t)n);
    out[n] = 0;
    if (len) *len = (size_t)n;
  }
  PQclear(r);
  return out;
}

int pg_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  pg_bind_text(s, module);
  pg_bind_text(s, hash);
  return pg_exec_defer(s, Q_MOD_PIN, "pin module");
}

char *pg_module_get(store *st_, const char *wf_id, int64_t run, const char *module) {
  pg *s = (pg *)st_;
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  pg_bind_text(s, module);
  PGresult *r = pq_run(s, Q_MOD_GET, 0, "get module");
  if (!r) return NULL;
  char *out = PQntuples(r) > 0 ? pg_col_dup(r, 0, 0) : NULL;
  PQclear(r);
  return out;
}

int pg_modules_clear(store *st_, const char *wf_id, int64_t run) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, run);
  return pg_exec_defer(s, Q_MOD_CLEAR, "clear modules");
}

/* ---- forks ---- */

/* A fork's pinned modules: those of src's run, as dst's (its history and
 * domain events are appended one by one, store_fork_copy: their links are
 * the fork's own). */
int pg_fork_modules(store *st_, const char *src, int64_t run, const char *dst) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_text(s, dst);
  pg_bind_text(s, src);
  pg_bind_int(s, run);
  return pg_exec_defer(s, Q_FORK_MOD, "copy modules (fork)");
}

int pg_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run) {
  pg *s = (pg *)st_;
  WRITE_BEGIN(s);
  pg_params_start(s);
  pg_bind_int(s, to_run);
  pg_bind_text(s, wf_id);
  pg_bind_int(s, from_run);
  return pg_exec_defer(s, Q_MOD_COPY, "copy modules");
}

/* ---- tasks ---- */
/* store_wf_view: the five reads in one pipeline, so in one snapshot (one
 * implicit transaction, or the batch's own) and one round trip. */
int pg_wf_view(store *st_, const char *id, wf_view *out, store_domain_cb cb, void *ud, chain_state *cs) {
  pg *s = (pg *)st_;
  /* the chain's columns first: the heads they name are among the rows read after */
  static const int Q[] = {Q_WF_CHAIN, Q_WF_GET, Q_HIST_LOAD_CURRENT, Q_TASK_COUNT, Q_SIG_COUNT, Q_DOM_LIST};
  static const char *what[] = {"read the workflow's chain", "get workflow", "load history",
                               "count tasks",               "count signals", "list domain events"};
  PGresult *r[6] = {0}; /* filled by the drain before this returns (a send that fails drains too) */
  int rc = STORE_OK;
  for (int i = 0; i < 6 && rc == STORE_OK; i++) {
    pg_params_start(s);
    pg_bind_text(s, id);
    if (Q[i] == Q_DOM_LIST) pg_bind_int(s, 0);
    rc = pg_pipe_send_q(s, Q[i], what[i], &r[i]);
  }
  if (rc == STORE_OK) rc = pg_pipe_drain(s, 1);
  int found = rc == STORE_OK ? PQntuples(r[1]) > 0 : -1;
  if (found == 1) {
    pg_chain_from(r[0], cs);
    pg_read_wf(r[1], 0, &out->w);
    pg_events_from(r[2], &out->h);
    /* a run begun between the row's read and the history's: its rows are not the row's run */
    if (pg_events_run(r[2]) >= 0 && pg_events_run(r[2]) != cs->run) cs->run = -1;
    out->tasks = (int)pg_col_int(r[3], 0, 0);
    out->signals = (int)pg_col_int(r[4], 0, 0);
    for (int i = 0, n = PQntuples(r[5]); i < n; i++) {
      domain_event e = {pg_col_text(r[5], i, 0), pg_col_int(r[5], i, 1), pg_col_text(r[5], i, 2),
                        pg_col_int(r[5], i, 3), pg_col_text(r[5], i, 4), pg_col_text(r[5], i, 5)};
      if (cb(ud, &e)) break;
    }
  }
  for (int i = 0; i < 6; i++) PQclear(r[i]);
  if (found != 1) store_wf_view_free(out);
  return found;
}
