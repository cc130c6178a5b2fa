/* cmd_grants: `engine grants ID`, a session's grants (docs/grants.md) and
 * each use and denial of them, read from its domain events (the local
 * database or --server, through the client's events): what the session
 * holds (session.created's grants, or review.started's), what it asked for
 * that its starter did not hold, and every grant.used and grant.denied. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "client_ops.h"
#include "json.h"
#include "render.h"
#include "util.h"

static const char *GRANTS_HELP =
    "usage: engine grants ID [--json] [--db PATH]\n"
    "\n"
    "A session's grants: what it may do on the trusted side (its input's grants\n"
    "within its starter's; every grant for a session started from the local CLI),\n"
    "what it asked for that its starter does not hold, and each use and denial of\n"
    "a grant, in order (see docs/grants.md); locally or with --server. --json\n"
    "prints one object: grants (\"*\" for every grant, null for a session from\n"
    "before grants), not_held, and decisions (each grant.used or grant.denied\n"
    "event's seq, type and payload).\n";

typedef struct grants_out {
  lua_State *L;
  ubuf json; /* the decisions, for --json */
  char *grants, *not_held; /* JSON, from the first event that says them */
  int json_mode, decisions;
  int64_t last; /* the last seq read: the next page starts after it */
} grants_out;

/* payload's field key as JSON (malloc'd), NULL when absent. */
static char *field_json(lua_State *L, const char *payload, const char *key) {
  char err[256];
  int top = lua_gettop(L);
  char *out = NULL;
  if (payload && json_decode_safe(L, payload, strlen(payload), err, sizeof err) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, key);
    if (!lua_isnil(L, -1)) {
      size_t n;
      const char *t = json_encode(L, -1, &n);
      out = util_strdup(t);
    }
  }
  lua_settop(L, top);
  return out;
}

/* A payload's string field (for people), "" when absent; malloc'd. */
static char *field_text(lua_State *L, const char *payload, const char *key) {
  char err[256];
  int top = lua_gettop(L);
  char *out = NULL;
  if (payload && json_decode_safe(L, payload, strlen(payload), err, sizeof err) == 0 && lua_istable(L, -1)) {
    lua_getfield(L, -1, key);
    if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) out = util_strdup(lua_tostring(L, -1));
  }
  lua_settop(L, top);
  return out ? out : util_strdup("");
}

static void on_event(void *ud, const domain_event *e) {
  grants_out *o = ud;
  o->last = e->seq;
  if (!o->grants && (strcmp(e->type, "session.created") == 0 || strcmp(e->type, "review.started") == 0)) {
    o->grants = field_json(o->L, e->payload, "grants");
    if (o->grants) o->not_held = field_json(o->L, e->payload, "grants_not_held");
    return;
  }
  int used = strcmp(e->type, "grant.used") == 0, denied = strcmp(e->type, "grant.denied") == 0;
  if (!used && !denied) return;
  o->decisions++;
  if (o->json_mode) {
    char *item = util_fmt("%s{\"seq\":%lld,\"type\":\"%s\",\"payload\":%s}", o->json.n ? "," : "", (long long)e->seq,
                          e->type, e->payload ? e->payload : "null");
    ubuf_add(&o->json, item, strlen(item));
    free(item);
    return;
  }
  char *tool = field_text(o->L, e->payload, "tool"), *need = field_text(o->L, e->payload, "need");
  if (used) {
    char *grant = field_text(o->L, e->payload, "grant"), *use = field_text(o->L, e->payload, "use");
    render_line(stdout, 0, "#%-5lld used    %s: %s by grant %s (use %s)", (long long)e->seq, tool, need, grant, use);
    free(grant);
    free(use);
  } else {
    char *why = field_text(o->L, e->payload, "reason");
    render_line(stdout, 0, "#%-5lld denied  %s: %s", (long long)e->seq, tool, why);
    free(why);
  }
  free(tool);
  free(need);
}

/* Every event, page by page: 0, or -1 with e. */
static int read_all(client *cl, const char *id, grants_out *o, client_err *e) {
  for (int more = 1; more;)
    if (cl->ops->events(cl, id, o->last, on_event, o, &more, e) != 0) return -1;
  return 0;
}

/* A JSON list of strings ("[\"a\",\"b\"]") or "*", for people. */
static void print_list(lua_State *L, const char *label, const char *json, const char *key) {
  char err[256];
  if (!json) return;
  int top = lua_gettop(L);
  if (json_decode_safe(L, json, strlen(json), err, sizeof err) != 0) return;
  if (lua_type(L, -1) == LUA_TSTRING) {
    render_line(stdout, 0, "%s every grant (started from the local CLI, or an API without tokens)", label);
  } else if (lua_istable(L, -1)) {
    lua_Integer n = luaL_len(L, -1);
    if (n == 0) render_line(stdout, 0, "%s none", label);
    else printf("%s\n", label);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, -1, i);
      if (key && lua_istable(L, -1)) {
        lua_getfield(L, -1, key);
        render_line(stdout, 0, "  %s", lua_tostring(L, -1) ? lua_tostring(L, -1) : "?");
        lua_pop(L, 1);
      } else if (lua_tostring(L, -1)) {
        render_line(stdout, 0, "  %s", lua_tostring(L, -1));
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
}

int cmd_grants(args *a, common *c) {
  const char *id = NULL;
  int bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(GRANTS_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "grants: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "grants: unexpected argument %s", cur);
  }
  if (bad) return EXIT_USAGE;
  if (!id) return cli_die(EXIT_USAGE, "grants: missing ID (see engine grants --help)");
  client *cl;
  if ((rc = client_open(c, &cl)) != 0) return rc;
  grants_out o = {luaL_newstate(), {0}, NULL, NULL, c->json, 0, 0};
  if (!o.L) {
    client_close(cl);
    return cli_die(EXIT_FAILED, "grants: out of memory");
  }
  client_err e;
  rc = EXIT_OK;
  if (!o.json_mode) {
    /* people: read once for the grants, print them, then the decisions */
    grants_out head = {o.L, {0}, NULL, NULL, 1, 0, 0};
    if (read_all(cl, id, &head, &e) != 0) rc = -1;
    ubuf_free(&head.json);
    if (rc == EXIT_OK) {
      if (!head.grants)
        render_line(stdout, 0, "grants: none recorded (a session from before grants, or not an agent session)");
      else print_list(o.L, "grants:", head.grants, NULL);
      print_list(o.L, "asked for, not held by its starter:", head.not_held && strcmp(head.not_held, "null") != 0
                                                                  ? head.not_held : NULL, "grant");
      if (head.decisions) printf("uses and denials:\n");
      else printf("uses and denials: none\n");
      if (read_all(cl, id, &o, &e) != 0) rc = -1;
    }
    free(head.grants);
    free(head.not_held);
  } else {
    if (read_all(cl, id, &o, &e) != 0) rc = -1;
    if (rc == EXIT_OK) {
      ubuf_add(&o.json, "", 1);
      char *qid = json_quote(id);
      cli_put_json(stdout, util_fmt("{\"id\":%s,\"grants\":%s,\"not_held\":%s,\"decisions\":[%s]}", qid,
                                    o.grants ? o.grants : "null", o.not_held ? o.not_held : "[]", o.json.p));
      free(qid);
    }
  }
  ubuf_free(&o.json);
  free(o.grants);
  free(o.not_held);
  lua_close(o.L);
  client_close(cl);
  return rc ? client_fail(&e, NULL) : EXIT_OK;
}
