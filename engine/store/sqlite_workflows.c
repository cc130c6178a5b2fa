/* sqlite_workflows: the SQLite store's statements of workflows, their
 * history, code and pinned modules. sqlite.c has the overview. */
#include "sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- workflows ---- */

int sq_wf_insert(store *st_, const wf_row *w) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_INSERT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, w->id);
  sq_bind_int(s, st, 2, w->run);
  sq_bind_text(s, st, 3, w->status);
  sq_bind_text(s, st, 4, w->script_name);
  sq_bind_text(s, st, 5, w->script_dir);
  sq_bind_text(s, st, 6, w->code_hash);
  sq_bind_text(s, st, 7, w->input);
  sq_bind_text(s, st, 8, w->result);
  sq_bind_text(s, st, 9, w->error);
  sq_bind_int(s, st, 10, w->cancel);
  sq_bind_int(s, st, 11, w->created_at);
  sq_bind_int(s, st, 12, w->updated_at);
  sq_bind_text(s, st, 13, w->parent);
  sq_bind_text(s, st, 14, w->parent_close);
  sq_bind_text(s, st, 15, w->forked_from);
  return sq_exec_write(s, st, "insert workflow");
}

static void read_wf(sqlite3_stmt *st, wf_row *w) {
  w->id = sq_col_dup(st, 0);
  w->run = sqlite3_column_int64(st, 1);
  w->status = sq_col_dup(st, 2);
  w->script_name = sq_col_dup(st, 3);
  w->script_dir = sq_col_dup(st, 4);
  w->code_hash = sq_col_dup(st, 5);
  w->input = sq_col_dup(st, 6);
  w->result = sq_col_dup(st, 7);
  w->error = sq_col_dup(st, 8);
  w->cancel = sqlite3_column_int(st, 9);
  w->created_at = sqlite3_column_int64(st, 10);
  w->updated_at = sqlite3_column_int64(st, 11);
  w->parent = sq_col_dup(st, 12);
  w->parent_close = sq_col_dup(st, 13);
  w->forked_from = sq_col_dup(st, 14);
}

int sq_wf_get(store *st_, const char *id, wf_row *out) {
  sq *s = (sq *)st_;
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, id);
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    read_wf(st, out);
    sqlite3_reset(st);
    return 1;
  }
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return 0;
  return sq_fail(s, "get workflow");
}

int sq_wf_set_status(store *st_, const char *id, const char *status, const char *result, const char *error) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_STATUS);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, status);
  sq_bind_text(s, st, 2, result);
  sq_bind_text(s, st, 3, error);
  sq_bind_int(s, st, 4, util_now_ms());
  sq_bind_text(s, st, 5, id);
  return sq_exec_write(s, st, "set workflow status");
}

int sq_wf_set_cancel(store *st_, const char *id, int cancel) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_CANCEL);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, cancel);
  sq_bind_int(s, st, 2, util_now_ms());
  sq_bind_text(s, st, 3, id);
  return sq_exec_write(s, st, "set cancel");
}

int sq_wf_set_code(store *st_, const char *id, const char *code_hash, const char *script_name,
                   const char *script_dir) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_CODE);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, code_hash);
  sq_bind_text(s, st, 2, script_name);
  sq_bind_text(s, st, 3, script_dir);
  sq_bind_int(s, st, 4, util_now_ms());
  sq_bind_text(s, st, 5, id);
  return sq_exec_write(s, st, "set code");
}

int sq_wf_new_run(store *st_, const char *id, int64_t run, const char *input) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_NEWRUN);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, run);
  sq_bind_text(s, st, 2, input);
  sq_bind_int(s, st, 3, util_now_ms());
  sq_bind_text(s, st, 4, id);
  return sq_exec_write(s, st, "new run");
}

/* Runs the bound workflow query st, each row to cb (nonzero stops). */
static int each_wf(sq *s, sqlite3_stmt *st, store_wf_cb cb, void *ud) {
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    wf_row w;
    read_wf(st, &w);
    int stop = cb(ud, &w);
    wf_row_free(&w);
    if (stop) break;
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail(s, "list workflows");
}

int sq_wf_page(store *st_, const char *status, const char *script, int64_t after_created, const char *after_id,
               int newest_first, int limit, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, newest_first ? Q_WF_PAGE_DESC : Q_WF_PAGE);
  if (!st) return STORE_ERR;
  if (status) sq_bind_text(s, st, 1, status);
  if (script) sq_bind_text(s, st, 2, script);
  sq_bind_int(s, st, 3, after_created);
  sq_bind_text(s, st, 4, after_id ? after_id : "");
  sq_bind_int(s, st, 5, limit);
  return each_wf(s, st, cb, ud);
}

int sq_wf_list(store *st_, const char *status, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, status ? Q_WF_LIST_STATUS : Q_WF_LIST);
  if (!st) return STORE_ERR;
  if (status) sq_bind_text(s, st, 1, status);
  return each_wf(s, st, cb, ud);
}

int sq_wf_ids(store *st_, const char *prefix, const char *statuses, int limit, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_IDS);
  if (!st) return STORE_ERR;
  char *above = util_fmt("%s\xff", prefix), *among = statuses ? util_fmt(",%s,", statuses) : NULL;
  sq_bind_text(s, st, 1, prefix);
  sq_bind_text(s, st, 2, above);
  sq_bind_text(s, st, 3, among);
  sq_bind_int(s, st, 4, limit);
  free(above); /* bound as copies */
  free(among);
  return each_wf(s, st, cb, ud);
}

int sq_wf_children(store *st_, const char *parent, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_CHILDREN);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, parent);
  return each_wf(s, st, cb, ud);
}

int sq_wf_forks(store *st_, const char *source, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_FORKS);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, source);
  return each_wf(s, st, cb, ud);
}

int sq_wf_subtree(store *st_, const char *root, int64_t depth, int64_t limit, store_wf_cb cb, void *ud) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_SUBTREE);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, root);
  sq_bind_int(s, st, 2, depth);
  sq_bind_int(s, st, 3, limit);
  return each_wf(s, st, cb, ud);
}

int64_t sq_wf_depth(store *st_, const char *id, int64_t cap) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_DEPTH);
  if (!st) return -1;
  sq_bind_text(s, st, 1, id);
  sq_bind_int(s, st, 2, cap);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

int64_t sq_wf_children_running(store *st_, const char *parent) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_WF_CHILDREN_RUNNING);
  if (!st) return -1;
  sq_bind_text(s, st, 1, parent);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

/* ---- history ---- */

int sq_hist_append(store *st_, const char *wf_id, int64_t run, const hist_event *e) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_APPEND);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_int(s, st, 3, e->seq);
  sq_bind_text(s, st, 4, e->type);
  sq_bind_int(s, st, 5, e->ref);
  sq_bind_text(s, st, 6, e->name);
  sq_bind_text(s, st, 7, e->hash);
  sq_bind_text(s, st, 8, e->payload);
  sq_bind_int(s, st, 9, e->time);
  sq_bind_text(s, st, 10, e->chain);
  return sq_exec_write(s, st, "append history");
}

/* ---- a workflow's hash chains: where they start (its row) and their heads (chain_heads) ---- */

int sq_chain_get(store *st_, const char *wf_id, chain_state *cs) {
  sq *s = (sq *)st_;
  memset(cs, 0, sizeof *cs);
  sqlite3_stmt *st = sq_stmt(s, Q_WF_CHAIN);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    cs->found = 1;
    cs->run = sqlite3_column_int64(st, 0);
    snprintf(cs->hist_head, sizeof cs->hist_head, "%s", sq_col_text(st, 1) ? sq_col_text(st, 1) : "");
    cs->hist_seq = sqlite3_column_int64(st, 2);
    snprintf(cs->hist_base, sizeof cs->hist_base, "%s", sq_col_text(st, 3) ? sq_col_text(st, 3) : "");
    cs->hist_from_run = sqlite3_column_int64(st, 4);
    cs->hist_from_seq = sqlite3_column_int64(st, 5);
    snprintf(cs->dom_head, sizeof cs->dom_head, "%s", sq_col_text(st, 6) ? sq_col_text(st, 6) : "");
    cs->dom_seq = sqlite3_column_int64(st, 7);
    cs->dom_from = sqlite3_column_int64(st, 8);
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK : sq_fail_read(s, "read the workflow's chain");
}

/* A head row and the events it is checked against read in one snapshot, so
 * an event past the head is damage (a WAL cut or damaged after part of it
 * was copied into the database leaves newer pages beside older ones), not
 * one appended between two reads. Inside an open transaction (the worker's
 * batch) every read is of one snapshot already. */
int sq_read_begin(store *st_, int *began) {
  sq *s = (sq *)st_;
  *began = 0;
  if (!sqlite3_get_autocommit(s->db)) return STORE_OK;
  if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return sq_fail_read(s, "begin a read");
  *began = 1;
  return STORE_OK;
}

void sq_read_end(store *st_, int began) {
  sq *s = (sq *)st_;
  if (began && !sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
}

static int read_events(sq *s, sqlite3_stmt *st, hist_list *out) {
  int rc;
  while ((rc = sq_step(s, st)) == SQLITE_ROW) {
    if (out->n == out->cap) {
      out->cap = out->cap ? out->cap * 2 : 16;
      out->v = util_xrealloc(out->v, out->cap * sizeof(hist_event));
    }
    hist_event *e = &out->v[out->n++];
    e->seq = sqlite3_column_int64(st, 0);
    e->type = sq_col_dup(st, 1);
    e->ref = sqlite3_column_int64(st, 2);
    e->name = sq_col_dup(st, 3);
    e->hash = sq_col_dup(st, 4);
    e->payload = sq_col_dup(st, 5);
    e->time = sqlite3_column_int64(st, 6);
    e->chain = sq_col_dup(st, 7);
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? STORE_OK : sq_fail_read(s, "load history");
}

/* The rows as they are (store.c checks them), after the chain's columns
 * when cs: read first, so the head they name is among the rows. */
int sq_hist_load(store *st_, const char *wf_id, int64_t run, hist_list *out, chain_state *cs) {
  sq *s = (sq *)st_;
  int rc = cs ? sq_chain_get(st_, wf_id, cs) : STORE_OK;
  if (rc != STORE_OK) return rc;
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_LOAD);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  return read_events(s, st, out);
}

int sq_hist_range(store *st_, const char *wf_id, int64_t run, int64_t from_seq, int64_t to_seq, hist_list *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_RANGE);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_int(s, st, 3, from_seq);
  sq_bind_int(s, st, 4, to_seq);
  return read_events(s, st, out);
}

int sq_hist_get(store *st_, const char *wf_id, int64_t run, int64_t seq, hist_list *out) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_GET);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_int(s, st, 3, seq);
  size_t before = out->n;
  if (read_events(s, st, out) != STORE_OK) return STORE_ERR;
  return out->n > before;
}

int64_t sq_hist_max_seq(store *st_, const char *wf_id, int64_t run) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_MAX);
  if (!st) return -1;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  int64_t v;
  return sq_query_int(s, st, 0, &v) == STORE_OK ? v : -1;
}

int sq_hist_outcome(store *st_, const char *wf_id, int64_t run, int64_t seq) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_HIST_OUTCOME);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_int(s, st, 3, seq);
  sq_bind_int(s, st, 4, seq);
  int64_t v;
  if (sq_query_int(s, st, 0, &v) != STORE_OK) return STORE_ERR;
  return v != 0;
}

/* ---- code ---- */

int sq_code_put(store *st_, const char *hash, const char *name, const char *src, size_t len) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_CODE_PUT);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, hash);
  sq_bind_text(s, st, 2, name);
  sq_bind_blob(s, st, 3, src, len);
  return sq_exec_write(s, st, "store code");
}

char *sq_code_get(store *st_, const char *hash, size_t *len) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_CODE_GET);
  if (!st) return NULL;
  sq_bind_text(s, st, 1, hash);
  char *out = NULL;
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) {
    int n = sqlite3_column_bytes(st, 0);
    out = util_xmalloc((size_t)n + 1);
    if (n > 0) memcpy(out, sqlite3_column_blob(st, 0), (size_t)n);
    out[n] = 0;
    if (len) *len = (size_t)n;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) sq_fail(s, "get code");
  return out;
}

int sq_module_pin(store *st_, const char *wf_id, int64_t run, const char *module, const char *hash) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_MOD_PIN);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_text(s, st, 3, module);
  sq_bind_text(s, st, 4, hash);
  return sq_exec_write(s, st, "pin module");
}

char *sq_module_get(store *st_, const char *wf_id, int64_t run, const char *module) {
  sq *s = (sq *)st_;
  sqlite3_stmt *st = sq_stmt(s, Q_MOD_GET);
  if (!st) return NULL;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  sq_bind_text(s, st, 3, module);
  char *out = NULL;
  int rc = sq_step(s, st);
  if (rc == SQLITE_ROW) out = sq_col_dup(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) sq_fail(s, "get module");
  return out;
}

int sq_modules_clear(store *st_, const char *wf_id, int64_t run) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_MOD_CLEAR);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, wf_id);
  sq_bind_int(s, st, 2, run);
  return sq_exec_write(s, st, "clear modules");
}

/* ---- forks ---- */

/* A fork's pinned modules: those of src's run, as dst's (its history and
 * domain events are appended one by one, store_fork_copy: their links are
 * the fork's own). */
int sq_fork_modules(store *st_, const char *src, int64_t run, const char *dst) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_FORK_MOD);
  if (!st) return STORE_ERR;
  sq_bind_text(s, st, 1, dst);
  sq_bind_text(s, st, 2, src);
  sq_bind_int(s, st, 3, run);
  return sq_exec_write(s, st, "copy modules (fork)");
}

int sq_modules_copy(store *st_, const char *wf_id, int64_t from_run, int64_t to_run) {
  sq *s = (sq *)st_;
  WRITE_BEGIN(s);
  sqlite3_stmt *st = sq_stmt(s, Q_MOD_COPY);
  if (!st) return STORE_ERR;
  sq_bind_int(s, st, 1, to_run);
  sq_bind_text(s, st, 2, wf_id);
  sq_bind_int(s, st, 3, from_run);
  return sq_exec_write(s, st, "copy modules");
}
