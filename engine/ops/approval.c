/* approval: which approval request a session waits on, and answering it (see
 * approval.h). The workflow side of the protocol is workflows/agent_session.lua. */
#include "approval.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workflow_ops.h"
#include "json.h"
#include "util.h"

#define SIGNAL_PREFIX "approval:"

const char *approval_request_of(const char *signal_name) {
  size_t n = strlen(SIGNAL_PREFIX);
  return signal_name && strncmp(signal_name, SIGNAL_PREFIX, n) == 0 ? signal_name + n : NULL;
}

static int store_failed(store *st, char *err, size_t errlen) {
  util_seterr(err, errlen, "%s", store_errmsg(st));
  return -1;
}

/* ------------------------------------------- what the request is about --- */

typedef struct describe_ctx {
  lua_State *L;
  approval_request *r;
} describe_ctx;

static void copy_string_field(lua_State *L, const char *k, char *out, size_t n) {
  if (lua_getfield(L, -1, k) == LUA_TSTRING) snprintf(out, n, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
}

/* The session's approval.requested event for r's id (payloads decoded, never
 * scanned: a tool's arguments may hold any key). */
static int on_event(void *ud, const domain_event *e) {
  describe_ctx *d = ud;
  if (strcmp(e->type, "approval.requested") != 0 || !e->payload) return 0;
  lua_State *L = d->L;
  lua_settop(L, 0);
  char err[8];
  if (json_decode_safe(L, e->payload, strlen(e->payload), err, sizeof err) != 0 || !lua_istable(L, -1)) return 0;
  int same = lua_getfield(L, -1, "request_id") == LUA_TSTRING && strcmp(lua_tostring(L, -1), d->r->request_id) == 0;
  lua_pop(L, 1);
  if (same) {
    copy_string_field(L, "tool", d->r->tool, sizeof d->r->tool);
    copy_string_field(L, "kind", d->r->kind, sizeof d->r->kind);
    d->r->since = e->time;
    d->r->event_seq = e->seq;
  }
  return 0;
}

/* Returns 0, or -1 with err set. */
static int describe(store *st, const char *id, approval_request *r, char *err, size_t errlen) {
  describe_ctx d = {luaL_newstate(), r};
  if (!d.L) {
    util_seterr(err, errlen, "reading approval request %s: out of memory", r->request_id);
    return -1;
  }
  int rc = store_domain_list(st, id, 0, on_event, &d);
  lua_close(d.L);
  return rc == STORE_OK ? 0 : store_failed(st, err, errlen);
}

/* ---------------------------------------------------------- pending --- */

/* Every request the workflow's current run waits on: its waits for
 * approval:RID with no outcome in the log, oldest first (a session asks for
 * several at once when a turn has several calls that need one). cb returning
 * nonzero stops. Returns 0, or -1 with err. */
static int each_pending(store *st, const wf_row *w, int (*cb)(void *ud, const approval_request *r), void *ud,
                        char *err, size_t errlen) {
  hist_list h = {0};
  if (store_hist_load(st, w->id, w->run, &h) != STORE_OK) return store_failed(st, err, errlen);
  int rc = 0;
  for (size_t i = 0; i < h.n && rc == 0; i++) {
    const hist_event *ev = &h.v[i];
    const char *rid = strcmp(ev->type, "SignalWaitStarted") == 0 ? approval_request_of(ev->name) : NULL;
    if (!rid) continue;
    int answered = 0;
    for (size_t k = i + 1; k < h.n && !answered; k++) answered = h.v[k].ref == ev->seq;
    if (answered) continue;
    if (strlen(rid) >= sizeof ((approval_request *)0)->request_id) {
      util_seterr(err, errlen, "workflow '%s' waits on an approval request whose id is longer than %zu bytes", w->id,
                  sizeof ((approval_request *)0)->request_id - 1);
      rc = -1;
      break;
    }
    approval_request r;
    memset(&r, 0, sizeof r);
    snprintf(r.request_id, sizeof r.request_id, "%s", rid);
    r.deadline = json_int_field(ev->payload, "deadline", -1);
    if (describe(st, w->id, &r, err, errlen) != 0) rc = -1;
    else if (cb(ud, &r)) rc = 1;
  }
  hist_list_free(&h);
  return rc < 0 ? -1 : 0;
}

typedef struct pick_ctx {
  const char *named;
  approval_request *out;
  int count, found;
} pick_ctx;

static int pick(void *ud, const approval_request *r) {
  pick_ctx *p = ud;
  p->count++;
  if (!p->found && (!p->named || strcmp(p->named, r->request_id) == 0)) {
    *p->out = *r;
    p->found = 1;
  }
  return 0;
}

/* The pending request named (or, named NULL, the oldest) in *out, and how
 * many are pending in *count: 1 when out is filled, 0 when not, -1 with err. */
static int find_pending_named(store *st, const wf_row *w, const char *named, approval_request *out, int *count,
                              char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->deadline = -1;
  pick_ctx p = {named, out, 0, 0};
  int rc = each_pending(st, w, pick, &p, err, errlen);
  *count = p.count;
  return rc < 0 ? -1 : p.found;
}

static int find_pending(store *st, const wf_row *w, approval_request *out, char *err, size_t errlen) {
  int count;
  return find_pending_named(st, w, NULL, out, &count, err, errlen);
}

int approval_each_pending(store *st, const char *id, int (*cb)(void *ud, const approval_request *r), void *ud,
                          char *err, size_t errlen) {
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found < 0) return store_failed(st, err, errlen);
  if (found == 0) {
    engine_unknown_id(id, err, errlen);
    return -1;
  }
  int rc = engine_status_terminal(w.status) ? 0 : each_pending(st, &w, cb, ud, err, errlen);
  wf_row_free(&w);
  return rc;
}

int approval_pending(store *st, const char *id, approval_request *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->deadline = -1;
  pick_ctx p = {NULL, out, 0, 0};
  return approval_each_pending(st, id, pick, &p, err, errlen) != 0 ? -1 : p.found;
}

/* ----------------------------------------------------------- answer --- */

/* Writes the answer as the signal approval:RID, unless one is buffered already. */
static int deliver(store *st, const char *id, const approval_request *p, const approval_decision *a, char *err,
                   size_t errlen) {
  char *name = util_fmt(SIGNAL_PREFIX "%s", p->request_id);
  int taken = store_signal_has(st, id, name);
  int rc = -1;
  if (taken < 0) {
    store_failed(st, err, errlen);
  } else if (taken == 1) {
    util_seterr(err, errlen, "request '%s' of %s is already answered (the worker has not taken the answer yet)",
                p->request_id, id);
  } else {
    /* keys in canonical order: the log holds canonical JSON */
    char *qa = json_quote(a->approver ? a->approver : ""), *qr = json_quote(a->reason ? a->reason : ""),
         *qi = json_quote(p->request_id);
    char *payload = util_fmt("{\"approved\":%s,\"approver\":%s,\"reason\":%s,\"request_id\":%s}",
                             a->approved ? "true" : "false", qa, qr, qi);
    int64_t now = util_now_ms();
    if (store_signal_put(st, id, name, payload, now) != STORE_OK ||
        store_task_put(st, id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK)
      store_failed(st, err, errlen);
    else
      rc = 0;
    free(qa);
    free(qr);
    free(qi);
    free(payload);
  }
  free(name);
  return rc;
}

int approval_check_reason(const char *reason, char *err, size_t errlen) {
  char why[128];
  size_t nr = strlen(reason);
  if (nr > APPROVAL_REASON_MAX) {
    util_seterr(err, errlen, "the reason is %zu bytes, more than %d", nr, APPROVAL_REASON_MAX);
    return -1;
  }
  if (util_text_problem(reason, nr, 1, why, sizeof why) != 0) {
    util_seterr(err, errlen, "invalid reason: %s", why);
    return -1;
  }
  return 0;
}

/* Who answered and why go into the log as they are (who did what): the
 * approver a name, the reason text of a bounded size, both UTF-8 without
 * control characters (a reason may have lines). */
static int check_decision(const approval_decision *a, char *err, size_t errlen) {
  char why[128];
  const char *approver = a->approver ? a->approver : "", *reason = a->reason ? a->reason : "";
  size_t na = strlen(approver);
  if (na == 0 || na > APPROVAL_APPROVER_MAX) {
    util_seterr(err, errlen, "invalid approver: it is %zu bytes (1 to %d)", na, APPROVAL_APPROVER_MAX);
    return -1;
  }
  if (util_text_problem(approver, na, 0, why, sizeof why) != 0) {
    util_seterr(err, errlen, "invalid approver: %s", why);
    return -1;
  }
  return approval_check_reason(reason, err, errlen);
}

int approval_answer_in_batch(store *st, const char *id, const approval_decision *a, approval_request *answered,
                             char *err, size_t errlen) {
  if (check_decision(a, err, errlen) != 0) return -1;
  if (store_begin(st) != STORE_OK) return store_failed(st, err, errlen);
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) {
    if (found == 0) engine_unknown_id(id, err, errlen);
    else store_failed(st, err, errlen);
    return -1;
  }
  approval_request p, oldest;
  const char *named = a->request_id;
  int count = 0, rc = -1;
  int n = engine_status_terminal(w.status) ? 0 : find_pending_named(st, &w, named, &p, &count, err, errlen);
  /* a name that is not pending: say what is */
  int others = n == 0 && named && count > 0 ? find_pending(st, &w, &oldest, err, errlen) : 0;
  if (n < 0 || others < 0) {
    /* err is set */
  } else if (n == 0 && engine_status_terminal(w.status)) {
    util_seterr(err, errlen, "workflow '%s' is %s: no approval is pending", id, w.status);
  } else if (n == 0 && named && others) {
    util_seterr(err, errlen,
                "request '%s' of %s is not pending (answered, timed out or never asked); it waits on request '%s'%s%s",
                named, id, oldest.request_id, *oldest.tool ? " for tool " : "", oldest.tool);
  } else if (n == 0 && named) {
    util_seterr(err, errlen, "%s has no pending approval request '%s' (answered, timed out or never asked)", id, named);
  } else if (n == 0) {
    util_seterr(err, errlen, "no approval is pending for %s", id);
  } else if (!named && count > 1) {
    util_seterr(err, errlen, "%s waits on %d approval requests (the oldest is '%s'%s%s): name the one you answer", id,
                count, p.request_id, *p.tool ? " for tool " : "", p.tool);
  } else if (p.deadline >= 0 && util_now_ms() >= p.deadline) {
    util_seterr(err, errlen, "request '%s' of %s timed out (its deadline passed): the session counts it as denied",
                p.request_id, id);
  } else {
    rc = deliver(st, id, &p, a, err, errlen);
  }
  wf_row_free(&w);
  if (rc != 0) return -1;
  *answered = p;
  return 0;
}

int approval_answer(store *st, const char *id, const approval_decision *a, approval_request *answered, char *err,
                    size_t errlen) {
  /* one write transaction from the check to the signal: no worker commits in between */
  if (approval_answer_in_batch(st, id, a, answered, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  if (store_commit(st) != STORE_OK) {
    store_failed(st, err, errlen);
    store_rollback(st);
    return -1;
  }
  return 0;
}
