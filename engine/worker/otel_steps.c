/* otel_steps: the span of each step the worker records, exported only once
 * the step's outcome is durable. A span is built where its outcome is
 * appended live (run_append, an attempt's end: never on a replay, which
 * appends nothing), held with the batch that appends it, and handed to the
 * exporter when that batch's commit succeeds; a lost batch drops its spans
 * with its events. Its ids come from the log (otel_export.h), so a restart,
 * a replay or another worker names a span the same; and as an outcome is
 * committed once, a span is exported once.
 *
 * An attempt that a crash cut short has no committed outcome and no span.
 * The attempt that runs after it is a new one (n + 1: attempt_begin writes
 * its task row with n + 1 before the body runs), so a new span id; an
 * attempt deferred before it began is run again as the same n, and it had
 * exported nothing. */
#include "worker.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approval.h"
#include "json.h"
#include "otel_spans.h"

int64_t otel_steps_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ----------------------------------------------------- a run's trace --- */

/* What every span of a run needs, read once from its WorkflowStarted (the
 * trace through trace_of_run, and what only the spans need: its start, its
 * script, the sampler's answer). */
typedef struct traced_run {
  otel_run_trace t;
  int sampled;
  int64_t started_ms;
  char *script;
} traced_run;

#define TRACES_KEPT 4096

static void free_trace(void *p) {
  traced_run *t = p;
  free(t->script);
  free(t);
}

/* The trace of workflow id's run, or NULL when the log does not show it. */
static traced_run *trace_of(engine *e, const char *id, int64_t run) {
  char *key = util_fmt("%s/%" PRId64, id, run);
  traced_run *t = strmap_get(&e->otel_traces, key);
  if (t) {
    free(key);
    return t;
  }
  hist_list h = {0};
  wf_row w;
  if (store_hist_get(e->st, id, run, 1, &h) != 1 || strcmp(h.v[0].type, "WorkflowStarted") != 0) {
    hist_list_free(&h);
    free(key);
    return NULL;
  }
  t = util_xcalloc(1, sizeof *t);
  otel_run_trace_of(id, run, h.v[0].payload, &t->t);
  t->started_ms = h.v[0].time;
  hist_list_free(&h);
  if (store_wf_get(e->st, id, &w) == 1) {
    t->script = util_strdup(w.script_name);
    wf_row_free(&w);
  } else {
    t->script = util_strdup("workflow");
  }
  t->sampled = otel_sampled(e->otel, t->t.trace_id, t->t.parent_sampled);
  if (e->otel_traces.len >= TRACES_KEPT) strmap_clear(&e->otel_traces, free_trace); /* bounded */
  strmap_put(&e->otel_traces, key, t);
  free(key);
  return t;
}

int otel_steps_traced(engine *e, const char *id, int64_t run) {
  if (!e->otel) return 0;
  traced_run *t = trace_of(e, id, run);
  return t && t->sampled;
}

void otel_steps_forget(engine *e) {
  strmap_clear(&e->otel_traces, free_trace);
}

/* ------------------------------------------- held until the commit --- */

/* The spans of one batch, exported once its commit's answer is ok. */
typedef struct held_spans {
  struct held_spans *next;
  engine *e;
  int64_t batch;
  char **spans;
  size_t n, cap;
} held_spans;

static void free_held(held_spans *h) {
  for (size_t i = 0; i < h->n; i++) free(h->spans[i]);
  free(h->spans);
  free(h);
}

/* engine_when_committed: the batch's answer. */
static void on_committed(void *ud, int ok) {
  held_spans *h = ud;
  engine *e = h->e;
  for (held_spans **p = &e->otel_held; *p; p = &(*p)->next) {
    if (*p == h) {
      *p = h->next;
      break;
    }
  }
  if (e->otel_open == h) e->otel_open = NULL;
  for (size_t i = 0; ok && e->otel && i < h->n; i++) otel_export_span(e->otel, h->spans[i], strlen(h->spans[i]));
  free_held(h);
}

/* Holds span (taken) with the batch being written. */
static void hold(engine *e, char *span) {
  if (!span) return;
  held_spans *h = e->otel_open;
  if (!h || h->batch != e->batch) { /* the first span of this batch: told of its commit */
    h = util_xcalloc(1, sizeof *h);
    h->e = e;
    h->batch = e->batch;
    h->next = e->otel_held;
    e->otel_held = h;
    e->otel_open = h;
    engine_when_committed(e, on_committed, h);
  }
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 8;
    h->spans = util_xrealloc(h->spans, h->cap * sizeof *h->spans);
  }
  h->spans[h->n++] = span;
}

void otel_steps_free(engine *e) {
  while (e->otel_held) {
    held_spans *h = e->otel_held;
    e->otel_held = h->next;
    free_held(h);
  }
  e->otel_open = NULL;
  strmap_clear(&e->otel_traces, free_trace);
  strmap_free(&e->otel_traces);
}

/* ------------------------------------------------------------ steps --- */

/* The run's trace when its spans are exported, else NULL. */
static traced_run *sampled_trace(engine *e, const char *id, int64_t run) {
  traced_run *t = trace_of(e, id, run);
  return t && t->sampled ? t : NULL;
}

/* The event at seq of the run (the command an outcome answers): 1 with *h. */
static int command_event(engine *e, const char *id, int64_t run, int64_t seq, hist_list *h) {
  return seq > 0 && store_hist_get(e->st, id, run, seq, h) == 1;
}

static void run_end(wfrun *r, const hist_event *ev, const char *status) {
  traced_run *t = sampled_trace(r->e, r->id, r->run);
  if (!t) return;
  otel_run_facts f = {.wf_id = r->id,
                      .run = r->run,
                      .script = t->script,
                      .status = status,
                      .result_or_error = ev->payload,
                      .annotation = r->vm ? wfvm_span(r->vm) : NULL, /* a run without a VM (terminated) said nothing */
                      .start_ns = t->started_ms * 1000000,
                      .end_ns = otel_steps_now_ns()};
  hold(r->e, otel_run_span(&t->t, &f, NULL));
}

/* An answer to a signal wait (received, timed out, cancelled): the span of
 * the wait when it was an approval's (the signal approval:RID). */
static void approval_end(wfrun *r, const hist_event *ev) {
  engine *e = r->e;
  if (ev->name && !approval_request_of(ev->name)) return; /* named: no read for the others */
  traced_run *t = sampled_trace(e, r->id, r->run);
  hist_list h = {0};
  if (!t || !command_event(e, r->id, r->run, ev->ref, &h)) goto out;
  const hist_event *wait = &h.v[0];
  const char *rid = wait->name ? approval_request_of(wait->name) : NULL;
  if (strcmp(wait->type, "SignalWaitStarted") != 0 || !rid) goto out;
  const char *outcome = "cancelled", *answer = NULL;
  if (strcmp(ev->type, "SignalReceived") == 0) {
    const char *v;
    size_t vn;
    answer = ev->payload;
    int approved = answer && json_get(answer, strlen(answer), "approved", &v, &vn) == 1 && vn == 4 &&
                   memcmp(v, "true", 4) == 0; /* anything else is a denial, as the session reads it */
    outcome = approved ? "approved" : "denied";
  } else if (strcmp(ev->type, "SignalTimedOut") == 0) {
    outcome = "timeout";
  }
  otel_approval_facts f = {.wf_id = r->id,
                           .run = r->run,
                           .seq = ev->ref,
                           .request_id = rid,
                           .outcome = outcome,
                           .answer = answer,
                           .start_ns = wait->time * 1000000,
                           .end_ns = otel_steps_now_ns()};
  hold(e, otel_approval_span(&t->t, &f, NULL));
out:
  hist_list_free(&h);
}

static void child_end(wfrun *r, const hist_event *ev) {
  engine *e = r->e;
  traced_run *t = sampled_trace(e, r->id, r->run);
  hist_list h = {0};
  if (!t || !command_event(e, r->id, r->run, ev->ref, &h) || strcmp(h.v[0].type, "ChildStarted") != 0) {
    hist_list_free(&h);
    return;
  }
  const char *p = h.v[0].payload;
  char *script = p ? json_get_string(p, strlen(p), "script") : NULL;
  otel_child_facts f = {.wf_id = r->id,
                        .run = r->run,
                        .seq = ev->ref,
                        .child = h.v[0].name ? h.v[0].name : "",
                        .script = script,
                        .outcome = ev->type,
                        .payload = ev->payload,
                        .start_ns = h.v[0].time * 1000000,
                        .end_ns = otel_steps_now_ns()};
  hold(e, otel_child_span(&t->t, &f, NULL));
  free(script);
  hist_list_free(&h);
}

void otel_steps_appended(wfrun *r, const hist_event *ev) {
  static const char *const ends[][2] = {{"WorkflowCompleted", "completed"},
                                        {"WorkflowFailed", "failed"},
                                        {"WorkflowCancelled", "cancelled"},
                                        {"ContinuedAsNew", "continued"}};
  for (size_t i = 0; i < sizeof ends / sizeof *ends; i++) {
    if (strcmp(ev->type, ends[i][0]) == 0) {
      run_end(r, ev, ends[i][1]);
      return;
    }
  }
  if (strcmp(ev->type, "SignalReceived") == 0 || strcmp(ev->type, "SignalTimedOut") == 0 ||
      strcmp(ev->type, "CommandCancelled") == 0) {
    approval_end(r, ev);
  } else if (strcmp(ev->type, "ChildCompleted") == 0 || strcmp(ev->type, "ChildFailed") == 0 ||
             strcmp(ev->type, "ChildCancelled") == 0) {
    child_end(r, ev);
  }
}

/* The command's option span_attributes (a JSON object), malloc'd, or NULL. */
static char *workflow_attrs(const char *payload) {
  const char *o, *v;
  size_t on, vn;
  if (!payload || !strstr(payload, "\"span_attributes\":")) return NULL;
  if (json_get(payload, strlen(payload), "options", &o, &on) != 1 || on == 0 || *o != '{') return NULL;
  if (json_get(o, on, "span_attributes", &v, &vn) != 1 || vn == 0 || *v != '{') return NULL;
  return util_fmt("%.*s", (int)vn, v);
}

void otel_steps_attempt(engine *e, const attempt *a, int ok, const char *error, int retry) {
  traced_run *t = sampled_trace(e, a->wf_id, a->run);
  if (!t) return;
  char *wattrs = workflow_attrs(a->payload);
  int64_t now = otel_steps_now_ns();
  otel_attempt_facts f = {.wf_id = a->wf_id,
                          .run = a->run,
                          .seq = a->seq,
                          .attempt = a->n,
                          .name = a->name,
                          .ok = ok,
                          .error = error,
                          .retry_scheduled = retry,
                          .workflow_attrs = wattrs,
                          .annotation = a->span_note,
                          .start_ns = a->begun_ns ? a->begun_ns : now, /* never begun: invalid options */
                          .end_ns = now};
  hold(e, otel_attempt_span(&t->t, &f, NULL));
  free(wattrs);
}
