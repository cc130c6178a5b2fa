/* pg_conn: the PostgreSQL store's connection plumbing (pg.c has the
 * overview): errors and their kinds, a statement's parameters, running it
 * or sending it in the pipeline and reading the answers, connecting (and
 * again after a lost connection), the worker lock, and the connections that
 * LISTEN for other processes' commits (store_commit_fd). */
#include "pg_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crash.h"
#include "util.h"

/* ---- plumbing ---- */

/* A batch's check of the worker lock in its pipeline found it not held
 * (pg_fail_res): the next batch asks with a round trip (pg_locks_held),
 * which takes it again or says who has it; 2: asks from then on. */
static int locks_doubted;

/* A round trip the connection waited for (store_round_trips): what a
 * worker across a network pays per workflow. */
void pg_waited(struct pg *s, const char *what) {
  s->round_trips++;
#ifdef ENGINE_TRACE_WAITS
  fprintf(stderr, "pg wait: %s\n", what);
#else
  (void)what;
#endif
}

/* PostgreSQL's primary message, without "ERROR:" or a trailing newline. */
void pq_reason(PGconn *c, const PGresult *r, char *out, size_t n) {
  const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
  snprintf(out, n, "%s", m ? m : c ? PQerrorMessage(c) : "out of memory");
  size_t len = strlen(out);
  while (len && (out[len - 1] == '\n' || out[len - 1] == ' ')) out[--len] = 0;
  if (!*out) snprintf(out, n, "%s", "unknown error");
}

int pg_classify_state(const char *state) {
  if (!state) return STORE_ERR;
  /* lock_not_available (lock_timeout), serialization, deadlock, statement timeout */
  if (!strcmp(state, "55P03") || !strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "57014"))
    return STORE_EBUSY;
  if (!strcmp(state, "XX001") || !strcmp(state, "XX002")) return STORE_ECORRUPT; /* data or index corrupted */
  return STORE_ERR;
}

int pg_classify(const PGresult *r) { return r ? pg_classify_state(PQresultErrorField(r, PG_DIAG_SQLSTATE)) : STORE_ERR; }

/* Inside a batch the transaction is lost with the statement: PostgreSQL
 * aborted it, and it is rolled back now so reads go on (as SQLite rolls back
 * on its own), while writes fail until store_rollback. The first error is
 * the one kept. */
int pg_fail_res(pg *s, const char *what, const PGresult *r) {
  int bind_failed = s->bind_failed;
  s->bind_failed = 0;
  if (s->failed) return STORE_ERR;
  char why[384];
  if (bind_failed)
    snprintf(why, sizeof why, "%s", s->bind_err);
  else if (!strcmp(what, LOCKS_WHAT) && r && PQresultErrorField(r, PG_DIAG_SQLSTATE) &&
           !strcmp(PQresultErrorField(r, PG_DIAG_SQLSTATE), FENCE_ABORTED)) {
    /* pg_locks_check_send's check: the next batch asks pg_locks_held */
    if (!locks_doubted) locks_doubted = 1; /* (2, asking for good, stays) */
    snprintf(why, sizeof why,
             "a lock session of this process no longer held it when the batch began (lost, or taken by another "
             "worker): the batch was refused, nothing of it written");
  } else
    pq_reason(s->conn, r, why, sizeof why);
  util_seterr(s->err, sizeof s->err, "%s: %s", what, why);
  if (s->in_txn) {
    s->failed = 1;
    pg_pipe_drain(s, 0);
    if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
  }
  return STORE_ERR;
}

static int fail(pg *s, const char *what) { return pg_fail_res(s, what, NULL); }

/* ENGINE_STORE_FAIL: this write fails as an I/O error does, and the whole
 * transaction is rolled back with it. */
int pg_injected(pg *s, const char *what) {
  if (!store_fault_hit(what)) return 0;
  if (s->failed) return 1;
  util_seterr(s->err, sizeof s->err, "%s: disk I/O error (injected by ENGINE_STORE_FAIL)", what);
  pg_pipe_drain(s, 0);
  if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
  if (s->in_txn) s->failed = 1;
  return 1;
}

void pg_params_start(pg *s) {
  for (int i = 0; i < MAXP; i++) {
    free(s->fixed[i]);
    s->fixed[i] = NULL;
  }
  s->np = 0;
  s->bind_failed = 0;
}

void pg_bind_fail(pg *s, size_t len, const char *why) {
  if (s->bind_failed) return;
  s->bind_failed = 1;
  if (s->max_length)
    snprintf(s->bind_err, sizeof s->bind_err, "cannot bind parameter %d (%zu bytes; the store takes at most %lld): %s",
             s->np + 1, len, (long long)s->max_length, why);
  else
    snprintf(s->bind_err, sizeof s->bind_err, "cannot bind parameter %d (%zu bytes): %s", s->np + 1, len, why);
}

/* Appends v to the PostgreSQL array literal being built in *buf ("{" first,
 * then "," between), quoted and escaped when quote; v NULL closes it. */
void pg_array_add(char **buf, size_t *len, size_t *cap, const char *v, int quote) {
  size_t need = *len + 2 * (v ? strlen(v) : 0) + 4;
  if (need > *cap) {
    *cap = need * 2;
    *buf = util_xrealloc(*buf, *cap);
  }
  char *o = *buf + *len;
  if (!v) {
    if (!*len) *o++ = '{';
    *o++ = '}';
    *o = 0;
    *len = (size_t)(o - *buf);
    return;
  }
  *o++ = *len ? ',' : '{';
  if (quote) *o++ = '"';
  for (; *v; v++) {
    if (quote && (*v == '"' || *v == '\\')) *o++ = '\\';
    *o++ = *v;
  }
  if (quote) *o++ = '"';
  *len = (size_t)(o - *buf);
}

/* NULL binds SQL NULL. Text goes as UTF-8, the only text PostgreSQL holds
 * (a byte sequence that is not would fail the whole batch, and every retry
 * of it): what the engine records is UTF-8 already (json.c, wfvm.c);
 * anything else (a script's path) has its invalid parts stored as U+FFFD. */
void pg_bind_text(pg *s, const char *v) {
  size_t len = v ? strlen(v) : 0, fn;
  if (s->max_length && (int64_t)len > s->max_length) pg_bind_fail(s, len, "string or blob too big");
  if (v && (s->fixed[s->np] = util_utf8_repair(v, len, &fn))) v = s->fixed[s->np];
  s->pv[s->np] = v;
  s->plen[s->np] = 0;
  s->pfmt[s->np] = 0;
  s->np++;
}

void pg_bind_blob(pg *s, const void *v, size_t n) {
  if ((s->max_length && (int64_t)n > s->max_length) || n > INT32_MAX) pg_bind_fail(s, n, "string or blob too big");
  s->pv[s->np] = v ? v : "";
  s->plen[s->np] = (int)(n > INT32_MAX ? 0 : n);
  s->pfmt[s->np] = 1;
  s->np++;
}

void pg_bind_int(pg *s, int64_t v) {
  snprintf(s->pnum[s->np], sizeof s->pnum[0], "%lld", (long long)v);
  pg_bind_text(s, s->pnum[s->np]);
}

void pg_bind_double(pg *s, double v) {
  snprintf(s->pnum[s->np], sizeof s->pnum[0], "%.17g", v);
  pg_bind_text(s, s->pnum[s->np]);
}

/* A lost connection outside a batch is opened again (its prepared statements
 * with it); inside a batch the batch is lost anyway. */
void pg_reconnect_if_lost(pg *s) {
  if (PQstatus(s->conn) != CONNECTION_BAD || s->in_txn) return;
  PQreset(s->conn);
  if (PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF) PQexitPipelineMode(s->conn);
  s->pipe = 0;
  if (PQstatus(s->conn) == CONNECTION_OK) pg_simple(s->conn, s->settings, (char[8]){0}, 8, NULL);
  memset(s->prepared, 0, sizeof s->prepared);
  memset(s->table_prepared, 0, sizeof s->table_prepared);
  if (s->owner[0] && PQstatus(s->conn) == CONNECTION_OK) pg_announce(s, s->owner);
}

/* This connection is worker owner's (LIVE): its liveness lock, and a name
 * people can read in pg_stat_activity; once, and again after a reconnection. */
void pg_announce(pg *s, const char *owner) {
  if (pg_pipe_drain(s, 1) != STORE_OK) return;
  if (owner != s->owner) snprintf(s->owner, sizeof s->owner, "%s", owner); /* again after a reconnection: the same */
  char name[96];
  snprintf(name, sizeof name, "engine worker %s", owner);
  char *lit = PQescapeLiteral(s->conn, name, strlen(name)), *olit = PQescapeLiteral(s->conn, owner, strlen(owner));
  if (lit && olit) {
    char *sql = util_fmt("SET application_name = %s; SELECT pg_try_advisory_lock(" STR(LIVE_CLASS) ", hashtext(%s))",
                         lit, olit);
    PQclear(PQexec(s->conn, sql));
    free(sql);
  }
  PQfreemem(lit);
  PQfreemem(olit);
}

/* ---- pipeline mode: a batch's writes go with its next read ---- */

/* Reading the answers of a pipeline: pg_drain_begin marks the sync point,
 * pg_drain_read reads up to it (without waiting when wait is 0: then 0 means
 * the next answer has not arrived), pg_drain_end leaves pipeline mode and
 * reports. pg_pipe_drain does all three, waiting. */
enum { DRAIN_ENTRY, DRAIN_REST, DRAIN_SYNC, DRAIN_DONE };

void pg_drain_begin(pg *s) {
  struct drain *d = &s->dr;
  d->n = s->pipe;
  s->pipe = 0;
  d->i = 0;
  d->phase = DRAIN_ENTRY;
  d->bad = NULL;
  d->what = d->n ? s->pipeq[0].what : "pipeline";
  d->lost = PQpipelineSync(s->conn) != 1;
  s->drain_state[0] = 0;
  s->drain_what = NULL;
}

int pg_drain_read(pg *s, int wait) {
  struct drain *d = &s->dr;
  if (!wait && !d->lost && !PQconsumeInput(s->conn)) d->lost = 1;
  while (!d->lost && d->phase != DRAIN_DONE) {
    if (d->phase == DRAIN_ENTRY && d->i == d->n) d->phase = DRAIN_SYNC;
    if (!wait && PQisBusy(s->conn)) return 0;
    PGresult *r = PQgetResult(s->conn);
    if (d->phase == DRAIN_SYNC) {
      d->lost = PQresultStatus(r) != PGRES_PIPELINE_SYNC;
      d->phase = DRAIN_DONE;
    } else if (d->phase == DRAIN_REST) { /* up to the NULL that ends the entry's answers */
      if (!r) d->i++, d->phase = DRAIN_ENTRY;
    } else if (!r) { /* the connection went */
      d->lost = 1;
      d->what = s->pipeq[d->i].what;
    } else {
      struct pipe_entry *q = &s->pipeq[d->i];
      ExecStatusType t = PQresultStatus(r);
      if (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) {
        if (q->keep) *q->keep = r, r = NULL;
      } else {
        if (q->prepared) *q->prepared = 0;
        if (!d->bad && t != PGRES_PIPELINE_ABORTED && !q->soft) d->bad = r, r = NULL, d->what = q->what;
      }
      d->phase = DRAIN_REST;
    }
    PQclear(r);
  }
  return 1;
}

/* STORE_OK, or the first statement that failed is the batch's error
 * (pg_fail_res, when report) and the rest did not run. */
int pg_drain_end(pg *s, int report) {
  struct drain *d = &s->dr;
  int n = d->n;
  d->n = 0;
  for (int j = d->i; j < n; j++) /* not answered: not run */
    if (s->pipeq[j].prepared) *s->pipeq[j].prepared = 0;
  if (!d->lost) PQexitPipelineMode(s->conn);
  if (!d->bad && !d->lost) return STORE_OK;
  for (int j = 0; j < n; j++)
    if (s->pipeq[j].keep && *s->pipeq[j].keep && s->pipeq[j].keep != &s->xid_res) { /* the batch's id stays: committed_anyway */
      PQclear(*s->pipeq[j].keep);
      *s->pipeq[j].keep = NULL;
    }
  const char *state = d->bad ? PQresultErrorField(d->bad, PG_DIAG_SQLSTATE) : NULL;
  snprintf(s->drain_state, sizeof s->drain_state, "%s", state ? state : "");
  s->drain_what = d->what;
  PGresult *bad = d->bad;
  d->bad = NULL;
  if (report) pg_fail_res(s, s->drain_what, bad);
  PQclear(bad);
  return STORE_ERR;
}

/* Reads the answers of everything sent (pipe_send) up to a sync point, and
 * leaves pipeline mode. */
int pg_pipe_drain(pg *s, int report) {
  if (PQpipelineStatus(s->conn) == PQ_PIPELINE_OFF) return STORE_OK;
  pg_waited(s, s->pipe ? s->pipeq[s->pipe - 1].what : "pipeline");
  pg_drain_begin(s);
  pg_drain_read(s, 1);
  return pg_drain_end(s, report);
}

/* Sends sql (prepared once as name) with the bound parameters in pipeline
 * mode, without waiting: its answer is read by pg_pipe_drain (into *keep). */
static int pipe_send_with(pg *s, const char *name, const char *sql, char *prepared, int binary, const char *what,
                          PGresult **keep, int np, const char *const *pv, const int *plen, const int *pfmt) {
  /* a lost batch's transaction is rolled back: what it sent now would run
   * outside it, each statement committed on its own */
  if (s->failed) return STORE_ERR;
  if (s->pipe + 2 > PIPE_MAX && pg_pipe_drain(s, 1) != STORE_OK) return STORE_ERR;
  if (s->pipe + 2 > s->pipe_cap) {
    s->pipe_cap = s->pipe_cap ? s->pipe_cap * 2 : 128;
    s->pipeq = util_xrealloc(s->pipeq, (size_t)s->pipe_cap * sizeof *s->pipeq);
  }
  int ok = PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF || PQenterPipelineMode(s->conn);
  if (ok && !*prepared) {
    ok = PQsendPrepare(s->conn, name, sql, 0, NULL);
    if (ok) {
      *prepared = 1;
      s->pipeq[s->pipe++] = (struct pipe_entry){what, prepared, NULL, 0};
    }
  }
  if (ok) ok = PQsendQueryPrepared(s->conn, name, np, pv, plen, pfmt, binary);
  if (ok) s->pipeq[s->pipe++] = (struct pipe_entry){what, NULL, keep, 0};
  if (ok) return STORE_OK;
  pg_pipe_drain(s, 0);
  return fail(s, what);
}

static int pipe_send(pg *s, const char *name, const char *sql, char *prepared, int binary, const char *what,
                     PGresult **keep) {
  return pipe_send_with(s, name, sql, prepared, binary, what, keep, s->np, s->pv, s->plen, s->pfmt);
}

/* Runs sql (prepared once as name; *prepared says it is) with the bound
 * parameters: the result (PGRES_COMMAND_OK or PGRES_TUPLES_OK), or NULL after
 * fail(what). With writes of the batch sent and not yet answered, it goes
 * after them, and one round trip answers them all. */
PGresult *pq_exec(pg *s, int q, const char *name, const char *sql, char *prepared, int binary, const char *what) {
  if (s->bind_failed) {
    fail(s, what);
    return NULL;
  }
  /* it sees the rows the batch wrote: those of the tables it reads go first */
  if (s->before_send && s->before_send(s, q) != STORE_OK) return NULL;
  if (s->pipe) { /* its answer lands in s->read_res (a field: the queue outlives this call's frame) */
    s->read_res = NULL;
    if (pipe_send(s, name, sql, prepared, binary, what, &s->read_res) != STORE_OK || pg_pipe_drain(s, 1) != STORE_OK)
      return NULL;
    PGresult *r = s->read_res;
    s->read_res = NULL;
    return r;
  }
  pg_reconnect_if_lost(s);
  if (!*prepared) {
    pg_waited(s, "prepare");
    PGresult *r = PQprepare(s->conn, name, sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
      pg_fail_res(s, what, r);
      PQclear(r);
      return NULL;
    }
    PQclear(r);
    *prepared = 1;
  }
  pg_waited(s, what);
  PGresult *r = PQexecPrepared(s->conn, name, s->np, s->pv, s->plen, s->pfmt, binary);
  ExecStatusType t = PQresultStatus(r);
  if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
    pg_fail_res(s, what, r);
    PQclear(r);
    return NULL;
  }
  return r;
}

/* Runs statement q (pg_sql[q]) with the bound parameters. */
PGresult *pq_run(pg *s, int q, int binary, const char *what) {
  char name[16];
  snprintf(name, sizeof name, "e%d", q);
  return pq_exec(s, q, name, pg_sql[q], &s->prepared[q], binary, what);
}

/* Sends statement q (pg_sql[q]) with the bound parameters in the pipeline. */
int pg_pipe_send_q(pg *s, int q, const char *what, PGresult **keep) {
  if (s->bind_failed) return fail(s, what);
  if (s->before_send && s->before_send(s, q) != STORE_OK) return STORE_ERR;
  char name[16];
  snprintf(name, sizeof name, "e%d", q);
  return pipe_send(s, name, pg_sql[q], &s->prepared[q], 0, what, keep);
}

/* The same with n text values of its own rather than the bound parameters
 * (which it leaves as they are: pg_rows.c sends its rows between a
 * caller's binding and its statement). */
int pg_pipe_send_values(pg *s, int q, int n, const char *const *values, const char *what) {
  char name[16];
  snprintf(name, sizeof name, "e%d", q);
  return pipe_send_with(s, name, pg_sql[q], &s->prepared[q], 0, what, NULL, n, values, NULL, NULL);
}

/* The same for a statement after the batch's COMMIT whose failure costs
 * nothing the batch wrote (the listeners' wake-up): the drain passes it by. */
int pg_pipe_send_soft(pg *s, int q, const char *what) {
  int rc = pg_pipe_send_q(s, q, what, NULL);
  if (rc == STORE_OK) s->pipeq[s->pipe - 1].soft = 1;
  return rc;
}

/* A write statement, run to completion (s->changes: the rows it changed). */
static int exec_now(pg *s, int q, const char *what) {
  if (s->failed) return STORE_ERR; /* rolled back: run now, it would commit on its own */
  PGresult *r = pq_run(s, q, 0, what);
  if (!r) return STORE_ERR;
  s->changes = atoll(PQcmdTuples(r));
  PQclear(r);
  s->writes++;
  return STORE_OK;
}

int pg_exec_write(pg *s, int q, const char *what) {
  if (pg_injected(s, what)) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  return exec_now(s, q, what);
}

/* A write of the batch whose answer no one waits for: sent at once, its
 * answer read with the batch's next read or at the commit, where an error
 * of it loses the batch (store_batch_failed says so from then on). Outside
 * a batch (migrate's copy runs in one), it runs to completion. */
int pg_exec_defer(pg *s, int q, const char *what) {
  if (pg_injected(s, what)) {
    s->bind_failed = 0;
    return STORE_ERR;
  }
  if (!s->in_txn || s->failed || s->bind_failed) return exec_now(s, q, what);
  if (pg_pipe_send_q(s, q, what, NULL) != STORE_OK) return STORE_ERR;
  s->writes++;
  return STORE_OK;
}

const char *pg_col_text(const PGresult *r, int row, int i) { return PQgetisnull(r, row, i) ? NULL : PQgetvalue(r, row, i); }

char *pg_col_dup(const PGresult *r, int row, int i) {
  const char *t = pg_col_text(r, row, i);
  return t ? util_strdup(t) : NULL;
}

int64_t pg_col_int(const PGresult *r, int row, int i) {
  return PQgetisnull(r, row, i) ? 0 : strtoll(PQgetvalue(r, row, i), NULL, 10);
}

/* *out = the first column of the first row (dflt when NULL or no row). */
int pg_query_int(pg *s, int q, int64_t dflt, int64_t *out) {
  *out = dflt;
  PGresult *r = pq_run(s, q, 0, "query");
  if (!r) return STORE_ERR;
  if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) *out = pg_col_int(r, 0, 0);
  PQclear(r);
  return STORE_OK;
}

/* The least string above every string that starts with prefix, in bytewise
 * (COLLATE "C") order of UTF-8: the prefix with its last character one code
 * point up (characters at U+10FFFF dropped first). NULL when there is none
 * ("" or only U+10FFFF), so the caller reads from the prefix on. */
char *pg_prefix_above(const char *prefix) {
  size_t n = strlen(prefix);
  char *out = util_xmalloc(n + 5);
  memcpy(out, prefix, n + 1);
  while (n > 0) {
    size_t start = n - 1;
    while (start > 0 && ((unsigned char)out[start] & 0xC0) == 0x80) start--;
    const unsigned char *p = (const unsigned char *)out + start;
    size_t len = n - start;
    uint32_t cp = len == 1   ? p[0]
                  : len == 2 ? (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F)
                  : len == 3 ? (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F)
                             : (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 |
                                   (uint32_t)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
    if (cp >= 0x10FFFF) { /* nothing above it: drop it, raise the one before */
      n = start;
      out[n] = 0;
      continue;
    }
    cp = cp + 1 == 0xD800 ? 0xE000 : cp + 1; /* surrogates are not characters */
    char *q = out + start;
    if (cp < 0x80) {
      *q++ = (char)cp;
    } else if (cp < 0x800) {
      *q++ = (char)(0xC0 | cp >> 6);
      *q++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      *q++ = (char)(0xE0 | cp >> 12);
      *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *q++ = (char)(0x80 | (cp & 0x3F));
    } else {
      *q++ = (char)(0xF0 | cp >> 18);
      *q++ = (char)(0x80 | (cp >> 12 & 0x3F));
      *q++ = (char)(0x80 | (cp >> 6 & 0x3F));
      *q++ = (char)(0x80 | (cp & 0x3F));
    }
    *q = 0;
    return out;
  }
  free(out);
  return NULL;
}

/* ---- connecting ---- */

static void ignore_notice(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

/* Connects to url: the connection, or NULL with err naming where and why
 * (host, port and database as libpq parsed them; never a password). */
PGconn *pg_connect_url(const char *url, const char *app, const char *timeout_s, char *where,
                       size_t wherelen, char *err, size_t errlen) {
  /* later keywords win: the URL's own connect_timeout, application_name or
   * TCP settings replace these defaults. A link that goes silent (cut off,
   * not closed) fails a call within about 10 s (keepalives for a wait on an
   * answer, tcp_user_timeout for unacknowledged data) instead of the
   * kernel's minutes, so the worker's loop goes on and its leases run out.
   * The server's side (options, kept across PQreset): a transaction left
   * open past a lease (its worker cut off mid-batch) is ended, with its row
   * locks and order locks, instead of being kept until TCP tells the
   * server the client is gone (two hours by default) while the others skip
   * its tasks or wait for its locks (its batch is fenced off by then
   * anyway); an idle client is probed within about 10 s. */
  const char *lm = getenv("ENGINE_LEASE_MS");
  long long lease = lm && atoll(lm) >= 100 ? atoll(lm) : 10000;
  char options[192];
  snprintf(options, sizeof options,
           "-c idle_in_transaction_session_timeout=%lld -c tcp_keepalives_idle=4 -c tcp_keepalives_interval=2 "
           "-c tcp_keepalives_count=3", lease < 1000 ? 1000 : lease);
  const char *keys[] = {"connect_timeout", "application_name", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "tcp_user_timeout", "options", "dbname", NULL};
  const char *vals[] = {timeout_s, app, "1", "4", "2", "3", "10000", options, url, NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (!c) {
    util_seterr(err, errlen, "cannot connect to PostgreSQL: out of memory");
    return NULL;
  }
  if (PQstatus(c) != CONNECTION_OK) {
    char why[384];
    pq_reason(c, NULL, why, sizeof why);
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    const char *host = NULL, *port = NULL, *db = NULL, *user = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++) {
      if (!strcmp(o->keyword, "host") && o->val) host = o->val;
      if (!strcmp(o->keyword, "port") && o->val) port = o->val;
      if (!strcmp(o->keyword, "dbname") && o->val) db = o->val;
      if (!strcmp(o->keyword, "user") && o->val) user = o->val;
    }
    util_seterr(err, errlen, "cannot connect to PostgreSQL at %s:%s, database %s%s%s: %s",
                host ? host : "localhost", port ? port : "5432", db ? db : user ? user : "(default)",
                user ? " as " : "", user ? user : "", why);
    PQconninfoFree(opts);
    PQfinish(c);
    return NULL;
  }
  snprintf(where, wherelen, "postgres://%s@%s:%s/%s", PQuser(c), PQhost(c), PQport(c), PQdb(c));
  PQsetNoticeProcessor(c, ignore_notice, NULL);
  return c;
}

/* Runs sql (no parameters) and says whether it worked; why in err. */
int pg_simple(PGconn *c, const char *sql, char *why, size_t n, int *kind) {
  PGresult *r = PQexec(c, sql);
  ExecStatusType t = PQresultStatus(r);
  int ok = t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
  if (!ok) {
    pq_reason(c, r, why, n);
    if (kind) *kind = pg_classify(r);
  }
  PQclear(r);
  return ok;
}

/* ---- the worker lock ---- */

/* Connections holding the worker lock, by the descriptor engine_lock hands
 * out (a /dev/null one, so engine_unlock's close works on it too). */
static struct {
  int fd;
  PGconn *c;
  int shared;
  char started[48]; /* its backend's start (pg_stat_activity, in µs): with its pid, that session and no later one */
  int heard;        /* the server said something on the idle session (its end's FATAL): pg_locks_held asks */
} locks[8];

/* The lock's session is idle: anything the server sends on it (the FATAL
 * of a terminated backend, read before the socket's end) is news. */
static void lock_notice(void *arg, const char *msg) {
  (void)msg;
  *(int *)arg = 1;
}

/* Notes when lock i's session began, which the batch's check compares
 * (pid numbers are reused); empty when unknown: the check then asks. */
static void lock_note_session(int i) {
  locks[i].started[0] = 0;
  /* microseconds since the epoch: a number, whatever the sessions' DateStyle or TimeZone */
  PGresult *r = PQexec(locks[i].c, "SELECT (extract(epoch FROM backend_start) * 1000000)::bigint FROM "
                                   "pg_stat_activity WHERE pid=pg_backend_pid()");
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
    snprintf(locks[i].started, sizeof locks[i].started, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
}

/* Serves share the lock: several run on one database, each workflow under
 * its lease. Anything else takes it alone: migrate, and a foreground start,
 * which runs as the one worker only when no serve runs (beside one it
 * follows its workflow as a client, which it could not if a serve took the
 * workflow over while it waits). */
static const char *lock_sql(int shared) {
  return shared ? "SELECT pg_try_advisory_lock_shared(" STR(LOCK_CLASS) ", " STR(WORKER_LOCK_KEY) ")"
                : "SELECT pg_try_advisory_lock(" STR(LOCK_CLASS) ", " STR(WORKER_LOCK_KEY) ")";
}

int store_pg_lock(const char *url, const char *mode, char *holder, size_t holderlen) {
  char where[256], app[64];
  snprintf(app, sizeof app, "engine %s (pid %d)", mode, (int)getpid());
  int shared = !strcmp(mode, "serve");
  PGconn *c = pg_connect_url(url, app, "10", where, sizeof where, holder, holderlen);
  if (!c) return -1;
  PGresult *r = PQexec(c, lock_sql(shared));
  int got = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    char why[384];
    pq_reason(c, r, why, sizeof why);
    util_seterr(holder, holderlen, "cannot take the worker lock of %s: %s", where, why);
    PQclear(r);
    PQfinish(c);
    return -1;
  }
  PQclear(r);
  if (!got) {
    /* who holds it: that session's application_name says, as the lock file does */
    r = PQexec(c, "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid=l.pid "
                  "WHERE l.locktype='advisory' AND l.granted AND l.classid=" STR(LOCK_CLASS) " AND l.objid="
                  STR(WORKER_LOCK_KEY) " AND l.database=(SELECT oid FROM pg_database WHERE datname=current_database()) "
                  "LIMIT 1");
    const char *who = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
    util_seterr(holder, holderlen, "%s", *who ? who : "another engine process");
    PQclear(r);
    PQfinish(c);
    return -1;
  }
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++)
    if (!locks[i].c) {
      int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      locks[i].fd = fd;
      locks[i].c = c;
      locks[i].shared = shared;
      locks[i].heard = 0;
      PQsetNoticeProcessor(c, lock_notice, &locks[i].heard);
      lock_note_session((int)i);
      return fd;
    }
  util_seterr(holder, holderlen, "too many worker locks held");
  PQfinish(c);
  return -1;
}

int store_pg_unlock(int fd) {
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++)
    if (locks[i].c && locks[i].fd == fd) {
      /* given up before the session ends: the server lets go of a closed
       * session's locks only once its backend has exited, a moment after
       * PQfinish returns, and a migrate right after a serve stopped must
       * find the lock free */
      if (PQstatus(locks[i].c) == CONNECTION_OK) PQclear(PQexec(locks[i].c, "SELECT pg_advisory_unlock_all()"));
      PQfinish(locks[i].c);
      locks[i].c = NULL;
      return 1;
    }
  return 0;
}

/* Whether this process still holds its worker locks, checked for every
 * batch: a lock session that the server dropped (a restart, a network cut)
 * is taken again, and when another worker took it meanwhile no batch of
 * this process may write: 0, or -1 with why. Asked of the server (a round
 * trip): a socket with nothing to read did not prove the session alive (a
 * serve beside a restarted server was seen writing next to the one that had
 * taken the lock). A batch asks in its pipeline instead (Q_LOCKS_HELD,
 * pg_locks_check_send), on its own connection; this runs when it cannot
 * (pg_locks_sendable). The window that remains, a session lost between the
 * check and the commit, is what the leases' fence closes. */
int pg_locks_held(pg *s, char *why, size_t n) {
  int retaken = 0;
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++) {
    PGconn *c = locks[i].c;
    if (!c) continue;
    PQconsumeInput(c);
    locks[i].heard = 0; /* asked now */
    pg_waited(s, "the worker lock");
    PGresult *alive =
        PQstatus(c) == CONNECTION_OK
            ? PQexec(c, "SELECT count(*) FROM pg_locks WHERE locktype='advisory' AND granted AND pid=pg_backend_pid() "
                        "AND classid=" STR(LOCK_CLASS) " AND objid=" STR(WORKER_LOCK_KEY))
            : NULL;
    int ok = PQresultStatus(alive) == PGRES_TUPLES_OK && PQntuples(alive) == 1 && atoi(PQgetvalue(alive, 0, 0)) == 1;
    PQclear(alive);
    if (ok) {
      if (!locks[i].started[0]) lock_note_session((int)i);
      continue;
    }
    PQreset(c);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, lock_sql(locks[i].shared)) : NULL;
    int got = PQresultStatus(r) == PGRES_TUPLES_OK && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    if (!got) {
      snprintf(why, n, "the worker lock's session of %s@%s:%s/%s was lost and %s", PQuser(c), PQhost(c), PQport(c),
               PQdb(c), PQstatus(c) == CONNECTION_OK ? "another worker holds the lock now" : "cannot be opened again");
      return -1;
    }
    lock_note_session((int)i); /* a new session: its own start */
    retaken = 1;
  }
  /* a batch's check that failed while every session here held the lock
   * was wrong about them: this process asks here from then on (ending the
   * doubt would fail every other batch) */
  if (locks_doubted) locks_doubted = retaken ? 0 : 2;
  return 0;
}

static int same_server(PGconn *a, PGconn *b) {
  return !strcmp(PQhost(a), PQhost(b)) && !strcmp(PQport(a), PQport(b)) && !strcmp(PQdb(a), PQdb(b)) &&
         !strcmp(PQuser(a), PQuser(b)); /* another role may not see the lock session's start */
}

/* Whether the same check can go in the batch's pipeline instead
 * (pg_locks_check_send): not for a lock session this process already knows
 * broken, one on another server or database, one whose start is not known,
 * nor after a batch's check found a lock not held (pg_locks_held asks). */
int pg_locks_sendable(pg *s) {
  if (locks_doubted) return 0;
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++) {
    PGconn *c = locks[i].c;
    if (!c) continue;
    /* what arrived is read and parsed (PQisBusy): a FATAL calls lock_notice */
    if (!PQconsumeInput(c) || (PQisBusy(c), locks[i].heard) || PQstatus(c) != CONNECTION_OK || !locks[i].started[0] ||
        !same_server(c, s->conn))
      return 0;
  }
  return 1;
}

/* The check sent in the batch's pipeline, after its BEGIN, with no round
 * trip waited for (Q_LOCKS_HELD): asked of the batch's own connection,
 * whether each lock session (its pid, and its start: pids are reused) still
 * holds the lock; when one does not, the statement fails (LOCKS_WHAT,
 * pg_fail_res), so the transaction is aborted and its COMMIT does not
 * commit: nothing of the batch is written, as when pg_locks_held refused it
 * before its BEGIN. ENGINE_STORE_FAIL=workerlock:N makes the Nth check ask
 * for a session that holds nothing (pid 0). */
int pg_locks_check_send(pg *s) {
  /* array literals of at most 8 pids and starts (numbers, µs) */
  char pids[8 * 16 + 4] = "{", starts[8 * 56 + 4] = "{";
  int n = 0;
  for (size_t i = 0; i < sizeof locks / sizeof *locks; i++) {
    if (!locks[i].c) continue;
    int pid = fault_point("workerlock") ? 0 : PQbackendPID(locks[i].c); /* not a write: the write:N count stays */
    size_t pl = strlen(pids), sl = strlen(starts);
    snprintf(pids + pl, sizeof pids - pl, "%s%d", n ? "," : "", pid);
    snprintf(starts + sl, sizeof starts - sl, "%s%s", n ? "," : "", locks[i].started);
    n++;
  }
  if (!n) return STORE_OK;
  strcat(pids, "}");
  strcat(starts, "}");
  pg_params_start(s);
  pg_bind_text(s, pids);
  pg_bind_text(s, starts);
  pg_bind_int(s, n);
  return pg_pipe_send_q(s, Q_LOCKS_HELD, LOCKS_WHAT, NULL); /* the parameters are copied into the request */
}

/* ---- LISTEN: other processes' commits (store_commit_fd) ---- */

static int listener_of(pg *s, int fd) {
  for (int i = 0; i < 4; i++)
    if (s->listen[i] && s->listen_fd[i] == fd) return i;
  return -1;
}

/* A connection of its own that listens for every commit of the database. */
int pg_commit_fd(store *st_, int old) {
  pg *s = (pg *)st_;
  int i = old >= 0 ? listener_of(s, old) : -1;
  if (i >= 0) {
    PQfinish(s->listen[i]);
    s->listen[i] = NULL;
  } else {
    for (i = 0; i < 4 && s->listen[i]; i++) {
    }
    if (i == 4) return -1;
  }
  char where[256], err[384];
  PGconn *c = pg_connect_url(s->path, "engine (listening)", "10", where, sizeof where, err, sizeof err);
  if (!c) return -1;
  PGresult *r = PQexec(c, "LISTEN engine_commits");
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK && PQsetnonblocking(c, 1) == 0;
  PQclear(r);
  if (!ok) {
    PQfinish(c);
    return -1;
  }
  s->listen[i] = c;
  return s->listen_fd[i] = PQsocket(c);
}

int pg_commit_drain(store *st_, int fd) {
  pg *s = (pg *)st_;
  int i = listener_of(s, fd);
  /* a lost one is closed by the next store_commit_fd, once nothing polls it */
  if (i < 0 || !PQconsumeInput(s->listen[i]) || PQstatus(s->listen[i]) != CONNECTION_OK) return -1;
  int heard = 0, own = PQbackendPID(s->conn); /* the batches' connection sends this store's own */
  for (PGnotify *n; (n = PQnotifies(s->listen[i])) != NULL; PQfreemem(n))
    if (n->be_pid != own) heard = 1;
  return heard;
}
