/* session_view_summary: a workflow's summary as the store has it (status,
 * counts, its sandbox and artifacts, its children and its tree's cost and
 * tokens) and what it waits on now: an approval, a signal, a timer, a slot
 * (its place in line), a rate or an activity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "approval.h"
#include "json.h"
#include "session_view_internal.h"
#include "util.h"
#include "workflow_ops.h"

/* ------------------------------------------------------------ the tree --- */

/* Member key of the JSON object text[0..n) when it is a number: 1 with *out. */
static int number_member(const char *text, size_t n, const char *key, double *out) {
  const char *v;
  size_t vn;
  if (!text || json_get(text, n, key, &v, &vn) != 1 || vn == 0 || vn > 40) return 0;
  if (!(*v == '-' || (*v >= '0' && *v <= '9'))) return 0;
  char num[48], *end;
  memcpy(num, v, vn);
  num[vn] = 0;
  double d = strtod(num, &end);
  if (end == num) return 0;
  *out = d;
  return 1;
}

/* The own spend of one object of counts ({tokens, cost_usd, sub_sessions}). */
static int own_of(const char *obj, size_t n, view_spend *out) {
  double tokens, cost, sub = 0;
  if (!number_member(obj, n, "tokens", &tokens)) return 0;
  const char *v;
  size_t vn;
  int has_sub = json_get(obj, n, "sub_sessions", &v, &vn) == 1 && vn > 0 && *v == '{';
  if (has_sub) number_member(v, vn, "tokens", &sub);
  out->tokens = (int64_t)(tokens - sub);
  out->known = 1;
  if (number_member(obj, n, "cost_usd", &cost)) {
    double sub_cost = 0;
    if (has_sub) number_member(v, vn, "cost_usd", &sub_cost);
    out->cost_usd = cost - sub_cost;
    if (out->cost_usd < 0) out->cost_usd = 0;
    out->priced = 1;
  }
  if (out->tokens < 0) out->tokens = 0;
  return 1;
}

int view_own_spend(const char *result, const char *error, view_spend *out) {
  memset(out, 0, sizeof *out);
  if (result && *result == '{' && own_of(result, strlen(result), out)) return 1;
  const char *v;
  size_t vn;
  /* a sub-session that failed gives its spend back with its error */
  if (error && *error == '{' && json_get(error, strlen(error), "usage", &v, &vn) == 1 && vn > 0 && *v == '{' &&
      own_of(v, vn, out))
    return 1;
  memset(out, 0, sizeof *out);
  return 0;
}

void view_tree_add(view_tree *t, const wf_row *w) {
  t->sessions++;
  if (!engine_status_terminal(w->status)) t->running++;
  view_spend s;
  if (!view_own_spend(w->result, w->error, &s)) return;
  t->tokens += s.tokens;
  t->cost_usd += s.cost_usd;
  t->priced |= s.priced;
}

static int add_to_tree(void *ud, const wf_row *w) {
  view_tree_add(ud, w);
  return 0;
}

int view_tree_load(store *st, const wf_row *w, view_tree *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  view_tree_add(t, w);
  if (store_wf_subtree(st, w->id, VIEW_TREE_MAX, VIEW_TREE_MAX, add_to_tree, t) != STORE_OK) {
    util_seterr(err, errlen, "cannot read the workflows under %s: %s", w->id, store_errmsg(st));
    return -1;
  }
  return 0;
}

char *view_tree_json(const view_tree *t) {
  char cost[40] = "null";
  if (t->priced) snprintf(cost, sizeof cost, "%.10g", t->cost_usd);
  return util_fmt("{\"sessions\":%lld,\"tokens\":%lld,\"cost_usd\":%s,\"running\":%lld}", (long long)t->sessions,
                  (long long)t->tokens, cost, (long long)t->running);
}

/* ------------------------------------------------------------ summary --- */

typedef struct scan {
  view_summary *s;
  ubuf artifacts;
} scan;

static int find_sandbox(void *ud, const domain_event *e) {
  scan *c = ud;
  char driver[64];
  if (strncmp(e->type, "sandbox.", 8) == 0 && *view_json_field(e->payload, "driver", driver, sizeof driver)) {
    free(c->s->sandbox);
    c->s->sandbox = util_strdup(e->payload);
  }
  if (strcmp(e->type, "artifact.saved") == 0 && e->payload) {
    ubuf_add(&c->artifacts, c->s->nartifacts++ ? "," : "[", 1);
    ubuf_add(&c->artifacts, e->payload, strlen(e->payload));
  }
  return 0;
}

typedef struct slot_look {
  int found;
  int64_t position, limit;
} slot_look;

static int look_slot(void *ud, const slot_row *r) {
  slot_look *l = ud;
  l->found = 1;
  l->position = r->position;
  l->limit = r->limit;
  return 0;
}

/* A run queued for a slot: its pool, key, place in line and how many hold it. */
static char *slot_waits_json(store *st, const wf_row *w, const hist_event *last) {
  char *key = json_get_string(last->payload, strlen(last->payload), "key");
  slot_look l = {0};
  store_slot_get(st, w->id, last->name, key ? key : "", look_slot, &l);
  int64_t held = store_slot_count(st, last->name, key ? key : "", 1),
          queued = store_slot_count(st, last->name, key ? key : "", 0);
  char *pool = json_quote(last->name), *k = json_quote(key ? key : "");
  char *out = util_fmt("{\"kind\":\"slot\",\"pool\":%s,\"key\":%s,\"since\":%lld,\"position\":%lld,"
                       "\"queued\":%lld,\"held\":%lld,\"limit\":%lld}",
                       pool, k, (long long)last->time, (long long)(l.found ? l.position : 0), (long long)queued,
                       (long long)held, (long long)json_int_field(last->payload, "limit", 0));
  free(pool);
  free(k);
  free(key);
  return out;
}

/* What the run waits on now, from its last event, as JSON: an approval
 * request (its id, tool, since, deadline), a signal (name, deadline), a timer
 * (due_at) or an activity in flight (name, since, attempt). NULL for none. */
static char *waits_json(store *st, const wf_row *w, const hist_event *last) {
  char *name = json_quote(last->name ? last->name : ""), *out = NULL;
  if (strcmp(last->type, "SignalWaitStarted") == 0) {
    approval_request p;
    char err[256];
    int64_t deadline = json_int_field(last->payload, "deadline", -1);
    char dl[32] = "null";
    if (deadline >= 0) snprintf(dl, sizeof dl, "%lld", (long long)deadline);
    if (approval_request_of(last->name) && approval_pending(st, w->id, &p, err, sizeof err) == 1) {
      char *rid = json_quote(p.request_id), *tool = json_quote(p.tool), *kind = json_quote(p.kind);
      out = util_fmt("{\"kind\":\"approval\",\"request_id\":%s,\"tool\":%s,\"about\":%s,\"signal\":%s,"
                     "\"since\":%lld,\"deadline\":%s}",
                     rid, tool, kind, name, (long long)(p.since ? p.since : last->time), dl);
      free(rid);
      free(tool);
      free(kind);
    } else {
      out = util_fmt("{\"kind\":\"signal\",\"signal\":%s,\"since\":%lld,\"deadline\":%s}", name,
                     (long long)last->time, dl);
    }
  } else if (strcmp(last->type, "ChildStarted") == 0) {
    out = util_fmt("{\"kind\":\"child\",\"child\":%s,\"since\":%lld}", name, (long long)last->time);
  } else if (strcmp(last->type, "TimerStarted") == 0) {
    out = util_fmt("{\"kind\":\"timer\",\"since\":%lld,\"due_at\":%lld}", (long long)last->time,
                   (long long)json_int_field(last->payload, "fire_at", -1));
  } else if (strcmp(last->type, "SlotRequested") == 0) {
    out = slot_waits_json(st, w, last);
  } else if (strcmp(last->type, "RateRequested") == 0) {
    task_row t;
    out = util_fmt("{\"kind\":\"rate\",\"rate\":%s,\"since\":%lld,\"until\":%lld}", name, (long long)last->time,
                   store_task_get(st, w->id, "wake", last->seq, &t) == 1 ? (long long)t.run_at : -1LL);
  } else if (strcmp(last->type, "ActivityScheduled") == 0) {
    task_row t = {0};
    int attempt = store_task_get(st, w->id, "activity", last->seq, &t) == 1 && t.attempt > 0 ? t.attempt : 1;
    if (t.leased && attempt > 1) attempt--; /* a running attempt's task holds the next one's number */
    char key[200], *lasterr = NULL;
    snprintf(key, sizeof key, "last_error:%s/%lld", w->id, (long long)last->seq);
    if (store_meta_get(st, key, &lasterr) != 1 || !lasterr || *lasterr != '{') {
      free(lasterr);
      lasterr = NULL;
    }
    out = util_fmt("{\"kind\":\"activity\",\"activity\":%s,\"seq\":%lld,\"since\":%lld,\"attempt\":%d,"
                   "\"last_error\":%s}",
                   name, (long long)last->seq, (long long)last->time, attempt, lasterr ? lasterr : "null");
    free(lasterr);
  }
  free(name);
  return out;
}

/* A child as an item of its parent's "children". */
static int add_child(void *ud, const wf_row *w) {
  ubuf *b = ud;
  char *id = json_quote(w->id), *sc = json_quote(w->script_name),
       *pc = json_quote(w->parent_close ? w->parent_close : "terminate");
  char *item = util_fmt("%s{\"id\":%s,\"status\":\"%s\",\"script\":%s,\"parent_close\":%s,\"created_at\":%lld,"
                        "\"updated_at\":%lld}",
                        b->n > 1 ? "," : "", id, w->status, sc, pc, (long long)w->created_at, (long long)w->updated_at);
  ubuf_add(b, item, strlen(item));
  free(item);
  free(id);
  free(sc);
  free(pc);
  return 0;
}

/* A fork as an item of its source's "forks": where it was forked, by whom. */
static int add_fork(void *ud, const wf_row *w) {
  ubuf *b = ud;
  char *id = json_quote(w->id);
  size_t n = strlen(w->forked_from);
  char *by = json_get_string(w->forked_from, n, "by");
  char *qby = by ? json_quote(by) : util_strdup("null");
  char *item = util_fmt("%s{\"id\":%s,\"status\":\"%s\",\"run\":%lld,\"seq\":%lld,\"at\":%lld,\"by\":%s,"
                        "\"created_at\":%lld,\"updated_at\":%lld}",
                        b->n > 1 ? "," : "", id, w->status, (long long)json_get_int(w->forked_from, n, "run", 0),
                        (long long)json_get_int(w->forked_from, n, "seq", 0),
                        (long long)json_get_int(w->forked_from, n, "at", 0), qby, (long long)w->created_at,
                        (long long)w->updated_at);
  ubuf_add(b, item, strlen(item));
  free(item);
  free(qby);
  free(by);
  free(id);
  return 0;
}

int view_summary_load(store *st, const char *id, view_summary *s, char *err, size_t errlen) {
  memset(s, 0, sizeof *s);
  scan c = {s, {0}};
  wf_view v;
  int found = store_wf_view(st, id, &v, find_sandbox, &c);
  if (found != 1) {
    if (found < 0) util_seterr(err, errlen, "cannot read workflow %s: %s", id, store_errmsg(st));
    ubuf_free(&c.artifacts);
    view_summary_free(s);
    return found;
  }
  s->w = v.w; /* the row is the summary's now */
  s->tasks = v.tasks;
  s->signals = v.signals;
  hist_list h = v.h;
  if (s->nartifacts) {
    ubuf_add(&c.artifacts, "]", 2); /* with the NUL */
    s->artifacts = c.artifacts.p;
  }
  s->history_events = h.n;
  ubuf kids = {0};
  ubuf_add(&kids, "[", 1);
  if (store_wf_children(st, id, add_child, &kids) != STORE_OK) {
    util_seterr(err, errlen, "cannot read the children of workflow %s: %s", id, store_errmsg(st));
    ubuf_free(&kids);
    hist_list_free(&h);
    view_summary_free(s);
    return -1;
  }
  ubuf_add(&kids, "]", 2); /* with the NUL */
  s->children = kids.p;
  ubuf forks = {0};
  ubuf_add(&forks, "[", 1);
  if (store_wf_forks(st, id, add_fork, &forks) != STORE_OK) {
    util_seterr(err, errlen, "cannot read the forks of workflow %s: %s", id, store_errmsg(st));
    ubuf_free(&forks);
    hist_list_free(&h);
    view_summary_free(s);
    return -1;
  }
  ubuf_add(&forks, "]", 2); /* with the NUL */
  s->forks = forks.p;
  if (view_tree_load(st, &s->w, &s->tree, err, errlen) != 0) {
    hist_list_free(&h);
    view_summary_free(s);
    return -1;
  }
  if (!engine_status_terminal(s->w.status) && h.n) {
    const hist_event *last = &h.v[h.n - 1];
    if (strcmp(last->type, "SignalWaitStarted") == 0)
      snprintf(s->waiting, sizeof s->waiting, "signal '%s' (event #%lld)", last->name, (long long)last->seq);
    else if (strcmp(last->type, "TimerStarted") == 0)
      snprintf(s->waiting, sizeof s->waiting, "timer (event #%lld) %s", (long long)last->seq, last->payload);
    else if (strcmp(last->type, "ActivityScheduled") == 0)
      snprintf(s->waiting, sizeof s->waiting, "activity '%s' (event #%lld)", last->name, (long long)last->seq);
    else if (strcmp(last->type, "RateRequested") == 0)
      snprintf(s->waiting, sizeof s->waiting, "rate '%s' (event #%lld)", last->name, (long long)last->seq);
    else if (strcmp(last->type, "ChildStarted") == 0)
      snprintf(s->waiting, sizeof s->waiting, "child '%s' (event #%lld)", last->name, (long long)last->seq);
    s->waits = waits_json(st, &s->w, last);
    if (strcmp(last->type, "SlotRequested") == 0 && s->waits) {
      size_t n = strlen(s->waits);
      char *key = json_get_string(s->waits, n, "key");
      snprintf(s->waiting, sizeof s->waiting, "slot '%s'%s%s%s: #%lld in line of %lld, %lld of %lld held (event #%lld)",
               last->name, key && *key ? " key '" : "", key && *key ? key : "", key && *key ? "'" : "",
               (long long)json_get_int(s->waits, n, "position", 0), (long long)json_get_int(s->waits, n, "queued", 0),
               (long long)json_get_int(s->waits, n, "held", 0), (long long)json_get_int(s->waits, n, "limit", 0),
               (long long)last->seq);
      free(key);
    }
  }
  hist_list_free(&h);
  return 1;
}

char *view_summary_json(const view_summary *s) {
  const wf_row *w = &s->w;
  char *id = json_quote(w->id), *sc = json_quote(w->script_name), *wt = json_quote(s->waiting);
  char *er = !w->error ? util_strdup("null") : w->error[0] == '{' ? util_strdup(w->error) : json_quote(w->error);
  char *parent = w->parent ? json_quote(w->parent) : util_strdup("null"), *tree = view_tree_json(&s->tree);
  char *out = util_fmt("{\"id\":%s,\"status\":\"%s\",\"run\":%lld,\"script\":%s,\"code_hash\":\"%s\","
                       "\"created_at\":%lld,\"updated_at\":%lld,\"input\":%s,\"result\":%s,\"error\":%s,"
                       "\"waiting_on\":%s,\"waits\":%s,\"history_events\":%zu,\"tasks\":%d,"
                       "\"buffered_signals\":%d,\"cancel_requested\":%s,\"sandbox\":%s,\"artifacts\":%s,"
                       "\"parent\":%s,\"children\":%s,\"tree\":%s,\"forked_from\":%s,\"forks\":%s}",
                       id, w->status, (long long)w->run, sc, w->code_hash, (long long)w->created_at,
                       (long long)w->updated_at, w->input ? w->input : "null", w->result ? w->result : "null", er, wt,
                       s->waits ? s->waits : "null", s->history_events, s->tasks, s->signals,
                       w->cancel == 1 ? "true" : "false", s->sandbox ? s->sandbox : "null",
                       s->artifacts ? s->artifacts : "null", parent, s->children ? s->children : "[]", tree,
                       w->forked_from ? w->forked_from : "null", s->forks ? s->forks : "[]");
  free(tree);
  free(parent);
  free(id);
  free(sc);
  free(wt);
  free(er);
  return out;
}

char *view_summary_json_started(const wf_row *w) {
  view_summary s;
  memset(&s, 0, sizeof s);
  s.w = *w; /* borrowed: not freed here */
  s.history_events = 1;
  s.tasks = 1;
  view_tree_add(&s.tree, w);
  return view_summary_json(&s);
}

void view_summary_free(view_summary *s) {
  wf_row_free(&s->w);
  free(s->artifacts);
  free(s->waits);
  free(s->sandbox);
  free(s->children);
  free(s->forks);
  s->artifacts = s->waits = s->sandbox = s->children = s->forks = NULL;
}

int view_waits_now(store *st, const char *id, char **waits, int64_t *seq) {
  *waits = NULL;
  *seq = 0;
  wf_row w;
  int found = store_wf_get(st, id, &w);
  if (found != 1) return found < 0 ? -1 : 0;
  int rc = 1;
  int64_t last = store_hist_max_seq(st, w.id, w.run);
  hist_list h = {0};
  if (last < 0) rc = -1;
  else if (last > 0 && !engine_status_terminal(w.status)) {
    int got = store_hist_get(st, w.id, w.run, last, &h);
    if (got < 0) rc = -1;
    else if (got == 1 && h.n) *waits = waits_json(st, &w, &h.v[0]);
  }
  *seq = last > 0 ? last : 0;
  hist_list_free(&h);
  wf_row_free(&w);
  return rc;
}

typedef struct queue_place {
  store *st;
  const char *wf_id;
  char *json;
} queue_place;

static int find_queued(void *ud, const slot_row *r) {
  queue_place *q = ud;
  if (r->held) return 0;
  slot_look l = {0};
  store_slot_get(q->st, q->wf_id, r->pool, r->key, look_slot, &l);
  char *pool = json_quote(r->pool), *key = json_quote(r->key);
  q->json = util_fmt("{\"pool\":%s,\"key\":%s,\"position\":%lld}", pool, key, (long long)l.position);
  free(pool);
  free(key);
  return 1;
}

char *view_list_item_json(store *st, const wf_row *w) {
  char *id = json_quote(w->id), *sc = json_quote(w->script_name);
  queue_place q = {st, w->id, NULL};
  if (strcmp(w->status, "queued") == 0) store_slot_list(st, w->id, NULL, NULL, find_queued, &q);
  char *parent = w->parent ? json_quote(w->parent) : NULL;
  char *out = util_fmt("{\"id\":%s,\"status\":\"%s\",\"run\":%lld,\"script\":%s,\"created_at\":%lld,"
                       "\"updated_at\":%lld%s%s%s%s%s%s}",
                       id, w->status, (long long)w->run, sc, (long long)w->created_at, (long long)w->updated_at,
                       q.json ? ",\"queue\":" : "", q.json ? q.json : "", parent ? ",\"parent\":" : "",
                       parent ? parent : "", w->forked_from ? ",\"forked_from\":" : "",
                       w->forked_from ? w->forked_from : "");
  free(parent);
  free(id);
  free(sc);
  free(q.json);
  return out;
}
