/* otel_spans: a step's facts -> its OTLP span JSON (otel_spans.h). */
#include "otel_spans.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "trace_start.h"
#include "util.h"

/* ------------------------------------------------------------ attributes --- */

/* Sets key to the AnyValue JSON value (taken), text its string (taken, or NULL). */
static void attrs_set(otel_attrs *a, const char *key, char *value, char *text) {
  for (size_t i = 0; i < a->n; i++) {
    if (strcmp(a->keys[i], key) != 0) continue;
    free(a->values[i]);
    free(a->texts[i]);
    a->values[i] = value;
    a->texts[i] = text;
    return;
  }
  if (a->n == a->cap) {
    a->cap = a->cap ? a->cap * 2 : 16;
    a->keys = util_xrealloc(a->keys, a->cap * sizeof *a->keys);
    a->values = util_xrealloc(a->values, a->cap * sizeof *a->values);
    a->texts = util_xrealloc(a->texts, a->cap * sizeof *a->texts);
  }
  a->keys[a->n] = util_strdup(key);
  a->values[a->n] = value;
  a->texts[a->n] = text;
  a->n++;
}

static char *string_value(const char *v) {
  char *q = json_quote(v);
  char *out = util_fmt("{\"stringValue\":%s}", q);
  free(q);
  return out;
}

void otel_attrs_str(otel_attrs *a, const char *key, const char *v) {
  if (v) attrs_set(a, key, string_value(v), util_strdup(v));
}

void otel_attrs_int(otel_attrs *a, const char *key, int64_t v) {
  attrs_set(a, key, util_fmt("{\"intValue\":\"%" PRId64 "\"}", v), NULL);
}

void otel_attrs_bool(otel_attrs *a, const char *key, int v) {
  attrs_set(a, key, util_fmt("{\"boolValue\":%s}", v ? "true" : "false"), NULL);
}

const char *otel_attrs_text(const otel_attrs *a, const char *key) {
  for (size_t i = 0; i < a->n; i++)
    if (strcmp(a->keys[i], key) == 0) return a->texts[i];
  return NULL;
}

void otel_attrs_free(otel_attrs *a) {
  for (size_t i = 0; i < a->n; i++) {
    free(a->keys[i]);
    free(a->values[i]);
    free(a->texts[i]);
  }
  free(a->keys);
  free(a->values);
  free(a->texts);
  *a = (otel_attrs){0};
}

static int is_integer_text(const char *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (v[i] == '.' || v[i] == 'e' || v[i] == 'E') return 0;
  return 1;
}

static char *any_value(const char *v, size_t n, int nested);

/* A JSON value kept as its text, a string. */
static char *text_value(const char *v, size_t n) {
  char *text = util_fmt("%.*s", (int)n, v);
  char *out = string_value(text);
  free(text);
  return out;
}

typedef struct array_acc {
  ubuf b;
  int first;
} array_acc;

static int add_element(void *ud, const char *v, size_t n) {
  array_acc *acc = ud;
  char *item = any_value(v, n, 1);
  if (!item) return 0; /* a null element: left out */
  if (!acc->first) ubuf_add(&acc->b, ",", 1);
  ubuf_add(&acc->b, item, strlen(item));
  acc->first = 0;
  free(item);
  return 0;
}

/* The OTLP AnyValue of the JSON value v[0..n), malloc'd; NULL for null or
 * what is not JSON. An array's arrays and objects are their JSON text
 * (nested): a backend reads a flat array of scalars best. */
static char *any_value(const char *v, size_t n, int nested) {
  if (n == 0) return NULL;
  switch (v[0]) {
    case '"': {
      char *s = json_string(v, n);
      if (!s) return NULL;
      char *out = string_value(s);
      free(s);
      return out;
    }
    case 't': return util_strdup("{\"boolValue\":true}");
    case 'f': return util_strdup("{\"boolValue\":false}");
    case 'n': return NULL;
    case '[':
      if (nested) return text_value(v, n); /* an array in an array: its text */
      {
        array_acc acc = {{0}, 1};
        static const char open[] = "{\"arrayValue\":{\"values\":[";
        ubuf_add(&acc.b, open, sizeof open - 1);
        if (json_each(v, n, add_element, &acc) != 0) {
          ubuf_free(&acc.b);
          return NULL;
        }
        ubuf_add(&acc.b, "]}}", 4); /* with the NUL */
        return acc.b.p;
      }
    case '{': return text_value(v, n);
    default: {
      int64_t i;
      if (is_integer_text(v, n) && json_int(v, n, &i) == 0) return util_fmt("{\"intValue\":\"%" PRId64 "\"}", i);
      /* a number as JSON wrote it: JSON and OTLP/JSON's double agree */
      return util_fmt("{\"doubleValue\":%.*s}", (int)n, v);
    }
  }
}

/* Walks the members of the object obj[0..n): cb(key, value, value length). */
static int each_member(const char *obj, size_t n, void (*cb)(void *ud, const char *key, const char *v, size_t vn),
                       void *ud) {
  const char *end = obj + n, *s = obj;
  while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
  if (s >= end || *s != '{' || json_skip(s, end) == NULL) return -1; /* well-formed before anything is added */
  s++;
  for (;;) {
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == ',')) s++;
    if (s >= end || *s == '}') return 0;
    const char *k = s, *kend = json_skip(k, end);
    char *key = kend ? json_string(k, (size_t)(kend - k)) : NULL;
    if (!key) return -1;
    s = kend;
    while (s < end && *s != ':') s++;
    s++;
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) s++;
    const char *vend = json_skip(s, end);
    if (!vend) {
      free(key);
      return -1;
    }
    cb(ud, key, s, (size_t)(vend - s));
    free(key);
    s = vend;
  }
}

static void add_json_member(void *ud, const char *key, const char *v, size_t vn) {
  otel_attrs *a = ud;
  char *value = any_value(v, vn, 0);
  if (!value) return;
  char *text = vn && v[0] == '"' ? json_string(v, vn) : NULL;
  attrs_set(a, key, value, text);
}

int otel_attrs_json(otel_attrs *a, const char *obj, size_t n) {
  return each_member(obj, n, add_json_member, a);
}

/* ----------------------------------------------------------------- span --- */

char *otel_span_json(const otel_span *s, size_t *len) {
  ubuf b = {0};
  char *name = json_quote(s->name ? s->name : "");
  char *head = util_fmt("{\"traceId\":\"%s\",\"spanId\":\"%s\"", s->trace_id, s->span_id);
  ubuf_add(&b, head, strlen(head));
  free(head);
  if (s->parent_id && *s->parent_id) {
    char *p = util_fmt(",\"parentSpanId\":\"%s\"", s->parent_id);
    ubuf_add(&b, p, strlen(p));
    free(p);
  }
  /* start <= end, whatever two clocks said (an event's time in ms, the wall clock in ns) */
  int64_t end = s->end_ns < s->start_ns ? s->start_ns : s->end_ns;
  char *mid = util_fmt(",\"name\":%s,\"kind\":%d,\"startTimeUnixNano\":\"%" PRId64 "\",\"endTimeUnixNano\":\"%" PRId64
                       "\",\"attributes\":[",
                       name, s->kind, s->start_ns, end);
  ubuf_add(&b, mid, strlen(mid));
  free(mid);
  free(name);
  for (size_t i = 0; s->attrs && i < s->attrs->n; i++) {
    char *key = json_quote(s->attrs->keys[i]);
    char *item = util_fmt("%s{\"key\":%s,\"value\":%s}", i ? "," : "", key, s->attrs->values[i]);
    ubuf_add(&b, item, strlen(item));
    free(item);
    free(key);
  }
  ubuf_add(&b, "]", 1);
  if (s->error_type) {
    char *msg = json_quote(s->error_message ? s->error_message : s->error_type);
    char *st = util_fmt(",\"status\":{\"code\":2,\"message\":%s}", msg);
    ubuf_add(&b, st, strlen(st));
    free(st);
    free(msg);
  }
  ubuf_add(&b, "}", 2); /* with the NUL */
  if (len) *len = b.n - 1;
  return b.p;
}

/* ---------------------------------------------------------------- trace --- */

void otel_run_trace_of(const char *wf_id, int64_t run, const char *started_payload, otel_run_trace *out) {
  *out = (otel_run_trace){.parent_sampled = -1};
  trace_ctx ctx; /* the one reading of a start's trace (trace_start.h) */
  trace_of_run(wf_id, started_payload, &ctx);
  memcpy(out->trace_id, ctx.trace_id, TRACE_ID_HEX);
  memcpy(out->parent, ctx.span_id, SPAN_ID_HEX);
  out->parent_sampled = ctx.sampled;
  span_id_of_step(wf_id, run, 0, "run", out->run_span);
}

/* ---------------------------------------------------------------- steps --- */

/* The engine's own attributes of a step of a run. */
static void step_attrs(otel_attrs *a, const char *wf_id, int64_t run, int64_t seq) {
  otel_attrs_str(a, "engine.workflow.id", wf_id);
  otel_attrs_int(a, "engine.workflow.run", run);
  if (seq > 0) otel_attrs_int(a, "engine.step.seq", seq);
}

/* An annotation's member as text (name, kind), malloc'd, or NULL. */
static char *annotation_str(const char *annotation, const char *key) {
  return annotation ? json_get_string(annotation, strlen(annotation), key) : NULL;
}

/* The annotation's "attributes" object merged into a. */
static void annotation_attrs(otel_attrs *a, const char *annotation) {
  const char *v;
  size_t vn;
  if (annotation && json_get(annotation, strlen(annotation), "attributes", &v, &vn) == 1 && vn && v[0] == '{')
    otel_attrs_json(a, v, vn);
}

/* An error object's type and message (malloc'd; NULL when absent). */
static void error_of(const char *json, char **type, char **message) {
  *type = *message = NULL;
  if (!json || *json != '{') return;
  *type = json_get_string(json, strlen(json), "type");
  *message = json_get_string(json, strlen(json), "message");
}

/* The script's name without its directory and ".lua". */
static char *script_stem(const char *script) {
  const char *base = script ? strrchr(script, '/') : NULL;
  base = base ? base + 1 : script ? script : "workflow";
  size_t n = strlen(base);
  if (n > 4 && strcmp(base + n - 4, ".lua") == 0) n -= 4;
  return util_fmt("%.*s", (int)n, base);
}

char *otel_run_span(const otel_run_trace *t, const otel_run_facts *f, size_t *len) {
  otel_attrs a = {0};
  char *stem = script_stem(f->script);
  otel_attrs_str(&a, "gen_ai.operation.name", "invoke_workflow");
  otel_attrs_str(&a, "gen_ai.workflow.name", stem);
  step_attrs(&a, f->wf_id, f->run, 0);
  otel_attrs_str(&a, "engine.workflow.script", f->script);
  otel_attrs_str(&a, "engine.workflow.status", f->status);
  annotation_attrs(&a, f->annotation); /* an agent session: invoke_agent, gen_ai.agent.*, ... */
  char *etype = NULL, *emsg = NULL;
  if (strcmp(f->status, "failed") == 0) {
    error_of(f->result_or_error, &etype, &emsg);
    if (!etype) etype = util_strdup("_OTHER");
    otel_attrs_str(&a, "error.type", etype);
  }
  char *name = annotation_str(f->annotation, "name");
  if (!name) {
    const char *op = otel_attrs_text(&a, "gen_ai.operation.name");
    const char *agent = otel_attrs_text(&a, "gen_ai.agent.name");
    if (op && strcmp(op, "invoke_agent") == 0)
      name = util_fmt("invoke_agent %s", agent ? agent : stem);
    else
      name = util_fmt("invoke_workflow %s", stem);
  }
  otel_span s = {t->trace_id, t->run_span, t->parent, name, OTEL_KIND_INTERNAL,
                 f->start_ns, f->end_ns,   etype,     emsg, &a};
  char *out = otel_span_json(&s, len);
  free(name);
  free(etype);
  free(emsg);
  free(stem);
  otel_attrs_free(&a);
  return out;
}

char *otel_attempt_span(const otel_run_trace *t, const otel_attempt_facts *f, size_t *len) {
  otel_attrs a = {0};
  char id[SPAN_ID_HEX], kind_name[32];
  snprintf(kind_name, sizeof kind_name, "attempt %d", f->attempt);
  span_id_of_step(f->wf_id, f->run, f->seq, kind_name, id);
  step_attrs(&a, f->wf_id, f->run, f->seq);
  otel_attrs_str(&a, "engine.activity.name", f->name);
  otel_attrs_int(&a, "engine.activity.attempt", f->attempt);
  char key[512];
  snprintf(key, sizeof key, "%s/%" PRId64 "/%" PRId64, f->wf_id, f->run, f->seq);
  otel_attrs_str(&a, "engine.activity.idempotency_key", key);
  if (f->workflow_attrs && *f->workflow_attrs == '{') otel_attrs_json(&a, f->workflow_attrs, strlen(f->workflow_attrs));
  annotation_attrs(&a, f->annotation); /* the activity knows best what it did */
  char *etype = NULL, *emsg = NULL;
  if (!f->ok) {
    error_of(f->error, &etype, &emsg);
    if (!etype) etype = util_strdup("_OTHER");
    otel_attrs_bool(&a, "engine.activity.retry_scheduled", f->retry_scheduled);
  } else {
    /* a result that says it failed (a tool's ok = false): the activity says so */
    const char *v;
    size_t vn;
    if (f->annotation && json_get(f->annotation, strlen(f->annotation), "error", &v, &vn) == 1 && vn && v[0] == '{') {
      char *ej = util_fmt("%.*s", (int)vn, v);
      error_of(ej, &etype, &emsg);
      free(ej);
    }
  }
  if (etype) otel_attrs_str(&a, "error.type", etype);
  char *name = annotation_str(f->annotation, "name");
  char *kind = annotation_str(f->annotation, "kind");
  otel_span s = {t->trace_id,
                 id,
                 t->run_span,
                 name ? name : f->name,
                 kind && strcmp(kind, "client") == 0 ? OTEL_KIND_CLIENT : OTEL_KIND_INTERNAL,
                 f->start_ns,
                 f->end_ns,
                 etype,
                 emsg,
                 &a};
  char *out = otel_span_json(&s, len);
  free(name);
  free(kind);
  free(etype);
  free(emsg);
  otel_attrs_free(&a);
  return out;
}

char *otel_approval_span(const otel_run_trace *t, const otel_approval_facts *f, size_t *len) {
  otel_attrs a = {0};
  char id[SPAN_ID_HEX];
  span_id_of_step(f->wf_id, f->run, f->seq, "approval", id);
  step_attrs(&a, f->wf_id, f->run, f->seq);
  otel_attrs_str(&a, "engine.approval.request_id", f->request_id);
  otel_attrs_str(&a, "engine.approval.outcome", f->outcome);
  if (f->answer && *f->answer == '{') {
    char *approver = json_get_string(f->answer, strlen(f->answer), "approver");
    char *reason = json_get_string(f->answer, strlen(f->answer), "reason");
    otel_attrs_str(&a, "engine.approval.approver", approver);
    otel_attrs_str(&a, "engine.approval.reason", reason);
    free(approver);
    free(reason);
  }
  otel_span s = {t->trace_id, id,   t->run_span, "await_approval", OTEL_KIND_INTERNAL, f->start_ns, f->end_ns,
                 NULL,        NULL, &a};
  char *out = otel_span_json(&s, len);
  otel_attrs_free(&a);
  return out;
}

char *otel_child_span(const otel_run_trace *t, const otel_child_facts *f, size_t *len) {
  otel_attrs a = {0};
  char id[SPAN_ID_HEX];
  span_id_of_step(f->wf_id, f->run, f->seq, "child", id);
  step_attrs(&a, f->wf_id, f->run, f->seq);
  otel_attrs_str(&a, "engine.child.id", f->child);
  otel_attrs_str(&a, "engine.child.script", f->script);
  otel_attrs_str(&a, "engine.child.outcome", f->outcome);
  char *etype = NULL, *emsg = NULL;
  if (strcmp(f->outcome, "ChildFailed") == 0) {
    error_of(f->payload, &etype, &emsg);
    if (!etype) etype = util_strdup("_OTHER");
    otel_attrs_str(&a, "error.type", etype);
  }
  char *stem = script_stem(f->script ? f->script : f->child);
  char *name = util_fmt("child %s", stem);
  otel_span s = {t->trace_id, id, t->run_span, name, OTEL_KIND_INTERNAL, f->start_ns, f->end_ns, etype, emsg, &a};
  char *out = otel_span_json(&s, len);
  free(name);
  free(stem);
  free(etype);
  free(emsg);
  otel_attrs_free(&a);
  return out;
}
