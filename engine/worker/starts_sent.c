/* starts_sent: starts the loop does not wait for (engine_start_sent, the
 * API's POST /v1/workflows on PostgreSQL). Each start is one insert that
 * writes the workflow, its first event and task, or finds the id's row.
 *
 * They go on connections of their own, the start lane: a start is a
 * client's write like `engine start`'s, which whichever worker is free runs
 * once it is committed, so it need not wait for the worker's batch. The
 * starts that arrived in a loop iteration go as one transaction, sent
 * without waiting (BEGIN, the inserts, COMMIT in one pipeline) on a
 * connection with no commit on its way, and answered on its socket's
 * readiness; when every connection has one on its way (up to LANE_CONNS,
 * opened as needed), they wait for the first answer. So a start's answer
 * takes a round trip or two, not the worker's cycle of dispatches and
 * commits. Nothing on the lane is waited for on the loop (but the opening
 * of a connection).
 *
 * Without a lane of its own (no connection can be opened), a start goes
 * into the worker's batch and is told after that batch's commit. */
#include "worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

typedef struct sent_start {
  engine *e;
  store *st; /* the connection it was sent on: the lane's or the worker's */
  char *id, *path, *input;
  trace_start trace;
  int traced, tries;
  store_start *t; /* the insert's answer to come */
  made_wf made;   /* the row and first event as sent */
  wf_row found;   /* an id made before the id check: found without a start sent */
  int have_found;
  engine_started_fn cb;
  void *ud;
} sent_start;

/* A connection of the lane: the starts in the commit on its way. */
typedef struct lane_conn {
  engine *e;
  store *st;
  sent_start **sent;
  size_t nsent;
  answer_wait *wait; /* the commit on its way, NULL when idle */
} lane_conn;

/* The lane: its connections, opened as they are needed (the first at the
 * first start, another when starts wait and every one has a commit on its
 * way, up to LANE_CONNS), and the starts waiting for one. */
#define LANE_CONNS 3
struct start_lane {
  engine *e;
  lane_conn conn[LANE_CONNS];
  int nconn, most; /* open, and how many it may open */
  sent_start **queued;
  size_t nqueued, capqueued;
  int broken; /* no connection could be opened: starts go into the worker's batch */
};

static void sent_clear(sent_start *s) {
  if (s->t) store_start_free(s->st, s->t);
  s->t = NULL;
  wf_row_free(&s->made.w);
  hist_list_free(&s->made.h);
  memset(&s->made, 0, sizeof s->made);
  if (s->have_found) wf_row_free(&s->found);
  s->have_found = 0;
}

static void sent_free(sent_start *s) {
  sent_clear(s);
  free(s->id);
  free(s->path);
  free(s->input);
  free(s);
}

/* Writes the start into st's open batch (its answer comes with the commit). */
static int send_start(sent_start *s, store *st, char *err, size_t errlen) {
  engine *e = s->e;
  const scriptbuf *pre = run_script(e, s->path, err, errlen);
  if (!pre) return -1;
  int existed = 0;
  s->st = st;
  if (ops_send_workflow(st, s->id, s->path, s->input, pre, s->traced ? &s->trace : NULL, &existed, &s->found,
                        &s->made, &s->t, err, errlen) != 0)
    return -1;
  s->have_found = existed;
  return 0;
}

static void lane_queue(struct start_lane *l, sent_start *s) {
  if (l->nqueued == l->capqueued) {
    l->capqueued = l->capqueued ? l->capqueued * 2 : 32;
    l->queued = util_xrealloc(l->queued, l->capqueued * sizeof *l->queued);
  }
  l->queued[l->nqueued++] = s;
}

static void start_answered(sent_start *s, int ok);
static void on_worker_commit(void *ud, int ok) { start_answered(ud, ok); }

/* A start whose commit was answered (ok: it committed): its caller is told,
 * or it goes again (three sends at most) when that commit failed, or when
 * another connection's start of its id committed while it ran (it found
 * neither its row nor the other's). */
static void start_answered(sent_start *s, int ok) {
  engine *e = s->e;
  if (!ok && ++s->tries < 3 && e->lane && !e->lane->broken) {
    /* not committed (a connection the server ended, a conflict): once more,
     * on a connection opened again. A start is an insert or a find of its
     * id, so one that did commit unseen is found (200), never made twice */
    sent_clear(s);
    return lane_queue(e->lane, s);
  }
  if (!ok) {
    s->cb(s->ud, -1, NULL, store_errmsg(s->st));
    sent_free(s);
    return;
  }
  wf_row w = {0};
  int rc = 0;
  if (s->have_found) {
    w = s->found;
    s->have_found = 0;
  } else {
    rc = store_start_result(s->st, s->t, &w);
  }
  if (rc == 2 && ++s->tries < 3) { /* again, in the next commit */
    sent_clear(s);
    if (e->lane && !e->lane->broken) return lane_queue(e->lane, s);
    char err[512];
    if (send_start(s, e->st, err, sizeof err) == 0) return engine_when_committed(e, on_worker_commit, s);
    s->cb(s->ud, -1, NULL, err);
    sent_free(s);
    return;
  }
  if (rc == 1) {
    tasks_arm(e, util_now_ms()); /* its task is due: a dispatch runs it (or another worker's) */
    s->cb(s->ud, 1, &s->made.w, NULL);
  } else if (rc == 0) {
    s->cb(s->ud, 0, &w, NULL);
  } else {
    s->cb(s->ud, -1, NULL, rc == 2 ? "another start of that id was committed meanwhile, three times; retry"
                                    : "the start was sent but its answer did not come; retry");
  }
  wf_row_free(&w);
  sent_free(s);
}

/* A commit of the lane was answered (rc): every start in it is told. */
static void conn_answered(engine *e, lane_conn *c, int rc) {
  c->wait = NULL;
  sent_start **sent = c->sent;
  size_t n = c->nsent;
  c->sent = NULL;
  c->nsent = 0;
  if (rc != STORE_OK) log_msg(LOGL_WARNING, "%zu start%s not committed: %s", n, n == 1 ? "" : "s", store_errmsg(c->st));
  if (e->cfg.on_starts_commit) e->cfg.on_starts_commit(e->cfg.ud, n, rc == STORE_OK);
  for (size_t i = 0; i < n; i++) start_answered(sent[i], rc == STORE_OK);
  free(sent);
  starts_flush(e); /* what waited for a free connection */
}

static void on_conn_answer(void *ud, int rc) {
  lane_conn *c = ud;
  conn_answered(c->e, c, rc);
}

/* A connection with no commit on its way, opening one more when every
 * one has (up to LANE_CONNS; after an open that failed, no more: a server
 * at its max_connections is not asked again at every loop iteration);
 * NULL when none is free. */
static lane_conn *idle_conn(struct start_lane *l) {
  for (int i = 0; i < l->nconn; i++)
    if (!l->conn[i].wait) return &l->conn[i];
  if (l->nconn == l->most) return NULL;
  char err[512];
  lane_conn *c = &l->conn[l->nconn];
  char who[96]; /* pg_stat_activity tells them from the worker's and the API's */
  snprintf(who, sizeof who, "engine starts %s", l->e->owner);
  if (store_open_as(l->e->cfg.db_path, 1, who, &c->st, err, sizeof err) != STORE_OK) {
    log_msg(LOGL_WARNING, "%s: cannot open a connection for starts (%s)",
            l->nconn ? "starts wait for the lane's other connections" : "starts go with the worker's batch", err);
    l->most = l->nconn;
    if (!l->nconn) l->broken = 1;
    return NULL;
  }
  c->e = l->e;
  l->nconn++;
  return c;
}

/* At the end of a loop iteration (the prepare handle, with the worker's
 * commit): the queued starts go as one transaction on a connection with no
 * commit on its way (they wait for one when none is free). */
void starts_flush(engine *e) {
  struct start_lane *l = e->lane;
  if (!l || l->broken || !l->nqueued) return;
  lane_conn *c = idle_conn(l);
  if (!c) return; /* they go when a commit on its way is answered */
  sent_start **q = l->queued;
  size_t n = l->nqueued;
  l->queued = NULL;
  l->nqueued = l->capqueued = 0;
  c->sent = util_xcalloc(n, sizeof *c->sent);
  for (size_t i = 0; i < n; i++) {
    char err[1024];
    if (send_start(q[i], c->st, err, sizeof err) == 0) {
      c->sent[c->nsent++] = q[i];
    } else {
      q[i]->cb(q[i]->ud, -1, NULL, err);
      sent_free(q[i]);
    }
  }
  free(q);
  if (!c->nsent) {
    store_rollback(c->st); /* what a failed send began */
    free(c->sent);
    c->sent = NULL;
    return;
  }
  int rc = store_commit_start(c->st);
  if (rc != STORE_PENDING) return conn_answered(e, c, rc);
  if (!(c->wait = answer_wait_start(&e->loop, c->st, on_conn_answer, c))) /* cannot wait on it: wait here */
    conn_answered(e, c, store_commit_wait(c->st));
}

/* The lane (NULL on a store that cannot send starts, or when no connection
 * of its own could be opened). */
static struct start_lane *lane_of(engine *e) {
  if (e->lane) return e->lane->broken ? NULL : e->lane;
  e->lane = util_xcalloc(1, sizeof *e->lane);
  e->lane->e = e;
  e->lane->most = LANE_CONNS;
  if (!store_can_send_starts(e->st) || !idle_conn(e->lane)) {
    e->lane->broken = 1;
    return NULL;
  }
  return e->lane;
}

int engine_start_sent(engine *e, const char *id, const char *script_path, const char *input_json,
                      const trace_start *trace, engine_started_fn cb, void *ud, char *err, size_t errlen) {
  sent_start *s = util_xcalloc(1, sizeof *s);
  s->e = e;
  s->id = util_strdup(id);
  s->path = util_strdup(script_path);
  s->input = util_strdup(input_json);
  if (trace) s->trace = *trace, s->traced = 1;
  s->cb = cb;
  s->ud = ud;
  /* what can be refused at once is (an id the engine does not take, an
   * unreadable script): the rest is the insert's */
  if (engine_check_id(id, err, errlen) != 0 || !run_script(e, script_path, err, errlen)) {
    sent_free(s);
    return -1;
  }
  struct start_lane *l = lane_of(e);
  if (l) {
    lane_queue(l, s);
    return 0;
  }
  if (send_start(s, e->st, err, errlen) != 0) {
    sent_free(s);
    return -1;
  }
  engine_when_committed(e, on_worker_commit, s);
  return 0;
}

/* At engine_free: the lane's commits on their way are answered and no one
 * is told any more (as the worker's batch_abandon); its connections close. */
void starts_free(engine *e) {
  struct start_lane *l = e->lane;
  if (!l) return;
  for (int i = 0; i < l->nconn; i++) {
    lane_conn *c = &l->conn[i];
    if (c->wait) {
      store_commit_wait(c->st);
      answer_wait_end(c->wait);
    }
    for (size_t k = 0; k < c->nsent; k++) sent_free(c->sent[k]);
    free(c->sent);
    store_close(c->st);
  }
  for (size_t i = 0; i < l->nqueued; i++) sent_free(l->queued[i]);
  free(l->queued);
  free(l);
  e->lane = NULL;
}
