/* fork: a new workflow from a point of another's history (fork.h). Every
 * read and check comes first (the source, the point, the patched input, the
 * script replaying the copied prefix); the writes follow, all into the one
 * transaction: the fork's row, its first event, the copied history and
 * domain events (store_fork_copy), a session.forked event, its tasks.
 *
 * Where the fork starts: the history position at which the chosen domain
 * event was recorded (its EventEmitted), or, for --turn N, just before the
 * model.turn activity of the agent session's N-th turn. A command that was
 * still waiting for its outcome there and cannot be picked up again from
 * the log alone (an activity, a child, a slot or rate request) moves the cut
 * to just before it: it runs again, live, in the fork. Timers and signal
 * waits still pending are kept, with their recorded due times.
 *
 * The fork's WorkflowStarted says how its history came to be: "forks", one
 * step per fork (a fork of a fork has two), each {id, run, seq, at, with,
 * by}: the events up to #at were recorded as workflow id, and from #at on
 * the step is what wf.info().fork returns (with: the model and policies an
 * agent session uses from there; lua/ and workflows/agent_session.lua).
 * The workflow VM reads a copied event's command with the fork's own id in
 * place of the id it was recorded as (wfvm_event_is), so a script that
 * passes wf.info().id to its activities replays as the fork. */
#include "fork.h"

#include <errno.h>
#include <stdarg.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lualib.h>

#include "crash.h"
#include "fork_workspace.h"
#include "home.h"
#include "json.h"
#include "modules.h"
#include "script_file.h"
#include "util.h"
#include "wfvm.h"
#include "workflow_ops.h"

/* ------------------------------------------------------------ helpers --- */

static int refuse(int *why, int kind, fork_made *out, const char *field, char *err, size_t errlen, const char *fmt,
                  ...) __attribute__((format(printf, 7, 8)));
static int refuse(int *why, int kind, fork_made *out, const char *field, char *err, size_t errlen, const char *fmt,
                  ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && errlen) vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  *why = kind;
  snprintf(out->field, sizeof out->field, "%s", field ? field : "");
  return -1;
}

/* Why a read of the source failed: its damaged log (STORE_ECORRUPT, never
 * forked from: the copy would carry the damage on) or the store. */
static int read_failed(int rc) { return rc == STORE_ECORRUPT ? FORK_DAMAGED : FORK_FAILED; }

static void hist_push(hist_list *l, const hist_event *e) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->v = util_xrealloc(l->v, l->cap * sizeof *l->v);
  }
  l->v[l->n++] = (hist_event){e->seq,
                              util_strdup(e->type),
                              e->ref,
                              e->name ? util_strdup(e->name) : NULL,
                              e->hash ? util_strdup(e->hash) : NULL,
                              e->payload ? util_strdup(e->payload) : NULL,
                              e->time,
                              NULL};
}

/* The domain event an EventEmitted recorded ({"seq":N}, runs.c), or 0. */
static int64_t emitted(const hist_event *e) {
  if (strcmp(e->type, "EventEmitted") != 0 || !e->payload) return 0;
  return json_get_int(e->payload, strlen(e->payload), "seq", 0);
}

/* A command that waits for an outcome (an event whose ref is its seq). */
static int is_command(const char *t) {
  static const char *const kinds[] = {"ActivityScheduled", "TimerStarted",        "SignalWaitStarted",
                                      "ChildStarted",      "SlotRequested",       "SlotReleaseRequested",
                                      "CounterRequested",  "RateRequested",       "RateChargeRequested",
                                      NULL};
  for (const char *const *k = kinds; *k; k++)
    if (strcmp(*k, t) == 0) return 1;
  return 0;
}

/* Pending at a cut, a command the log alone cannot pick up again: the fork
 * starts before it. Timers and signal waits go on (their due times are in
 * the log). */
static int restarts(const char *t) { return strcmp(t, "TimerStarted") != 0 && strcmp(t, "SignalWaitStarted") != 0; }

/* answered[seq] for the commands of h[0..upto) answered within it. */
static char *answered_within(const hist_list *h, size_t upto) {
  char *a = util_xcalloc(upto + 2, 1);
  for (size_t i = 0; i < upto; i++)
    if (h->v[i].ref > 0 && (size_t)h->v[i].ref <= upto) a[h->v[i].ref] = 1;
  return a;
}

/* The cut moved before every command pending at it that restarts; *first
 * gets the earliest such command moved before (NULL: none). Positions are
 * counts of events (seq == index + 1: store_hist_load checks it). */
static size_t cut_back(const hist_list *h, size_t cut, const hist_event **first) {
  *first = NULL;
  for (;;) {
    char *a = answered_within(h, cut);
    size_t to = cut;
    for (size_t i = 0; i < cut; i++) {
      const hist_event *e = &h->v[i];
      if (e->ref == 0 && is_command(e->type) && !a[e->seq] && restarts(e->type) && (size_t)e->seq - 1 < to) {
        to = (size_t)e->seq - 1;
        *first = e;
      }
    }
    free(a);
    if (to == cut) return cut;
    cut = to;
  }
}

/* ------------------------------------------------- the source's events --- */

typedef struct dom_scan {
  int64_t want_seq;  /* --at: the event asked for */
  int64_t want_turn; /* --turn: the agent.message of this turn */
  int64_t last, turns, found_seq;
  char found_type[64];
  int agent; /* a session.created naming a model: an agent session */
} dom_scan;

static int scan_domain(void *ud, const domain_event *e) {
  dom_scan *d = ud;
  d->last = e->seq;
  size_t pn = e->payload ? strlen(e->payload) : 0;
  if (strcmp(e->type, "session.created") == 0 && pn) {
    const char *v;
    size_t vn;
    if (json_get(e->payload, pn, "model", &v, &vn) == 1) d->agent = 1;
  }
  if (strcmp(e->type, "agent.message") == 0) {
    d->turns++;
    if (d->want_turn && pn && json_get_int(e->payload, pn, "turn", 0) == d->want_turn && !d->found_seq) {
      d->found_seq = e->seq;
      snprintf(d->found_type, sizeof d->found_type, "%s", e->type);
    }
  }
  if (d->want_seq && e->seq == d->want_seq) {
    d->found_seq = e->seq;
    snprintf(d->found_type, sizeof d->found_type, "%s", e->type);
  }
  return 0;
}

/* The run of the source whose history recorded domain event dseq, its
 * events in *h and the event's index in *pos: 1, or 0 when no run did (a
 * client's note: signal.sent, cancel.requested), *before then the last
 * event the workflow recorded before it (0: none); the store's error (< 0). */
static int find_emit(store *st, const char *id, int64_t last_run, int64_t dseq, int64_t *run, hist_list *h, size_t *pos,
                     int64_t *before) {
  *before = 0;
  for (int64_t r = last_run; r >= 1; r--) {
    hist_list l = {0};
    int rc = store_hist_load(st, id, r, &l);
    if (rc != STORE_OK) {
      hist_list_free(&l);
      return rc < 0 ? rc : STORE_ERR;
    }
    for (size_t i = 0; i < l.n; i++) {
      int64_t s = emitted(&l.v[i]);
      if (s == dseq) {
        *run = r;
        *h = l;
        *pos = i;
        return 1;
      }
      if (s && s < dseq && s > *before) *before = s;
    }
    hist_list_free(&l);
  }
  return 0;
}

/* The domain events the workflow recorded up to the cut: the last one an
 * EventEmitted of h[0..cut) names, else the last of the runs before. */
static int64_t domain_upto(store *st, const char *id, int64_t run, const hist_list *h, size_t cut, int *failed) {
  for (size_t i = cut; i > 0; i--) {
    int64_t s = emitted(&h->v[i - 1]);
    if (s) return s;
  }
  for (int64_t r = run - 1; r >= 1; r--) {
    hist_list l = {0};
    int rc = store_hist_load(st, id, r, &l);
    if (rc != STORE_OK) {
      *failed = rc < 0 ? rc : STORE_ERR;
      hist_list_free(&l);
      return 0;
    }
    int64_t best = 0;
    for (size_t i = 0; i < l.n; i++)
      if (emitted(&l.v[i]) > best) best = emitted(&l.v[i]);
    hist_list_free(&l);
    if (best) return best;
  }
  return 0;
}

/* --turn N: just before the model.turn activity of turn N (the first one
 * after turn N-1's agent.message in its run, e_at being turn N's). */
static size_t turn_cut(const hist_list *h, size_t e_at, int64_t prev_dseq) {
  size_t from = 0;
  for (size_t i = e_at; i > 0; i--)
    if (prev_dseq && emitted(&h->v[i - 1]) == prev_dseq) {
      from = i;
      break;
    }
  for (size_t i = from; i < e_at; i++)
    if (strcmp(h->v[i].type, "ActivityScheduled") == 0 && h->v[i].name && strcmp(h->v[i].name, "model.turn") == 0)
      return i;
  return e_at; /* no model call seen: the turn's own event */
}

/* --------------------------------------------------- the fork's start --- */

/* The fork's WorkflowStarted payload: the source's (its seed) with the
 * patched input, one more fork step, and no trace context (the fork is not
 * part of its source's trace). NULL with err when the
 * source's is not JSON (a damaged log). */
static char *start_payload(const char *source_payload, const char *input, const char *src, int64_t run, int64_t seq,
                           int64_t at, const char *model, const char *policies, const char *by, char *err,
                           size_t errlen) {
  lua_State *L = luaL_newstate();
  if (!L) return util_seterr(err, errlen, "out of memory"), NULL;
  char *out = NULL;
  if (json_decode_safe(L, source_payload, strlen(source_payload), err, errlen) != 0 || !lua_istable(L, 1)) {
    if (!*err) util_seterr(err, errlen, "the source's WorkflowStarted is not an object");
    lua_close(L);
    return NULL;
  }
  if (json_decode_safe(L, input, strlen(input), err, errlen) != 0) {
    lua_close(L);
    return NULL;
  }
  lua_setfield(L, 1, "input");
  /* the fork is an operation of its own, not part of its source's trace */
  lua_pushnil(L);
  lua_setfield(L, 1, "traceparent");
  lua_pushnil(L);
  lua_setfield(L, 1, "tracestate");
  /* the steps before: those whose point is within the copied prefix; the
   * one in force at the cut lends its options to the new step */
  lua_newtable(L); /* 2: the new list */
  int kept = 0;
  lua_getfield(L, 1, "forks"); /* 3 */
  if (lua_istable(L, 3)) {
    for (lua_Integer i = 1;; i++) {
      if (lua_rawgeti(L, 3, i) != LUA_TTABLE) {
        lua_pop(L, 1);
        break;
      }
      lua_getfield(L, -1, "at");
      int whole = 0;
      lua_Integer a = lua_tointegerx(L, -1, &whole);
      lua_pop(L, 1);
      if (!whole || a > at) {
        lua_pop(L, 1);
        break;
      }
      lua_rawseti(L, 2, ++kept);
    }
  }
  lua_pop(L, 1);
  lua_newtable(L); /* 3: the new step */
  lua_pushstring(L, src);
  lua_setfield(L, 3, "id");
  lua_pushinteger(L, run);
  lua_setfield(L, 3, "run");
  lua_pushinteger(L, seq);
  lua_setfield(L, 3, "seq");
  lua_pushinteger(L, at);
  lua_setfield(L, 3, "at");
  lua_pushstring(L, by ? by : "");
  lua_setfield(L, 3, "by");
  lua_newtable(L); /* 4: with: the step before's, then what this fork changes */
  if (kept) {
    lua_rawgeti(L, 2, kept); /* 5 */
    lua_getfield(L, 5, "with"); /* 6 */
    if (lua_istable(L, 6)) {
      lua_pushnil(L);
      while (lua_next(L, 6)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, 4);
      }
    }
    lua_pop(L, 2);
  }
  if (model) {
    if (json_decode_safe(L, model, strlen(model), err, errlen) != 0) {
      lua_close(L);
      return NULL;
    }
    lua_setfield(L, 4, "model");
  }
  if (policies) {
    lua_pushstring(L, policies);
    lua_setfield(L, 4, "policies");
  }
  lua_pushnil(L);
  if (lua_next(L, 4)) {
    lua_pop(L, 2);
    lua_setfield(L, 3, "with");
  } else {
    lua_pop(L, 1); /* an empty with is left out */
  }
  lua_rawseti(L, 2, ++kept);
  lua_setfield(L, 1, "forks");
  size_t len;
  const char *text = json_encode(L, 1, &len);
  out = util_xmalloc(len + 1);
  memcpy(out, text, len + 1);
  lua_close(L);
  return out;
}

/* -------------------------------------------------------- the replay --- */


/* Replays the fork's history h (taken) with src as workflow id: 0 when the
 * script replays every event, else -1 with why (where it diverges). */
static int replay_prefix(store *st, const char *id, int64_t run, hist_list *h, const char *src, size_t len,
                         const char *script_name, const char *script_dir, const char *pins_of, char *why,
                         size_t whylen) {
  size_t total = h->n;
  wfvm_config cfg;
  wfvm_config_default(&cfg);
  cfg.check_only = 1;
  /* the source's pinned modules where it has them (the fork gets copies of
   * its pins), from disk beside a new script; nothing is written */
  modhost m = {st, pins_of, run, script_dir, engine_lua_dir(), pins_of ? MODULES_READ_PINS : 0};
  wfvm_host host = {&m, wfvm_check_append, wfvm_check_emit, modules_load, NULL};
  wfvm *vm = wfvm_new(&cfg, &host, id, run, h);
  char *chunk = util_fmt("@%s", script_name);
  wfvm_state s = vm ? wfvm_start(vm, src, len, chunk) : WFVM_FAILED;
  free(chunk);
  int rc = -1;
  switch (s) {
    case WFVM_END:
    case WFVM_BLOCKED: rc = 0; break;
    case WFVM_DONE:
      util_seterr(why, whylen, "the script returns after %zu of the %zu events (the source's history goes on)",
                  wfvm_cursor(vm), total);
      break;
    case WFVM_FAILED:
      util_seterr(why, whylen, "the script raises after %zu of the %zu events: %s", vm ? wfvm_cursor(vm) : 0,
                  total, vm ? wfvm_output(vm) : "cannot create a VM");
      break;
    default: util_seterr(why, whylen, "%s", vm ? wfvm_output(vm) : "cannot create a VM");
  }
  wfvm_free(vm);
  return rc;
}

/* ------------------------------------------------------------- checks --- */

/* The request's own fields, before the store is read. */
static int check_request(const fork_req *req, fork_made *out, int *why, char *err, size_t errlen) {
  char msg[512];
  if (req->at_given == req->turn_given)
    return refuse(why, FORK_BAD, out, req->at_given ? "turn" : "at", err, errlen,
                  "give the fork point: at (a domain event's seq) or turn (an agent session's model turn), not %s",
                  req->at_given ? "both" : "neither");
  if (req->at_given && req->at < 1)
    return refuse(why, FORK_BAD, out, "at", err, errlen, "at must be a domain event's seq, 1 or more (got %lld)",
                  (long long)req->at);
  if (req->turn_given && req->turn < 1)
    return refuse(why, FORK_BAD, out, "turn", err, errlen, "turn must be 1 or more (got %lld)", (long long)req->turn);
  if (req->id && engine_check_id(req->id, msg, sizeof msg) != 0)
    return refuse(why, FORK_BAD, out, "id", err, errlen, "%s", msg);
  if (req->id && strcmp(req->id, req->source) == 0)
    return refuse(why, FORK_BAD, out, "id", err, errlen, "a fork needs an id of its own, not its source's");
  if (req->input_patch) {
    char *canon = json_accept(req->input_patch, strlen(req->input_patch), "the input patch", msg, sizeof msg);
    if (!canon) return refuse(why, FORK_BAD, out, "input_patch", err, errlen, "%s", msg);
    int obj = canon[0] == '{';
    /* a fork holds its source's grants (docs/grants.md): whoever forks
     * cannot ask for others, nor say what the starter held */
    const char *v;
    size_t vn;
    int grants = obj && (json_get(canon, strlen(canon), "grants", &v, &vn) == 1 ||
                         json_get(canon, strlen(canon), "starterGrants", &v, &vn) == 1);
    free(canon);
    if (!obj)
      return refuse(why, FORK_BAD, out, "input_patch", err, errlen,
                    "the input patch must be a JSON object: a merge patch (RFC 7386) on the source's input");
    if (grants)
      return refuse(why, FORK_BAD, out, "input_patch", err, errlen,
                    "the input patch cannot change grants or starterGrants: a fork holds its source's grants");
  }
  if (req->model) {
    char *canon = json_accept(req->model, strlen(req->model), "the model", msg, sizeof msg);
    char *name = canon && canon[0] == '{' ? json_get_string(canon, strlen(canon), "name") : NULL;
    int ok = name && *name;
    free(name);
    free(canon);
    if (!ok)
      return refuse(why, FORK_BAD, out, "model", err, errlen,
                    "the model must be a JSON object with a name, as an agent session's input has it "
                    "({\"name\": ..., \"baseUrl\": ...})");
  }
  if (req->policies) {
    struct stat sb;
    if (req->policies[0] != '/' || stat(req->policies, &sb) != 0 || !S_ISDIR(sb.st_mode))
      return refuse(why, FORK_BAD, out, "policies", err, errlen, "policies: %s is not a directory (an absolute path)",
                    req->policies);
  }
  return 0;
}

/* What makes two fork requests the same (a retry): the point, the patch,
 * the script's content, the model and the policies, hashed; the fork keeps
 * it in forked_from.request. */
static void fingerprint(const fork_req *req, char out[65]) {
  ubuf b = {0};
  char err[256], *part;
  part = util_fmt("at=%lld;turn=%lld;", req->at_given ? (long long)req->at : -1LL,
                  req->turn_given ? (long long)req->turn : -1LL);
  ubuf_add(&b, part, strlen(part) + 1);
  free(part);
  const char *json[] = {req->input_patch, req->model};
  for (int i = 0; i < 2; i++) {
    char *c = json[i] ? json_canonical(json[i], err, sizeof err) : NULL;
    ubuf_add(&b, c ? c : "-", strlen(c ? c : "-") + 1);
    free(c);
  }
  if (req->script) {
    size_t len = 0;
    char *src = engine_read_script(req->script, &len, err, sizeof err), hash[65];
    util_sha256_hex(src ? src : req->script, src ? len : strlen(req->script), hash);
    free(src);
    ubuf_add(&b, hash, sizeof hash);
  }
  ubuf_add(&b, req->policies ? req->policies : "-", strlen(req->policies ? req->policies : "-") + 1);
  util_sha256_hex(b.p, b.n, out);
  ubuf_free(&b);
}

/* ------------------------------------------------------------- the op --- */

typedef struct fork_state {
  wf_row w;
  hist_list h;     /* the source's run that holds the point */
  char *src;       /* the code the fork replays */
  size_t len;
  char hash[65];
  char *script_name, *script_dir;
  char *input;     /* the fork's input (canonical) */
  char *payload;   /* its WorkflowStarted */
  char *forked;    /* its forked_from */
} fork_state;

static void state_free(fork_state *f) {
  wf_row_free(&f->w);
  hist_list_free(&f->h);
  free(f->src);
  free(f->script_name);
  free(f->script_dir);
  free(f->input);
  free(f->payload);
  free(f->forked);
}

/* The writes, once everything is checked; crash points between them (the
 * crash tests kill the process there: the transaction holds all or none). */
static int write_fork(store *st, const fork_req *req, fork_state *f, const fork_made *m, const char *with_note) {
  int64_t now = util_now_ms();
  size_t cut = (size_t)m->at;
  wf_row row = {(char *)m->id, m->run, (char *)"running", f->script_name, f->script_dir, f->hash, f->input,
                NULL, NULL, 0, now, now, NULL, NULL, f->forked};
  hist_event first = f->h.v[0];
  first.payload = f->payload;
  if ((req->script && store_code_put(st, f->hash, f->script_name, f->src, f->len) != STORE_OK) ||
      store_wf_insert(st, &row) != STORE_OK || store_hist_append(st, m->id, m->run, &first) != STORE_OK)
    return -1;
  crash_point("fork.row");
  if (store_fork_copy(st, req->source, m->run, 2, (int64_t)cut, m->seq, req->script == NULL, m->id) != STORE_OK)
    return -1;
  crash_point("fork.copy");
  /* who forked it and from where: the fork's next domain event */
  char *qs = json_quote(req->source), *qb = json_quote(req->identity ? req->identity : "");
  char *note = util_fmt("{\"by\":%s,\"from\":%s,\"run\":%lld,\"seq\":%lld%s}", qb, qs, (long long)m->run,
                        (long long)m->seq, with_note);
  free(qs);
  free(qb);
  int bad = store_domain_append(st, m->id, "session.forked", now, note) < 0;
  free(note);
  if (bad || store_task_put(st, m->id, "workflow", 0, now, 0, 0, NULL, 0) != STORE_OK) return -1;
  /* what was pending at the cut and goes on: timers and signal timeouts at
   * their recorded due times, the slots the run held */
  char *a = answered_within(&f->h, cut);
  for (size_t i = 0; i < cut; i++) {
    const hist_event *e = &f->h.v[i];
    if (e->ref != 0 || a[e->seq]) continue;
    const char *p = e->payload ? e->payload : "{}";
    if (strcmp(e->type, "TimerStarted") == 0)
      bad |= store_task_put(st, m->id, "timer", e->seq, json_int_field(p, "fire_at", now), 0, 0, NULL, 0) != STORE_OK;
    else if (strcmp(e->type, "SignalWaitStarted") == 0 && json_int_field(p, "deadline", -1) >= 0)
      bad |= store_task_put(st, m->id, "signal_timeout", e->seq, json_int_field(p, "deadline", now), 0, 0, NULL,
                            0) != STORE_OK;
  }
  for (size_t i = 0; i < cut && !bad; i++) {
    const hist_event *e = &f->h.v[i];
    if (strcmp(e->type, "SlotGranted") != 0 || e->ref < 1 || (size_t)e->ref > cut) continue;
    const hist_event *req_ev = &f->h.v[e->ref - 1];
    const char *p = req_ev->payload ? req_ev->payload : "{}";
    char *key = json_get_string(p, strlen(p), "key");
    int released = 0;
    for (size_t k = i + 1; k < cut && !released; k++) {
      const hist_event *r = &f->h.v[k];
      if (strcmp(r->type, "SlotReleaseRequested") != 0 || strcmp(r->name ? r->name : "", req_ev->name) != 0) continue;
      char *rk = r->payload ? json_get_string(r->payload, strlen(r->payload), "key") : NULL;
      released = rk && key && strcmp(rk, key) == 0;
      free(rk);
    }
    if (!released && key)
      bad |= store_slot_put(st, req_ev->name, key, m->id, req_ev->seq, json_get_int(p, strlen(p), "limit", 1), now) !=
                 STORE_OK ||
             store_slot_hold(st, m->id, req_ev->name, key, now) != STORE_OK;
    free(key);
  }
  free(a);
  crash_point("fork.done");
  return bad ? -1 : 0;
}

int ops_write_fork(store *st, const fork_req *req, fork_made *out, int *why, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  *why = 0;
  if (err && errlen) *err = 0;
  if (check_request(req, out, why, err, errlen) != 0) return -1;
  char msg[2048];
  fork_state f = {0};
  int rc = -1;
  if (store_begin(st) != STORE_OK) {
    refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
    goto done;
  }
  int found = store_wf_get(st, req->source, &f.w);
  if (found != 1) {
    if (found == 0) {
      engine_unknown_id(req->source, msg, sizeof msg);
      refuse(why, FORK_UNKNOWN, out, NULL, err, errlen, "%s", msg);
    } else {
      refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
    }
    goto done;
  }
  /* ---- the point: a domain event, and the run that recorded it ---- */
  dom_scan d = {req->at_given ? req->at : 0, req->turn_given ? req->turn : 0, 0, 0, 0, "", 0};
  int lrc = store_domain_list(st, req->source, 0, scan_domain, &d);
  if (lrc != STORE_OK) {
    refuse(why, read_failed(lrc), out, NULL, err, errlen, "%s", store_errmsg(st));
    goto done;
  }
  if (req->at_given && !d.found_seq) {
    refuse(why, FORK_BAD, out, "at", err, errlen, "workflow '%s' has %lld domain event%s; #%lld is beyond the last",
           req->source, (long long)d.last, d.last == 1 ? "" : "s", (long long)req->at);
    goto done;
  }
  if (req->turn_given && !d.found_seq) {
    if (!d.turns)
      refuse(why, FORK_BAD, out, "turn", err, errlen,
             "workflow '%s' has no model turns (no agent.message events): fork it --at a domain event", req->source);
    else
      refuse(why, FORK_BAD, out, "turn", err, errlen, "workflow '%s' has %lld model turn%s; there is no turn %lld",
             req->source, (long long)d.turns, d.turns == 1 ? "" : "s", (long long)req->turn);
    goto done;
  }
  if ((req->model || req->policies) && !d.agent) {
    refuse(why, FORK_BAD, out, req->model ? "model" : "policies", err, errlen,
           "%s is for agent sessions (workflows/agent_session.lua reads it); '%s' is not one",
           req->model ? "model" : "policies", req->source);
    goto done;
  }
  out->asked = req->at_given ? req->at : 0;
  size_t pos = 0;
  int64_t before = 0;
  int got = find_emit(st, req->source, f.w.run, d.found_seq, &out->run, &f.h, &pos, &before);
  if (got < 0) {
    refuse(why, read_failed(got), out, NULL, err, errlen, "%s", store_errmsg(st));
    goto done;
  }
  if (got == 0) {
    if (before)
      refuse(why, FORK_BAD, out, "at", err, errlen,
             "event #%lld (%s) was recorded by a client, not by the workflow's history: fork at #%lld, the "
             "workflow's last event before it, or later",
             (long long)d.found_seq, d.found_type, (long long)before);
    else
      refuse(why, FORK_BAD, out, "at", err, errlen,
             "event #%lld (%s) was recorded by a client, not by the workflow's history, and the workflow recorded "
             "none before it",
             (long long)d.found_seq, d.found_type);
    goto done;
  }
  size_t cut = pos + 1; /* the events up to the domain event's own EventEmitted */
  if (req->turn_given) {
    /* before the model call of turn N: after turn N-1's agent.message */
    int64_t prev = 0;
    if (req->turn > 1) {
      dom_scan p = {0, req->turn - 1, 0, 0, 0, "", 0};
      if ((lrc = store_domain_list(st, req->source, 0, scan_domain, &p)) != STORE_OK) {
        refuse(why, read_failed(lrc), out, NULL, err, errlen, "%s", store_errmsg(st));
        goto done;
      }
      prev = p.found_seq;
    }
    cut = turn_cut(&f.h, pos, prev);
  }
  const hist_event *moved = NULL;
  size_t asked_cut = cut;
  cut = cut_back(&f.h, cut, &moved);
  if (cut < 1) cut = 1; /* the WorkflowStarted at least */
  int failed = 0;
  out->at = (int64_t)cut;
  out->seq = domain_upto(st, req->source, out->run, &f.h, cut, &failed);
  if (failed) {
    refuse(why, read_failed(failed), out, NULL, err, errlen, "%s", store_errmsg(st));
    goto done;
  }
  if (d.agent) {
    /* an agent session's workspace goes with the fork, or the fork is refused */
    int no = fork_workspace_refused(st, req->source, out->seq, msg, sizeof msg);
    if (no < 0) {
      refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
      goto done;
    }
    if (no) {
      refuse(why, FORK_BAD, out, req->turn_given ? "turn" : "at", err, errlen, "%s", msg);
      goto done;
    }
  }
  if (moved && cut < asked_cut)
    snprintf(out->note, sizeof out->note,
             "%s '%s' (history event #%lld) had not ended at the point asked: the fork starts before it, after "
             "domain event #%lld, and runs it again",
             strcmp(moved->type, "ActivityScheduled") == 0 ? "activity"
             : strcmp(moved->type, "ChildStarted") == 0    ? "child"
                                                           : moved->type,
             moved->name ? moved->name : "", (long long)moved->seq, (long long)out->seq);
  if (f.h.n == 0 || strcmp(f.h.v[0].type, "WorkflowStarted") != 0) {
    refuse(why, FORK_FAILED, out, NULL, err, errlen, "run %lld of '%s' does not begin with WorkflowStarted",
           (long long)out->run, req->source);
    goto done;
  }
  /* ---- the fork's id ---- */
  if (req->id) {
    snprintf(out->id, sizeof out->id, "%s", req->id);
  } else {
    for (int n = 1; n <= 1000 && !out->id[0]; n++) {
      char cand[ENGINE_ID_MAX * 2];
      snprintf(cand, sizeof cand, "%s.fork-%d", req->source, n);
      if (engine_check_id(cand, msg, sizeof msg) != 0) {
        refuse(why, FORK_BAD, out, "id", err, errlen, "the id made for the fork (%s) is not valid: %s; give one", cand,
               msg);
        goto done;
      }
      wf_row x;
      int taken = store_wf_get(st, cand, &x);
      if (taken < 0) {
        refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
        goto done;
      }
      if (taken) wf_row_free(&x);
      else memcpy(out->id, cand, strlen(cand) + 1); /* engine_check_id: at most ENGINE_ID_MAX bytes */
    }
    if (!out->id[0]) {
      refuse(why, FORK_BAD, out, "id", err, errlen, "'%s' has 1000 forks named after it; give the fork an id",
             req->source);
      goto done;
    }
  }
  {
    wf_row x;
    int taken = store_wf_get(st, out->id, &x);
    if (taken < 0) {
      refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
      goto done;
    }
    if (taken) {
      /* the same request again (a retry): the fork it made */
      char fp[65];
      fingerprint(req, fp);
      size_t n = x.forked_from ? strlen(x.forked_from) : 0;
      char *from = n ? json_get_string(x.forked_from, n, "id") : NULL, *was = n ? json_get_string(x.forked_from, n, "request") : NULL;
      out->same = from && was && strcmp(from, req->source) == 0 && strcmp(was, fp) == 0;
      free(from);
      free(was);
      wf_row_free(&x);
      refuse(why, FORK_EXISTS, out, "id", err, errlen, "workflow '%s' exists%s; choose another id for the fork",
             out->id, out->same ? " (a fork made by the same request)" : "");
      goto done;
    }
  }
  /* ---- the input: the source run's, patched ---- */
  const hist_event *start = &f.h.v[0];
  char *source_input = NULL;
  {
    const char *v;
    size_t vn;
    const char *p = start->payload ? start->payload : "{}";
    source_input = json_get(p, strlen(p), "input", &v, &vn) == 1 ? util_fmt("%.*s", (int)vn, v) : util_strdup("null");
  }
  if (req->input_patch) {
    f.input = json_merge_patch(source_input, req->input_patch, msg, sizeof msg);
    if (!f.input) {
      free(source_input);
      refuse(why, FORK_BAD, out, "input_patch", err, errlen, "the input patch: %s", msg);
      goto done;
    }
    if (json_check_size(strlen(f.input), "the patched input", msg, sizeof msg) != 0) {
      free(source_input);
      refuse(why, FORK_BAD, out, "input_patch", err, errlen, "%s", msg);
      goto done;
    }
  } else {
    f.input = json_canonical(source_input, msg, sizeof msg);
  }
  free(source_input);
  if (!f.input) {
    refuse(why, FORK_FAILED, out, NULL, err, errlen, "the source's input: %s", msg);
    goto done;
  }
  /* ---- the code ---- */
  if (req->script) {
    f.src = engine_read_script(req->script, &f.len, msg, sizeof msg);
    if (!f.src || engine_check_script(req->script, f.src, f.len, msg, sizeof msg) != 0) {
      refuse(why, FORK_BAD, out, "script", err, errlen, "%s", msg);
      goto done;
    }
    util_sha256_hex(f.src, f.len, f.hash);
    char absdir[PATH_MAX], *tmp = util_strdup(req->script);
    if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, ".");
    free(tmp);
    f.script_name = util_strdup(req->script);
    f.script_dir = util_strdup(absdir);
  } else {
    f.src = store_code_get(st, f.w.code_hash, &f.len);
    if (!f.src) {
      refuse(why, FORK_FAILED, out, NULL, err, errlen, "the code of '%s' is missing from the store", req->source);
      goto done;
    }
    snprintf(f.hash, sizeof f.hash, "%s", f.w.code_hash);
    f.script_name = util_strdup(f.w.script_name);
    f.script_dir = util_strdup(f.w.script_dir);
  }
  /* ---- its first event and its row's forked_from ---- */
  f.payload = start_payload(start->payload ? start->payload : "{}", f.input, req->source, out->run, out->seq,
                            out->at, req->model, req->policies, req->identity, msg, sizeof msg);
  if (!f.payload) {
    refuse(why, FORK_FAILED, out, NULL, err, errlen, "the source's WorkflowStarted: %s", msg);
    goto done;
  }
  {
    char *qs = json_quote(req->source), *qb = json_quote(req->identity ? req->identity : ""), fp[65];
    fingerprint(req, fp);
    char asked[48];
    if (req->turn_given) snprintf(asked, sizeof asked, "\"turn\":%lld", (long long)req->turn);
    else snprintf(asked, sizeof asked, "\"asked\":%lld", (long long)req->at);
    f.forked = util_fmt("{%s,\"at\":%lld,\"by\":%s,\"id\":%s,\"request\":\"%s\",\"run\":%lld,\"seq\":%lld}", asked,
                        (long long)out->at, qb, qs, fp, (long long)out->run, (long long)out->seq);
    free(qs);
    free(qb);
  }
  /* ---- the copied prefix replays as the fork ---- */
  {
    hist_list prefix = {0};
    hist_event first = *start;
    first.payload = f.payload;
    hist_push(&prefix, &first);
    for (size_t i = 1; i < cut; i++) hist_push(&prefix, &f.h.v[i]);
    char div[1500];
    if (replay_prefix(st, out->id, out->run, &prefix, f.src, f.len, f.script_name, f.script_dir,
                      req->script ? NULL : req->source, div, sizeof div) != 0) {
      hist_list_free(&prefix);
      const char *field = req->script ? "script" : req->input_patch ? "input_patch" : "";
      refuse(why, FORK_BAD, out, field, err, errlen, "%s does not replay the source's history up to #%lld%s: %s",
             req->script ? "the script" : req->input_patch ? "the patched input" : "the source's code",
             (long long)out->at, req->script || req->input_patch ? "" : " as a new workflow", div);
      goto done;
    }
    hist_list_free(&prefix);
  }
  /* ---- the writes ---- */
  {
    ubuf with = {0};
    ubuf_add(&with, "", 1);
    with.n = 0;
    if (req->input_patch) {
      char *p = json_canonical(req->input_patch, msg, sizeof msg), *part = util_fmt(",\"input_patch\":%s", p ? p : "null");
      ubuf_add(&with, part, strlen(part));
      free(part);
      free(p);
    }
    if (req->model) {
      char *p = json_canonical(req->model, msg, sizeof msg), *part = util_fmt(",\"model\":%s", p ? p : "null");
      ubuf_add(&with, part, strlen(part));
      free(part);
      free(p);
    }
    const char *names[] = {"policies", "script"}, *vals[] = {req->policies, req->script};
    for (int i = 0; i < 2; i++) {
      if (!vals[i]) continue;
      char *q = json_quote(vals[i]), *part = util_fmt(",\"%s\":%s", names[i], q);
      ubuf_add(&with, part, strlen(part));
      free(part);
      free(q);
    }
    ubuf_add(&with, "", 1);
    int bad = write_fork(st, req, &f, out, with.p);
    ubuf_free(&with);
    if (bad) {
      refuse(why, FORK_FAILED, out, NULL, err, errlen, "%s", store_errmsg(st));
      goto done;
    }
  }
  rc = 0;
done:
  state_free(&f);
  return rc;
}

int engine_fork_workflow(store *st, const fork_req *req, fork_made *out, int *why, char *err, size_t errlen) {
  if (ops_write_fork(st, req, out, why, err, errlen) != 0) {
    store_rollback(st);
    return -1;
  }
  if (store_commit(st) != STORE_OK) {
    util_seterr(err, errlen, "%s", store_errmsg(st));
    *why = FORK_FAILED;
    store_rollback(st);
    return -1;
  }
  return 0;
}
