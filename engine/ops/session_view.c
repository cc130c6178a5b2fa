/* session_view: a session as clients show it (session_view.h). */
#include "session_view.h"

#include <lauxlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "names.h"
#include "render.h"
#include "session_view_internal.h"
#include "util.h"

void view_time(int64_t ms, char *out, size_t n) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t k = strftime(out, n, "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out + k, n - k, ".%03dZ", (int)(ms % 1000));
}

/* ------------------------------------------------------------- events --- */

/* The generic line of an event is cut here (the JSON form has every byte). */
enum { EVENT_LINE_MAX = 1000 };

/* A field of the event payload as text (strings as they are, the rest as
 * JSON), rendered on one line in at most max - 1 bytes; "" when absent. */
const char *view_field(lua_State *L, int t, const char *k, char *out, size_t max) {
  out[0] = 0;
  lua_getfield(L, t, k);
  const char *s = NULL;
  size_t n = 0;
  if (lua_type(L, -1) == LUA_TSTRING) s = lua_tolstring(L, -1, &n);
  else if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TLIGHTUSERDATA) s = json_encode(L, -1, &n);
  if (s) render_buf(out, max, s, n, 0);
  lua_settop(L, t);
  return out;
}

/* Pushes the decoded text; 0, or -1 (nothing pushed) when it is not JSON. */
int view_decode_payload(lua_State *L, const char *text) {
  char err[8];
  if (!text) text = "null";
  return json_decode_safe(L, text, strlen(text), err, sizeof err);
}

/* One state for decoding payloads, kept for the process: a follower renders
 * many events, and show reads a field of each sandbox event. NULL when there
 * is no memory for it. */
static lua_State *fmt_L;
static void close_fmt(void) { lua_close(fmt_L); }

lua_State *view_fmt_state(void) {
  if (!fmt_L && (fmt_L = luaL_newstate())) atexit(close_fmt);
  if (fmt_L) lua_settop(fmt_L, 0);
  return fmt_L;
}

const char *view_json_field(const char *text, const char *key, char *out, size_t max) {
  *out = 0;
  lua_State *L = view_fmt_state();
  if (L && view_decode_payload(L, text) == 0 && lua_istable(L, -1)) view_field(L, lua_gettop(L), key, out, max);
  if (L) lua_settop(L, 0);
  return out;
}

static void add_line(ubuf *b, size_t max, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_line(ubuf *b, size_t max, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = util_vfmt(fmt, ap);
  va_end(ap);
  render_add(b, s, strlen(s), 0, max);
  free(s);
}

char *view_event_line(const domain_event *e) {
  lua_State *L = view_fmt_state();
  if (!L) return util_fmt("#%-4lld (out of memory)", (long long)e->seq);
  char t[40], a[400], b[400], c[400], d[400];
  view_time(e->time, t, sizeof t);
  ubuf out = {0};
  char *head = util_fmt("#%-4lld %s  ", (long long)e->seq, t + 11);
  ubuf_add(&out, head, strlen(head));
  free(head);
  const char *payload = e->payload ? e->payload : "";
  lua_settop(L, 0);
  const char *ty = e->type;
  if (view_decode_payload(L, e->payload) != 0 || !lua_istable(L, 1)) {
    ty = "";
  } else {
    /* the event's main field: without it the generic line says more */
    static const char *const main_field[][2] = {
        {"tool.requested", "tool"},       {"tool.result", "tool"},        {"approval.requested", "request_id"},
        {"approval.decided", "request_id"}, {"session.status", "status"}, {"limit.exceeded", "limit"},
        {"artifact.saved", "path"},       {"session.created", "objective"}, {"session.completed", "outcome"},
        {"signal.sent", "by"},            {"cancel.requested", "by"},     {"sandbox.reprovisioned", "host"}};
    for (size_t i = 0; i < sizeof main_field / sizeof main_field[0]; i++)
      if (strcmp(ty, main_field[i][0]) == 0 && !*view_field(L, 1, main_field[i][1], a, sizeof a)) {
        ty = "";
        break;
      }
  }
  if (strcmp(ty, "agent.message") == 0)
    add_line(&out, 0, "assistant: %s", *view_field(L, 1, "text", a, sizeof a) ? a : "(tool calls only)");
  else if (strcmp(ty, "tool.requested") == 0)
    add_line(&out, 0, "  -> %s %s", view_field(L, 1, "tool", a, sizeof a), view_field(L, 1, "args", b, sizeof b));
  else if (strcmp(ty, "tool.result") == 0)
    add_line(&out, 0, "  <- %s: %s", view_field(L, 1, "tool", a, sizeof a), view_field(L, 1, "content", b, sizeof b));
  else if (strcmp(ty, "approval.requested") == 0)
    add_line(&out, 0, "  ?? approval %s needed: %s %s", view_field(L, 1, "request_id", a, sizeof a),
             view_field(L, 1, "tool", b, sizeof b), view_field(L, 1, "reason", c, sizeof c));
  else if (strcmp(ty, "approval.decided") == 0)
    add_line(&out, 0, "  ok approval %s: %s%s%s %s", view_field(L, 1, "request_id", a, sizeof a),
             strcmp(view_field(L, 1, "approved", b, sizeof b), "true") == 0 ? "approved" : "denied",
             *view_field(L, 1, "approver", c, sizeof c) ? " by " : "", c, view_field(L, 1, "reason", d, sizeof d));
  else if (strcmp(ty, "signal.sent") == 0)
    add_line(&out, 0, "signal '%s' sent by %s", view_field(L, 1, "name", a, sizeof a),
             view_field(L, 1, "by", b, sizeof b));
  else if (strcmp(ty, "cancel.requested") == 0)
    add_line(&out, 0, "cancellation requested by %s", view_field(L, 1, "by", a, sizeof a));
  else if (strcmp(ty, "session.status") == 0)
    add_line(&out, 0, "[%s]", view_field(L, 1, "status", a, sizeof a));
  else if (strcmp(ty, "limit.exceeded") == 0)
    add_line(&out, 0, "!! limit %s reached (%s of %s)", view_field(L, 1, "limit", a, sizeof a),
             view_field(L, 1, "value", b, sizeof b), view_field(L, 1, "max", c, sizeof c));
  else if (strcmp(ty, "sandbox.reprovisioned") == 0)
    add_line(&out, 0, "!! sandbox provisioned again on %s (%s)", view_field(L, 1, "host", a, sizeof a),
             view_field(L, 1, "reason", b, sizeof b));
  else if (strcmp(ty, "artifact.saved") == 0)
    add_line(&out, 0, "  saved %s (%s bytes)", view_field(L, 1, "path", a, sizeof a),
             view_field(L, 1, "size", b, sizeof b));
  else if (strcmp(ty, "session.created") == 0)
    add_line(&out, 0, "session: %s", view_field(L, 1, "objective", a, sizeof a));
  else if (strcmp(ty, "session.completed") == 0)
    add_line(&out, 0, "completed (%s): %s", view_field(L, 1, "outcome", a, sizeof a),
             view_field(L, 1, "summary", b, sizeof b));
  else if (strcmp(ty, "session.failed") == 0)
    add_line(&out, 0, "failed: %s%s", view_field(L, 1, "error", a, sizeof a),
             view_field(L, 1, "problems", b, sizeof b));
  else
    add_line(&out, EVENT_LINE_MAX, "%-22s %s", e->type, payload);
  lua_settop(L, 0);
  ubuf_add(&out, "", 1);
  return out.p;
}

char *view_event_json(const domain_event *e) {
  char *sid = json_quote(e->session_id), *type = json_quote(e->type);
  char *out = util_fmt("{\"session_id\":%s,\"seq\":%lld,\"type\":%s,\"time\":%lld,\"payload\":%s}", sid,
                       (long long)e->seq, type, (long long)e->time, e->payload && *e->payload ? e->payload : "null");
  free(sid);
  free(type);
  return out;
}

/* ------------------------------------------------ from the API's JSON --- */

/* A member's JSON text as it was sent (malloc'd), NULL when absent or null. */
static char *member_raw(const char *json, size_t n, const char *key) {
  const char *v;
  size_t vn;
  if (json_get(json, n, key, &v, &vn) != 1 || (vn == 4 && memcmp(v, "null", 4) == 0)) return NULL;
  return util_fmt("%.*s", (int)vn, v);
}

char *view_json_member(const char *json, size_t n, const char *key) {
  char *raw = member_raw(json, n, key);
  if (raw && *raw == '"') {
    char *s = json_string(raw, strlen(raw));
    free(raw);
    return s;
  }
  return raw;
}

/* A member that is a JSON string, decoded ("" when absent or another type). */
static char *member_str(const char *json, size_t n, const char *key) {
  char *s = json_get_string(json, n, key);
  return s ? s : util_strdup("");
}

int view_event_parse(const char *json, size_t n, view_event *out) {
  memset(out, 0, sizeof *out);
  const char *v;
  size_t vn;
  out->session_id = json_get_string(json, n, "session_id");
  out->type = json_get_string(json, n, "type");
  if (!out->session_id || !out->type || json_get(json, n, "payload", &v, &vn) != 1) {
    view_event_free(out);
    return -1;
  }
  out->payload = util_fmt("%.*s", (int)vn, v);
  out->e = (domain_event){out->session_id, json_get_int(json, n, "seq", 0), out->type, json_get_int(json, n, "time", 0),
                          out->payload, NULL};
  return 0;
}

void view_event_free(view_event *ev) {
  free(ev->session_id);
  free(ev->type);
  free(ev->payload);
  memset(ev, 0, sizeof *ev);
}

char *view_live_head(int64_t step) { return util_fmt("~ live (step %lld): ", (long long)step); }

char *view_live_text(const char *json, size_t n, int64_t *step) {
  const char *p, *d;
  size_t pn, dn;
  if (json_get(json, n, "payload", &p, &pn) != 1 || json_get(p, pn, "delta", &d, &dn) != 1) return NULL;
  char *type = json_get_string(d, dn, "type"), *text = json_get_string(d, dn, "text"), *out = NULL;
  if (type && text && strcmp(type, "text") == 0) {
    *step = json_get_int(p, pn, "step", 0);
    out = render_str(text, 0, 0);
  }
  free(type);
  free(text);
  return out;
}

char *view_list_line(const char *item, size_t n) { return view_list_line_at(item, n, 0); }

char *view_list_line_at(const char *item, size_t n, int depth) {
  char t[40];
  view_time(json_get_int(item, n, "updated_at", 0), t, sizeof t);
  char *id = member_str(item, n, "id"), *st = member_str(item, n, "status"), *sc = member_str(item, n, "script");
  const char *q;
  size_t qn;
  char status[40];
  snprintf(status, sizeof status, "%s", st);
  if (json_get(item, n, "queue", &q, &qn) == 1 && json_get_int(q, qn, "position", 0) > 0)
    snprintf(status, sizeof status, "%s #%lld", st, (long long)json_get_int(q, qn, "position", 0)); /* place in line */
  ubuf out = {0};
  char shown[ENGINE_ID_MAX + 64];
  snprintf(shown, sizeof shown, "%*s%s%s", depth > 1 ? 2 * (depth - 1) : 0, "", depth > 0 ? "- " : "", id);
  add_line(&out, 0, "%-36s %-10s %4lld  %s  %s", shown, status, (long long)json_get_int(item, n, "run", 0), t, sc);
  ubuf_add(&out, "", 1);
  free(id);
  free(st);
  free(sc);
  return out.p;
}

char *view_hist_item_json(const hist_event *e) {
  char *ty = json_quote(e->type), *nm = json_quote(e->name ? e->name : "");
  char *out = util_fmt("{\"seq\":%lld,\"type\":%s,\"ref\":%lld,\"name\":%s,\"hash\":\"%s\",\"time\":%lld,"
                       "\"payload\":%s}",
                       (long long)e->seq, ty, (long long)e->ref, nm, e->hash ? e->hash : "", (long long)e->time,
                       e->payload && *e->payload ? e->payload : "null");
  free(ty);
  free(nm);
  return out;
}

char *view_hist_line(const char *item, size_t n) {
  char t[40], ref[32] = "", name[201], payload[201];
  view_time(json_get_int(item, n, "time", 0), t, sizeof t);
  int64_t r = json_get_int(item, n, "ref", 0);
  if (r) snprintf(ref, sizeof ref, "->#%lld", (long long)r);
  /* an event without a payload shows nothing there (the JSON says null) */
  char *ty = member_str(item, n, "type"), *nm = member_str(item, n, "name"), *pl = member_raw(item, n, "payload");
  render_buf(name, sizeof name, nm, strlen(nm), 0);
  render_buf(payload, sizeof payload, pl ? pl : "", pl ? strlen(pl) : 0, 0);
  ubuf out = {0};
  add_line(&out, 0, "#%-4lld %s  %-20s %-7s %-24s %s", (long long)json_get_int(item, n, "seq", 0), t + 11, ty, ref,
           name, payload);
  ubuf_add(&out, "", 1);
  free(ty);
  free(nm);
  free(pl);
  return out.p;
}

/* "label" and a JSON value: folded when fold says how, else on the line. */
static void add_value(ubuf *out, const char *label, const char *value, view_fold fold, void *ud) {
  char *folded = fold && (*value == '{' || *value == '[') ? fold(value, strlen(value), strlen(label), ud) : NULL;
  if (folded) {
    ubuf_add(out, label, strlen(label));
    ubuf_add(out, folded, strlen(folded));
  } else {
    add_line(out, 0, "%s%s", label, value);
  }
  free(folded);
}

/* One child of a summary's "children" as a line under "children:". */
static int add_child_line(void *ud, const char *v, size_t vn) {
  ubuf *out = ud;
  char *id = member_str(v, vn, "id"), *status = member_str(v, vn, "status"), *script = member_str(v, vn, "script"),
       *close = member_str(v, vn, "parent_close");
  const char *base = strrchr(script, '/');
  add_line(out, 0, "  %-32s %-10s %s%s%s", id, status, base ? base + 1 : script,
           strcmp(close, "terminate") == 0 || !*close ? "" : "  parent_close ", strcmp(close, "terminate") ? close : "");
  ubuf_add(out, "\n", 1);
  free(id);
  free(status);
  free(script);
  free(close);
  return 0;
}

/* "tree:" and what the workflow and every one under it spent (its "tree"):
 * sessions, tokens, the cost when known, how many still run. */
static void add_tree_line(ubuf *out, const char *json, size_t n) {
  const char *v, *c;
  size_t vn, cn;
  if (json_get(json, n, "tree", &v, &vn) != 1 || vn == 0 || *v != '{') return;
  char cost[64] = "";
  if (json_get(v, vn, "cost_usd", &c, &cn) == 1 && cn > 0 && cn < 40 && (*c == '-' || (*c >= '0' && *c <= '9'))) {
    char num[48];
    memcpy(num, c, cn);
    num[cn] = 0;
    snprintf(cost, sizeof cost, ", $%.4f", strtod(num, NULL));
  }
  int64_t running = json_get_int(v, vn, "running", 0);
  char run[48] = "";
  if (running > 0) snprintf(run, sizeof run, ", %lld running", (long long)running);
  add_line(out, 0, "tree:      %lld sessions, %lld tokens%s%s", (long long)json_get_int(v, vn, "sessions", 0),
           (long long)json_get_int(v, vn, "tokens", 0), cost, run);
  ubuf_add(out, "\n", 1);
}

/* A fork of it (its "forks"): the fork, its status, where and by whom. */
static int add_fork_line(void *ud, const char *v, size_t vn) {
  ubuf *out = ud;
  char *id = member_str(v, vn, "id"), *status = member_str(v, vn, "status"), *by = member_str(v, vn, "by");
  add_line(out, 0, "  %-32s %-10s at #%lld%s%s", id, status, (long long)json_get_int(v, vn, "seq", 0), *by ? " by " : "",
           by);
  ubuf_add(out, "\n", 1);
  free(id);
  free(status);
  free(by);
  return 0;
}

static int count_child(void *ud, const char *v, size_t vn) {
  (void)v;
  (void)vn;
  (*(int *)ud)++;
  return 0;
}

char *view_summary_text(const char *json, size_t n) { return view_summary_text_folded(json, n, NULL, NULL); }

char *view_summary_text_folded(const char *json, size_t n, view_fold fold, void *ud) {
  char *id = json_get_string(json, n, "id"), *status = json_get_string(json, n, "status");
  if (!id || !status) {
    free(id);
    free(status);
    return NULL;
  }
  char ct[40], ut[40], sandbox[512];
  view_time(json_get_int(json, n, "created_at", 0), ct, sizeof ct);
  view_time(json_get_int(json, n, "updated_at", 0), ut, sizeof ut);
  const char *v;
  size_t vn;
  int cancel = json_get(json, n, "cancel_requested", &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0;
  char *waiting = member_str(json, n, "waiting_on"), *script = member_str(json, n, "script"),
       *hash = member_str(json, n, "code_hash"), *input = member_raw(json, n, "input"),
       *result = member_raw(json, n, "result"), *error = view_json_member(json, n, "error"),
       *sb = member_raw(json, n, "sandbox"), *artifacts = member_raw(json, n, "artifacts");
  ubuf out = {0};
  add_line(&out, 0, "id:        %s", id);
  ubuf_add(&out, "\n", 1);
  add_line(&out, 0, "status:    %s%s", status, cancel ? " (cancel requested)" : "");
  ubuf_add(&out, "\n", 1);
  if (*waiting) {
    add_line(&out, 0, "waits on:  %s", waiting);
    ubuf_add(&out, "\n", 1);
  }
  add_line(&out, 0, "script:    %s (code %.12s)", script, hash);
  ubuf_add(&out, "\n", 1);
  add_line(&out, 0, "run:       %lld", (long long)json_get_int(json, n, "run", 0));
  ubuf_add(&out, "\n", 1);
  add_line(&out, 0, "created:   %s", ct);
  ubuf_add(&out, "\n", 1);
  add_line(&out, 0, "updated:   %s", ut);
  ubuf_add(&out, "\n", 1);
  add_value(&out, "input:     ", input ? input : "null", fold, ud);
  ubuf_add(&out, "\n", 1);
  /* a completed workflow has a result even when it is null (it returned nil) */
  if (result || strcmp(status, "completed") == 0) {
    add_value(&out, "result:    ", result ? result : "null", fold, ud);
    ubuf_add(&out, "\n", 1);
  }
  if (error) {
    add_value(&out, "error:     ", error, fold, ud);
    ubuf_add(&out, "\n", 1);
  }
  add_line(&out, 0, "history:   %lld events, %lld pending tasks, %lld buffered signals",
           (long long)json_get_int(json, n, "history_events", 0), (long long)json_get_int(json, n, "tasks", 0),
           (long long)json_get_int(json, n, "buffered_signals", 0));
  ubuf_add(&out, "\n", 1);
  if (sb) {
    char *folded = fold ? fold(sb, strlen(sb), 11, ud) : NULL;
    if (folded) {
      ubuf_add(&out, "sandbox:   ", 11);
      ubuf_add(&out, folded, strlen(folded));
      free(folded);
    } else {
      render_buf(sandbox, sizeof sandbox, sb, strlen(sb), 0); /* a line, not a dump */
      add_line(&out, 0, "sandbox:   %s", sandbox);
    }
    ubuf_add(&out, "\n", 1);
  }
  if (artifacts) {
    add_value(&out, "artifacts: ", artifacts, fold, ud);
    ubuf_add(&out, "\n", 1);
  }
  char *parent = member_str(json, n, "parent"), *children = member_raw(json, n, "children");
  if (*parent) {
    add_line(&out, 0, "parent:    %s", parent);
    ubuf_add(&out, "\n", 1);
  }
  const char *fv;
  size_t fvn;
  if (json_get(json, n, "forked_from", &fv, &fvn) == 1 && fvn && *fv == '{') {
    char *from = json_get_string(fv, fvn, "id"), *by = json_get_string(fv, fvn, "by");
    int64_t turn = json_get_int(fv, fvn, "turn", 0);
    char before[48] = "";
    if (turn > 0) snprintf(before, sizeof before, "before turn %lld, ", (long long)turn);
    add_line(&out, 0, "forked:    from %s at #%lld (%srun %lld, its history to event #%lld)%s%s", from ? from : "?",
             (long long)json_get_int(fv, fvn, "seq", 0), before, (long long)json_get_int(fv, fvn, "run", 0),
             (long long)json_get_int(fv, fvn, "at", 0), by && *by ? " by " : "", by && *by ? by : "");
    ubuf_add(&out, "\n", 1);
    free(from);
    free(by);
  }
  int nchildren = 0;
  if (children && json_each(children, strlen(children), count_child, &nchildren) == 0 && nchildren > 0) {
    add_line(&out, 0, "children:  %d", nchildren);
    ubuf_add(&out, "\n", 1);
    json_each(children, strlen(children), add_child_line, &out);
    add_tree_line(&out, json, n);
  }
  char *forks = member_raw(json, n, "forks");
  int nforks = 0;
  if (forks && json_each(forks, strlen(forks), count_child, &nforks) == 0 && nforks > 0) {
    add_line(&out, 0, "forks:     %d", nforks);
    ubuf_add(&out, "\n", 1);
    json_each(forks, strlen(forks), add_fork_line, &out);
  }
  free(forks);
  free(parent);
  free(children);
  ubuf_add(&out, "", 1);
  free(id);
  free(status);
  free(waiting);
  free(script);
  free(hash);
  free(input);
  free(result);
  free(error);
  free(sb);
  free(artifacts);
  return out.p;
}

/* ---------------------------------------------------------- deliveries --- */

char *view_delivery_json(const delivery_row *d) {
  char *qt = json_quote(d->trigger), *qd = *d->delivery ? json_quote(d->delivery) : util_strdup("null"),
       *qo = json_quote(d->outcome), *qw = d->wf_id ? json_quote(d->wf_id) : util_strdup("null"),
       *qx = d->detail ? json_quote(d->detail) : util_strdup("null");
  char *out = util_fmt("{\"received_at\":%lld,\"trigger\":%s,\"delivery\":%s,\"outcome\":%s,\"status\":%d,"
                       "\"workflow_id\":%s,\"detail\":%s}",
                       (long long)d->received_at, qt, qd, qo, d->status, qw, qx);
  free(qt), free(qd), free(qo), free(qw), free(qx);
  return out;
}
