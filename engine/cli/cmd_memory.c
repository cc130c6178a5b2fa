/* cmd_memory: `engine memory list|show|revoke` (docs/memory.md): the
 * knowledge and preferences sessions proposed and a person approved, each
 * with its provenance, and their revocation (who, when, why), from the local
 * database or --server alike (client_ops.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "client_ops.h"
#include "json.h"
#include "render.h"
#include "session_view.h"
#include "util.h"

static const char *MEMORY_HELP =
    "usage: engine memory list [--kind knowledge|preferences] [--identity I] [--json] [--db PATH]\n"
    "       engine memory show ID [--json] [--db PATH]\n"
    "       engine memory revoke ID [--reason TEXT] [--db PATH]\n"
    "\n"
    "The entries of memory that sessions proposed (the tool propose_memory) and a\n"
    "person approved: knowledge (read by every session whose input names it) and\n"
    "preferences (of one identity, read by the sessions it starts). Each says where\n"
    "it comes from: the session, its request, the approver and when, the evidence.\n"
    "list shows revoked entries too (marked); revoke takes an entry out of every\n"
    "later session's context, recorded with who revoked it, when and why (with\n"
    "--server: the token needs the approve scope). Instructions are the operator's\n"
    "files (the input's memoryFile), not entries (see docs/memory.md).\n";

/* field key of an entry (JSON) as text for people ("-" when absent). */
static char *field(const char *json, size_t n, const char *key) {
  char *v = json_get_string(json, n, key);
  return v ? v : util_strdup("-");
}

static void one_line(char *s) {
  for (char *p = s; *p; p++)
    if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
}

typedef struct listing {
  int json, n;
} listing;

static int list_item(void *ud, const char *json, size_t n) {
  listing *l = ud;
  l->n++;
  if (l->json) {
    cli_put_json(stdout, util_fmt("%.*s", (int)n, json));
    return 0;
  }
  char *id = field(json, n, "id"), *kind = field(json, n, "kind"), *approver = field(json, n, "approver"),
       *session = field(json, n, "session_id"), *text = field(json, n, "text"), *identity = field(json, n, "identity");
  char when[40];
  view_time(json_get_int(json, n, "approved_at", 0), when, sizeof when);
  const char *v;
  size_t vn;
  int revoked = json_get(json, n, "revoked", &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0;
  one_line(text);
  if (l->n == 1) render_line(stdout, 0, "%-28s %-11s %-7s %-24s %-20s %-16s %s", "ID", "KIND", "STATUS", "APPROVED",
                             "BY", "SESSION", "TEXT");
  render_line(stdout, 0, "%-28s %-11s %-7s %-24s %-20s %-16s %.120s", id, kind, revoked ? "revoked" : "live", when,
              approver, session, text);
  if (strcmp(kind, "preferences") == 0) render_line(stdout, 0, "%-28s   of %s", "", identity);
  free(id), free(kind), free(approver), free(session), free(text), free(identity);
  return 0;
}

static int list_cmd(args *a, common *c) {
  const char *kind = NULL, *identity = NULL;
  int bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--kind", &bad))) kind = v;
    else if ((v = cli_flag_value(a, "--identity", &bad))) identity = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(MEMORY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return cli_die(EXIT_USAGE, "memory list: unexpected argument %s", cur);
  }
  if (kind && strcmp(kind, "knowledge") != 0 && strcmp(kind, "preferences") != 0)
    return cli_die(EXIT_USAGE, "memory list: unknown kind '%s' (knowledge or preferences)", kind);
  client *cl;
  if ((rc = client_open(c, &cl))) return rc;
  client_err e = {0};
  listing l = {c->json, 0};
  rc = cl->ops->memory_list(cl, kind, identity, list_item, &l, &e);
  client_close(cl);
  if (rc != 0) return client_fail(&e, "memory list: ");
  if (!l.n && !c->json) render_line(stdout, 0, "no memory entries%s", kind || identity ? " match" : " yet");
  return EXIT_OK;
}

/* An entry for people: one field a line. */
static void print_entry(const char *json) {
  size_t n = strlen(json);
  static const char *const keys[] = {"id", "kind", "identity", "text", "evidence", "session_id", "request_id",
                                     "approver", "approved_at", "revoked_at", "revoked_by", "revoke_reason"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    const char *k = keys[i];
    if (strcmp(k, "approved_at") == 0 || strcmp(k, "revoked_at") == 0) {
      int64_t ms = json_get_int(json, n, k, 0);
      if (!ms) continue;
      char when[40];
      view_time(ms, when, sizeof when);
      render_line(stdout, 0, "%-14s %s", k, when);
      continue;
    }
    char *v = json_get_string(json, n, k);
    if (v) render_line(stdout, 0, "%-14s %s", k, v);
    free(v);
  }
  const char *v;
  size_t vn;
  int revoked = json_get(json, n, "revoked", &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0;
  render_line(stdout, 0, "%-14s %s", "status", revoked ? "revoked: no session reads it" : "live");
}

static int id_cmd(args *a, common *c, int revoke) {
  const char *id = NULL, *reason = NULL, *what = revoke ? "memory revoke" : "memory show";
  int bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (revoke && (v = cli_flag_value(a, "--reason", &bad))) reason = v;
    else if (!revoke && cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(MEMORY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "%s: unknown option %s", what, cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "%s: unexpected argument %s", what, cur);
  }
  if (!id) return cli_die(EXIT_USAGE, "%s: missing ID (engine memory list shows them)", what);
  client *cl;
  if ((rc = client_open(c, &cl))) return rc;
  client_err e = {0};
  char *json = NULL;
  rc = revoke ? cl->ops->memory_revoke(cl, id, reason, &json, &e) : cl->ops->memory_show(cl, id, &json, &e);
  client_close(cl);
  if (rc != 0) return client_fail(&e, revoke ? "memory revoke: " : "memory show: ");
  if (revoke) {
    render_line(stdout, 0, "revoked memory entry %s: no later session reads it", id);
  } else if (c->json) {
    cli_put_json(stdout, json);
    json = NULL;
  } else {
    print_entry(json);
  }
  free(json);
  return EXIT_OK;
}

int cmd_memory(args *a, common *c) {
  if (a->i >= a->argc) return cli_die(EXIT_USAGE, "memory: missing list, show or revoke (see engine memory --help)");
  const char *sub = a->argv[a->i++];
  if (cli_is_flag(sub, "--help") || cli_is_flag(sub, "-h")) return fputs(MEMORY_HELP, stdout), EXIT_OK;
  if (strcmp(sub, "list") == 0) return list_cmd(a, c);
  if (strcmp(sub, "show") == 0) return id_cmd(a, c, 0);
  if (strcmp(sub, "revoke") == 0) return id_cmd(a, c, 1);
  return cli_die(EXIT_USAGE, "memory: unknown subcommand %s (list, show or revoke)", sub);
}
