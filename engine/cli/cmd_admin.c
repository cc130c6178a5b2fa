/* cmd_admin: the commands that operate the engine on this machine, on the
 * local database only (--server refuses them): serve (the worker, and the
 * HTTP API), gc, policy check, trigger check|test|deliveries, token, quota,
 * schedule, migrate. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "cli_internal.h"
#include "config.h"
#include "engine.h"
#include "json.h"
#include "log.h"
#include "migrate.h"
#include "render.h"
#include "schedules.h"
#include "sdnotify.h"
#include "tokens.h"
#include "util.h"

/* ---------------------------------------------------------------- serve --- */

static const char *SERVE_HELP =
    "usage: engine serve [--db PATH] [--listen ADDR] [--workflows DIR]\n"
    "                    [--log-format text|json]\n"
    "\n"
    "Runs the worker for every workflow in the database: recovers whatever a crash\n"
    "interrupted, runs activities and timers, and wakes workflows when `engine\n"
    "signal` or `engine cancel` write to the database. One worker per SQLite\n"
    "database; on PostgreSQL several share it, each workflow under a lease.\n"
    "It says \"engine: serving ...\" once ready (the policy set loaded, the API\n"
    "listening), and tells systemd so (Type=notify; WATCHDOG=1 when asked).\n"
    "\n"
    "SIGHUP reloads the configuration file's reloadable settings, the policy set\n"
    "and the webhook triggers (a set that does not load leaves the one in force).\n"
    "SIGTERM or Ctrl-C stops: no new requests, those in flight are answered, the\n"
    "current batch is committed, within ENGINE_STOP_TIMEOUT_S (default 10 s);\n"
    "activities still running run again at the next start. Nothing is lost. A\n"
    "second signal stops at once.\n"
    "\n"
    "--log-format json writes the log as one JSON object per line (ts, level,\n"
    "pid, msg) for log shippers; text (the default) is \"engine: [LEVEL: ]MESSAGE\".\n"
    "ENGINE_LOG_FORMAT sets it too.\n"
    "\n"
    "--listen ADDR also answers the HTTP API on ADDR (127.0.0.1:7420, [::1]:7420;\n"
    "port 0 picks a free one, printed at start). An address that is not loopback\n"
    "needs an API token first (engine token create). POST /v1/workflows starts\n"
    "scripts of --workflows DIR (else the workflows_dir setting, else ./workflows\n"
    "when it exists, else the installed workflows). ADDR defaults to the listen\n"
    "setting (engine config). No TLS: put a reverse proxy\n"
    "in front for that.\n";

/* Raises the open-file limit to its hard limit: each HTTP connection is one. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* engine serve's side of the worker's life as a service (engine.h). */
typedef struct serving {
  engine *e;
  api *http;
  const char *db;
} serving;

static void serve_ready(void *ud, char *status, size_t statuslen) {
  serving *s = ud;
  char buf[1024];
  const char *shown = engine_db_shown(s->db, buf, sizeof buf);
  if (s->http) {
    log_msg(LOGL_INFO, "serving %s (pid %d), API on %s", shown, (int)getpid(), api_url(s->http));
    snprintf(status, statuslen, "serving %s, API on %s", shown, api_url(s->http));
  } else {
    log_msg(LOGL_INFO, "serving %s (pid %d)", shown, (int)getpid());
    snprintf(status, statuslen, "serving %s", shown);
  }
}

static void serve_drained(void *ud) { engine_stop(((serving *)ud)->e); }

static int serve_stopping(void *ud) {
  serving *s = ud;
  return api_drain(s->http, serve_drained, s);
}

int cmd_serve(args *a, common *c) {
  char shown[1024]; /* c->db in messages (engine_db_shown) */
  int bad = 0;
  const char *listen = getenv("ENGINE_LISTEN"), *workflows = cli_workflows_dir(), *log_format = NULL;
  int workflows_default = !getenv("ENGINE_WORKFLOWS_DIR");
  if (listen && !*listen) listen = NULL;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--listen", &bad))) listen = v, config_flag("listen", v);
    else if ((v = cli_flag_value(a, "--workflows", &bad))) workflows = v, workflows_default = 0, config_flag("workflows_dir", v);
    else if ((v = cli_flag_value(a, "--log-format", &bad))) log_format = v, config_flag("log_format", v);
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(SERVE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return cli_die(EXIT_USAGE, "serve: unknown argument %s (see engine serve --help)", cur);
  }
  char err[1024], holder[256], why[768];
  if (log_configure(log_format, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "serve: %s", err);
  sdnotify_init(); /* NOTIFY_SOCKET and the watchdog's variables out of the environment before any thread */
  if (cli_unwritable(c->db, why, sizeof why)) return cli_die(EXIT_USAGE, "serve: cannot serve %s: %s", engine_db_shown(c->db, shown, sizeof shown), why);
  int lockfd = engine_lock(c->db, "serve", holder, sizeof holder);
  if (lockfd < 0) return cli_die(EXIT_USAGE, "serve: %s is already served by %s", engine_db_shown(c->db, shown, sizeof shown), holder);
  api *http = listen ? api_new() : NULL;
  engine_config cfg = {.db_path = c->db};
  if (http) api_engine_config(http, &cfg);
  engine *e;
  if (engine_open(&e, &cfg, err, sizeof err) != 0) {
    api_free(http);
    engine_unlock(lockfd);
    return cli_die(EXIT_USAGE, "%s", err);
  }
  if (http) {
    raise_nofile();
    api_options o = {listen, workflows, workflows_default};
    if (api_listen(http, e, &o, err, sizeof err) != 0) {
      api_stop(http);
      engine_free(e);
      api_free(http);
      engine_unlock(lockfd);
      return cli_die(EXIT_USAGE, "serve: %s", err);
    }
  }
  /* "serving" and READY=1 once the worker is ready: after recovery and
   * worker.start (the policy set, the triggers), the API listening */
  serving sv = {e, http, c->db};
  engine_service svc = {serve_ready, serve_stopping, &sv};
  engine_serve_as_service(e, &svc);
  schedules *sched = schedules_start(e);
  if (http) api_set_schedules(http, sched);
  int rc = engine_run(e);
  schedules_stop(sched);
  api_stop(http);
  engine_free(e);
  api_free(http);
  engine_unlock(lockfd);
  if (rc == 0) log_msg(LOGL_INFO, "stopped");
  else log_msg(LOGL_ERROR, "stopped while the store could not be written (what was not committed runs again at the next start)");
  return rc == 0 ? EXIT_OK : EXIT_FAILED;
}

/* --------------------------------------------------------------- policy --- */

static const char *POLICY_HELP =
    "usage: engine policy check [DIR]\n"
    "\n"
    "Loads the policy set (DIR, else $ENGINE_POLICIES_DIR, else policies/) the way\n"
    "sessions do and reports its hash and files, or the file and line of the first\n"
    "error (exit 2). A broken set is never used: sessions keep the last good one.\n";

/* Runs the check hook of the Lua library (policy_check, trigger_check) on
 * dir (NULL: its own default) and prints its report; exit 2 with the report
 * when it is not ok. */
static int check_hook(const char *hook, const char *dir, const char *what) {
  char report[16384];
  /* no dir: the hook's default (a JSON null would reach it as a value) */
  char *q = dir ? json_quote(dir) : NULL, *args_json = q ? util_fmt("{\"dir\":%s}", q) : util_strdup("{}");
  int rc = engine_maintenance(NULL, hook, args_json, report, sizeof report);
  free(q);
  free(args_json);
  char ok[8];
  if (rc || strcmp(view_json_field(report, "ok", ok, sizeof ok), "true") != 0)
    return cli_die(EXIT_USAGE, "%s: %s", what, report);
  cli_put_json(stdout, util_strdup(report));
  return EXIT_OK;
}

int cmd_policy(args *a, common *c) {
  const char *pos[2] = {NULL, NULL};
  int rc = cli_parse_simple(a, c, POLICY_HELP, pos, 2, 1);
  if (rc || c->help) return rc;
  if (strcmp(pos[0], "check") != 0) return cli_die(EXIT_USAGE, "policy: unknown subcommand '%s' (see --help)", pos[0]);
  return check_hook("policy_check", pos[1], "policy check");
}

/* -------------------------------------------------------------- trigger --- */

static const char *TRIGGER_HELP =
    "usage: engine trigger check [DIR]\n"
    "       engine trigger test NAME --body FILE [--headers FILE] [--dir DIR] [--no-verify]\n"
    "       engine trigger deliveries [NAME] [--limit N] [--json] [--db PATH]\n"
    "\n"
    "check: loads the trigger scripts (DIR, else $ENGINE_TRIGGERS_DIR, else\n"
    "  workflows/triggers) the way `engine serve --listen` does and lists their routes\n"
    "  (POST /hooks/NAME), verifiers and whether each secret is set; the file and line\n"
    "  of the first error exit 2.\n"
    "test: what a delivery of FILE's bytes (and the headers in --headers, one\n"
    "  \"Name: value\" per line) to /hooks/NAME would do, verified with the secret in\n"
    "  the environment unless --no-verify, without starting anything.\n"
    "deliveries: the newest deliveries (of NAME; \"*\" is every request to no trigger)\n"
    "  with their outcome: started, existing, duplicate, ignored or rejected.\n";


const char *cli_triggers_dir(void) {
  static char dir[PATH_MAX + 16];
  const char *d = getenv("ENGINE_TRIGGERS_DIR");
  if (d && *d) return d;
  snprintf(dir, sizeof dir, "%s/triggers", cli_workflows_dir());
  return dir;
}

/* "Name: value" lines as a JSON list of [name, value] pairs, or NULL with err. */
static char *header_pairs(const char *path, char *err, size_t errlen) {
  size_t len;
  char *text = util_read_file(path, &len);
  if (!text) {
    util_seterr(err, errlen, "--headers %s: %s", path, strerror(errno));
    return NULL;
  }
  ubuf b = {0};
  ubuf_add(&b, "[", 1);
  int n = 0, lineno = 0;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    lineno++;
    size_t l = strlen(line);
    if (l && line[l - 1] == '\r') line[--l] = 0;
    if (!l || strncmp(line, "HTTP/", 5) == 0 || strncmp(line, "POST ", 5) == 0) continue; /* a status or request line */
    char *colon = strchr(line, ':');
    if (!colon || colon == line) {
      util_seterr(err, errlen, "--headers %s:%d: not a \"Name: value\" line", path, lineno);
      free(text);
      ubuf_free(&b);
      return NULL;
    }
    *colon = 0;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    char *qk = json_quote(line), *qv = json_quote(v), *pair = util_fmt("%s[%s,%s]", n++ ? "," : "", qk, qv);
    ubuf_add(&b, pair, strlen(pair));
    free(qk), free(qv), free(pair);
  }
  ubuf_add(&b, "]", 2);
  free(text);
  return b.p;
}

static int trigger_test(args *a, common *c) {
  const char *name = NULL, *body_file = NULL, *headers_file = NULL, *dir = cli_triggers_dir();
  int bad = 0, verify = 1;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--body", &bad))) body_file = v;
    else if ((v = cli_flag_value(a, "--headers", &bad))) headers_file = v;
    else if ((v = cli_flag_value(a, "--dir", &bad))) dir = v;
    else if (cli_is_flag(cur, "--no-verify")) verify = 0;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "trigger test: unknown option %s (see --help)", cur);
    else if (!name) name = cur;
    else return cli_die(EXIT_USAGE, "trigger test: unexpected argument %s", cur);
  }
  (void)c;
  if (!name || !body_file) return cli_die(EXIT_USAGE, "trigger test: NAME and --body FILE are required (see --help)");
  char err[1024];
  size_t len;
  char *body = util_read_file(body_file, &len);
  if (!body) return cli_die(EXIT_USAGE, "trigger test: --body %s: %s", body_file, strerror(errno));
  if (json_check_text(body, len, "the body", err, sizeof err) != 0) {
    free(body);
    return cli_die(EXIT_USAGE, "trigger test: %s (a webhook body is UTF-8 text)", err);
  }
  char *pairs = headers_file ? header_pairs(headers_file, err, sizeof err) : util_strdup("[]");
  if (!pairs) {
    free(body);
    return cli_die(EXIT_USAGE, "trigger test: %s", err);
  }
  char *qd = json_quote(dir), *qn = json_quote(name), *qb = json_quote(body);
  char *args_json = util_fmt("{\"dir\":%s,\"name\":%s,\"header_list\":%s,\"body\":%s,\"now\":%lld,\"verify\":%s}", qd,
                             qn, pairs, qb, (long long)(util_now_ms() / 1000), verify ? "true" : "false");
  free(qd), free(qn), free(qb), free(pairs), free(body);
  enum { REPORT_BIG = 4 << 20 };
  char *report = util_xmalloc(REPORT_BIG);
  int rc = engine_maintenance(NULL, "trigger_test", args_json, report, REPORT_BIG);
  free(args_json);
  if (rc) {
    int code = cli_die(EXIT_USAGE, "trigger test: %s", report);
    free(report);
    return code;
  }
  char outcome[16];
  view_json_field(report, "outcome", outcome, sizeof outcome);
  cli_put_json(stdout, util_strdup(report));
  free(report);
  return strcmp(outcome, "rejected") == 0 ? EXIT_USAGE : EXIT_OK;
}

typedef struct delivery_out {
  int json, n;
} delivery_out;

static int print_delivery(void *ud, const delivery_row *d) {
  delivery_out *o = ud;
  if (o->json) {
    char *j = view_delivery_json(d), *out = json_for_output(j, strlen(j));
    printf("%s%s", o->n ? "," : "", out);
    free(j);
    free(out);
  } else {
    char when[40];
    view_time(d->received_at, when, sizeof when);
    if (!o->n) printf("%-24s  %-12s %-38s %-9s %6s  %-30s %s\n", "RECEIVED", "TRIGGER", "DELIVERY", "OUTCOME", "STATUS", "WORKFLOW", "DETAIL");
    char line[2048];
    snprintf(line, sizeof line, "%-24s  %-12s %-38s %-9s %6d  %-30s %s", when, d->trigger, *d->delivery ? d->delivery : "-",
             d->outcome, d->status, d->wf_id ? d->wf_id : "-", d->detail ? d->detail : "");
    render_line(stdout, 0, "%s", line); /* the sender chose the delivery id and the text: shown inert */
  }
  o->n++;
  return 0;
}

static int trigger_deliveries(args *a, common *c) {
  const char *name = NULL;
  int bad = 0;
  int64_t limit = 50;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if ((v = cli_flag_value(a, "--limit", &bad))) {
      char *end;
      limit = strtoll(v, &end, 10);
      if (*end || limit < 1 || limit > 10000) return cli_die(EXIT_USAGE, "trigger deliveries: --limit must be 1 to 10000");
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "trigger deliveries: unknown option %s (see --help)", cur);
    else if (!name) name = cur;
    else return cli_die(EXIT_USAGE, "trigger deliveries: unexpected argument %s", cur);
  }
  store *st;
  int rc;
  if ((rc = cli_open_existing(c->db, &st))) return rc;
  delivery_out o = {c->json, 0};
  if (c->json) fputs("[", stdout);
  rc = store_delivery_list(st, name, (int)limit, print_delivery, &o);
  if (c->json) fputs("]\n", stdout);
  if (rc != STORE_OK) {
    int code = cli_die(EXIT_USAGE, "trigger deliveries: %s", store_errmsg(st));
    store_close(st);
    return code;
  }
  store_close(st);
  if (!c->json && !o.n) fprintf(stderr, "no deliveries%s%s\n", name ? " for trigger " : "", name ? name : "");
  return EXIT_OK;
}

int cmd_trigger(args *a, common *c) {
  if (a->i >= a->argc || cli_asks_help(a)) {
    fputs(TRIGGER_HELP, a->i >= a->argc ? stderr : stdout);
    return a->i >= a->argc ? EXIT_USAGE : EXIT_OK;
  }
  const char *sub = a->argv[a->i++];
  if (strcmp(sub, "test") == 0) return trigger_test(a, c);
  if (strcmp(sub, "deliveries") == 0) return trigger_deliveries(a, c);
  if (strcmp(sub, "check") != 0) return cli_die(EXIT_USAGE, "trigger: unknown subcommand '%s' (see --help)", sub);
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, TRIGGER_HELP, pos, 1, 0);
  if (rc || c->help) return rc;
  return check_hook("trigger_check", pos[0] ? pos[0] : cli_triggers_dir(), "trigger check");
}

/* ------------------------------------------------------------------- gc --- */

static const char *GC_HELP =
    "usage: engine gc [--db PATH]\n"
    "\n"
    "Removes sandbox containers (running or not) of this database whose session has\n"
    "finished or is unknown to it, with their workspaces. `serve` and `start` do\n"
    "this at start-up too. Prints what it removed (JSON).\n";

int cmd_gc(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, GC_HELP, pos, 0, 0);
  if (rc || c->help) return rc;
  store *st;
  if ((rc = cli_open_existing(c->db, &st))) return rc;
  char report[8192];
  rc = engine_maintenance(st, "gc", NULL, report, sizeof report);
  store_close(st);
  if (rc) return cli_die(EXIT_USAGE, "gc: %s", report);
  cli_put_json(stdout, util_strdup(report));
  return EXIT_OK;
}

/* ---------------------------------------------------------------- token --- */

static const char *TOKEN_HELP =
    "usage: engine token create NAME --scopes SCOPE[,SCOPE...] [--grant G]... [--db PATH]\n"
    "       engine token list [--json] [--db PATH]\n"
    "       engine token revoke NAME [--db PATH]\n"
    "\n"
    "API tokens for the HTTP API of `engine serve --listen`. create prints the new\n"
    "token on stdout, once: the database keeps only its SHA-256, so it cannot be\n"
    "shown again. A request presents it as \"Authorization: Bearer TOKEN\" and acts\n"
    "as token:NAME. Scopes: read (every GET), start, signal, approve, cancel, admin\n"
    "(all of them). A NAME is 1-64 bytes of A-Z a-z 0-9 . _ @ -, starting with a\n"
    "letter or digit; the name of a revoked token can be given to a new one.\n"
    "--grant G (repeatable) gives the token a grant: what the sessions it starts\n"
    "may do on the trusted side, KIND:[RESOURCE:]ACTION[;until=TIME][;uses=N]\n"
    "(github:repo/acme/api:pr.review.draft, http:api.example.test:GET; see\n"
    "docs/grants.md). A token without --grant holds no grant.\n"
    "list shows every token (name, scopes, grants, created, live or revoked), never\n"
    "a secret.\n"
    "create creates the database if there is none; list and revoke need one.\n";

static int token_list_row(void *ud, const token_info *t) {
  common *c = ud;
  char scopes[128], ct[40], rt[40] = "";
  token_scopes_format(t->scopes, scopes, sizeof scopes);
  view_time(t->created_at, ct, sizeof ct);
  if (t->revoked_at) view_time(t->revoked_at, rt, sizeof rt);
  if (c->json) {
    ubuf list = {0};
    for (char *p = scopes, *next; p && *p; p = next) {
      next = strchr(p, ',');
      if (next) *next++ = 0;
      ubuf_add(&list, list.n ? ",\"" : "\"", list.n ? 2 : 1);
      ubuf_add(&list, p, strlen(p)); /* scope names are plain ASCII words */
      ubuf_add(&list, "\"", 1);
    }
    ubuf_add(&list, "", 1);
    char *name = json_quote(t->name), *revoked = t->revoked_at ? util_fmt("%lld", (long long)t->revoked_at) : NULL;
    /* the stored list was written by token_grants_check: a JSON list of strings */
    cli_put_json(stdout, util_fmt("{\"name\":%s,\"scopes\":[%s],\"grants\":%s,\"created_at\":%lld,\"revoked_at\":%s,"
                                  "\"status\":\"%s\"}",
                              name, list.p, t->grants && *t->grants ? t->grants : "[]", (long long)t->created_at,
                              revoked ? revoked : "null", t->revoked_at ? "revoked" : "live"));
    free(name);
    free(revoked);
    ubuf_free(&list);
  } else {
    /* the grants, as their JSON list says them: "a","b" without the brackets */
    const char *g = t->grants && strlen(t->grants) > 2 ? t->grants : NULL;
    char *shown = g ? util_fmt("%.*s", (int)(strlen(g) - 2), g + 1) : util_strdup("-");
    if (t->revoked_at)
      render_line(stdout, 0, "%-24s %-40s %-24s revoked %s  grants %s", t->name, scopes, ct, rt, shown);
    else
      render_line(stdout, 0, "%-24s %-40s %-24s live  grants %s", t->name, scopes, ct, shown);
    free(shown);
  }
  return 0;
}

/* list and revoke need a database (open_existing, with a hint for tokens). */
static int open_tokens_db(const char *db, store **st) {
  if (engine_db_missing(db))
    return cli_die(EXIT_USAGE, "no database at %s (engine token create makes one, or pass --db)", db);
  return cli_open_existing(db, st);
}

int cmd_token(args *a, common *c) {
  const char *sub = a->i < a->argc ? a->argv[a->i++] : NULL, *name = NULL, *scopes_csv = NULL;
  const char *grant_list[256];
  int ngrants = 0;
  if (!sub) return fputs(TOKEN_HELP, stderr), EXIT_USAGE;
  if (cli_is_flag(sub, "--help") || cli_is_flag(sub, "-h")) return fputs(TOKEN_HELP, stdout), EXIT_OK;
  int create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0, revoke = strcmp(sub, "revoke") == 0;
  if (!create && !list && !revoke)
    return cli_die(EXIT_USAGE, "token: unknown subcommand '%s' (create, list or revoke; see engine token --help)", sub);
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (create && (v = cli_flag_value(a, "--scopes", &bad))) scopes_csv = v;
    else if (create && (v = cli_flag_value(a, "--grant", &bad))) {
      if (ngrants == (int)(sizeof grant_list / sizeof *grant_list))
        return cli_die(EXIT_USAGE, "token create: more than %d --grant", (int)(sizeof grant_list / sizeof *grant_list));
      grant_list[ngrants++] = v;
    }
    else if (list && cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(TOKEN_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1])
      return cli_die(EXIT_USAGE, "token %s: unknown option %s (see engine token --help)", sub, cur);
    else if (!list && !name) name = cur;
    else return cli_die(EXIT_USAGE, "token %s: unexpected argument %s", sub, cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024];
  store *st;
  int rc;
  if (list) {
    if ((rc = open_tokens_db(c->db, &st))) return rc;
    if (!c->json) printf("%-24s %-40s %-24s %s\n", "NAME", "SCOPES", "CREATED", "STATUS");
    if (token_list(st, token_list_row, c) != 0) return cli_read_failed(st, "the tokens", c->db);
    store_close(st);
    return EXIT_OK;
  }
  if (!name) return cli_die(EXIT_USAGE, "token %s: missing NAME (see engine token --help)", sub);
  /* everything is checked before the database is touched (or created) */
  if (token_check_name(name, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "%s", err);
  if (revoke) {
    if ((rc = open_tokens_db(c->db, &st))) return rc;
    rc = token_revoke(st, name, err, sizeof err);
    store_close(st);
    if (rc < 0) return cli_die(EXIT_USAGE, "token revoke: %s", err);
    if (rc == 0) return cli_die(EXIT_USAGE, "token revoke: no live token named %s (see engine token list)", name);
    render_line(stderr, DIE_MAX, "engine: token %s revoked; requests with it are refused from now on", name);
    return EXIT_OK;
  }
  unsigned scopes;
  if (!scopes_csv)
    return cli_die(EXIT_USAGE, "token create: --scopes is required (a comma-separated list of read, start, signal, "
                           "approve, cancel, admin)");
  if (token_scopes_parse(scopes_csv, &scopes, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "token create: %s", err);
  char *grants = NULL;
  if (ngrants > 0 && token_grants_check(grant_list, ngrants, &grants, err, sizeof err) != 0)
    return cli_die(EXIT_USAGE, "token create: %s", err);
  if (cli_unwritable(c->db, err, sizeof err)) {
    free(grants);
    return cli_die(EXIT_USAGE, "token create: cannot write %s: %s", c->db, err);
  }
  if (store_open(c->db, 0, &st, err, sizeof err) != STORE_OK) {
    free(grants);
    return cli_die(EXIT_USAGE, "%s", err);
  }
  char secret[TOKEN_SECRET_MAX], shown[128];
  rc = token_create_granted(st, name, scopes, grants, secret, err, sizeof err);
  store_close(st);
  free(grants);
  if (rc) return cli_die(EXIT_USAGE, "token create: %s", err);
  printf("%s\n", secret); /* the token's alphabet is plain ASCII: nothing to render */
  fflush(stdout);
  memset(secret, 0, sizeof secret);
  token_scopes_format(scopes, shown, sizeof shown);
  render_line(stderr, DIE_MAX,
              "engine: created token %s (scopes %s, %d grant%s); it is not shown again: keep it now. Requests with "
              "it act as token:%s",
              name, shown, ngrants, ngrants == 1 ? "" : "s", name);
  return EXIT_OK;
}

/* ------------------------------------------------------------- schedule --- */

static const char *SCHEDULE_HELP =
    "usage: engine schedule create NAME --cron EXPR [--tz ZONE] --workflow FILE\n"
    "                              [--input JSON] [--overlap POLICY]\n"
    "                              [--catchup-window DUR] [--jitter DUR] [--db PATH]\n"
    "       engine schedule list [--json] [--db PATH]\n"
    "       engine schedule pause|resume|trigger|delete NAME [--db PATH]\n"
    "\n"
    "Starts workflow FILE whenever cron expression EXPR fires in time zone ZONE (an\n"
    "IANA name, default UTC), while `engine serve` runs. EXPR has five fields\n"
    "(minute hour day-of-month month day-of-week) or six with a leading second;\n"
    "@daily and the like work too. Each fire starts the workflow with id\n"
    "sched:NAME:FIRETIME (20261201T090000Z, the fire's UTC time), so a fire never\n"
    "starts twice, also across a crash.\n"
    "\n"
    "--overlap says what a fire does while the schedule's previous workflow still\n"
    "runs: skip (the default; counted in SKIPPED), buffer_one (starts when the\n"
    "previous one ends; at most one waits), allow_all, cancel_other (cancels the\n"
    "running one and starts). --catchup-window (default 1m): fires missed while no\n"
    "engine served, or while one waited, run when at most this late; older ones are\n"
    "skipped and counted. --jitter delays each fire by a fixed offset below DUR,\n"
    "the same on every restart. DUR: 30s, 5m, 2h, 1d.\n"
    "\n"
    "pause stops the fires; resume starts again from now (fires while paused are\n"
    "not caught up); trigger starts the workflow now as sched:NAME:manual-TIME\n"
    "whatever the overlap policy; delete removes the schedule (its workflows stay).\n";

/* ms as 2026-12-01T09:00:00Z, or "-" for 0. */
static void iso_utc(int64_t ms, char *out, size_t n) {
  if (!ms) {
    snprintf(out, n, "-");
    return;
  }
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int schedule_list_row(void *ud, const schedule_row *r) {
  common *c = ud;
  char next[40], last[40];
  iso_utc(r->next_fire_at ? schedule_fire_at(r->name, r->next_fire_at, r->jitter_ms) : 0, next, sizeof next);
  iso_utc(r->last_fire_at, last, sizeof last);
  if (c->json) {
    cli_put_json(stdout, schedule_json(r));
  } else {
    render_line(stdout, 0, "%-20s %-18s %-16s %-12s %-7s %-21s %-21s %7lld %s", r->name, r->cron, r->tz, r->overlap,
                r->paused ? "paused" : "active", r->paused ? "-" : next, last, (long long)r->skipped_count,
                r->script);
  }
  return 0;
}

int cmd_schedule(args *a, common *c) {
  const char *sub = a->i < a->argc ? a->argv[a->i++] : NULL, *name = NULL;
  if (!sub) return fputs(SCHEDULE_HELP, stderr), EXIT_USAGE;
  if (cli_is_flag(sub, "--help") || cli_is_flag(sub, "-h")) return fputs(SCHEDULE_HELP, stdout), EXIT_OK;
  static const char *const subs[] = {"create", "list", "pause", "resume", "trigger", "delete", NULL};
  int known = 0;
  for (const char *const *k = subs; *k; k++) known |= strcmp(*k, sub) == 0;
  if (!known)
    return cli_die(EXIT_USAGE, "schedule: unknown subcommand '%s' (create, list, pause, resume, trigger or delete; see "
                           "engine schedule --help)", sub);
  int create = strcmp(sub, "create") == 0, list = strcmp(sub, "list") == 0, bad = 0;
  schedule_spec sp = {.tz = "UTC", .overlap = "skip", .catchup_window_ms = SCHEDULE_DEFAULT_CATCHUP_MS};
  const char *input_spec = "{}", *catchup = NULL, *jitter = NULL;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (create && (v = cli_flag_value(a, "--cron", &bad))) sp.cron = v;
    else if (create && (v = cli_flag_value(a, "--tz", &bad))) sp.tz = v;
    else if (create && (v = cli_flag_value(a, "--workflow", &bad))) sp.script = v;
    else if (create && (v = cli_flag_value(a, "--input", &bad))) input_spec = v;
    else if (create && (v = cli_flag_value(a, "--overlap", &bad))) sp.overlap = v;
    else if (create && (v = cli_flag_value(a, "--catchup-window", &bad))) catchup = v;
    else if (create && (v = cli_flag_value(a, "--jitter", &bad))) jitter = v;
    else if (list && cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(SCHEDULE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1])
      return cli_die(EXIT_USAGE, "schedule %s: unknown option %s (see engine schedule --help)", sub, cur);
    else if (!list && !name) name = cur;
    else return cli_die(EXIT_USAGE, "schedule %s: unexpected argument %s", sub, cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024], shown[1024];
  store *st;
  int rc;
  if (list) {
    if (engine_db_missing(c->db))
      return cli_die(EXIT_USAGE, "no database at %s (engine schedule create makes one, or pass --db)", c->db);
    if ((rc = cli_open_existing(c->db, &st))) return rc;
    if (!c->json)
      printf("%-20s %-18s %-16s %-12s %-7s %-21s %-21s %7s %s\n", "NAME", "CRON", "TZ", "OVERLAP", "STATE",
             "NEXT (UTC)", "LAST (UTC)", "SKIPPED", "WORKFLOW");
    if (store_schedule_list(st, schedule_list_row, c) != 0) return cli_read_failed(st, "the schedules", c->db);
    store_close(st);
    return EXIT_OK;
  }
  if (!name) return cli_die(EXIT_USAGE, "schedule %s: missing NAME (see engine schedule --help)", sub);
  if (schedule_check_name(name, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "%s", err);
  int64_t now = util_now_ms();
  if (create) {
    sp.name = name;
    if (!sp.cron) return cli_die(EXIT_USAGE, "schedule create: --cron EXPR is required (see engine schedule --help)");
    if (!sp.script) return cli_die(EXIT_USAGE, "schedule create: --workflow FILE is required");
    if (catchup && schedule_parse_duration(catchup, &sp.catchup_window_ms, err, sizeof err) != 0)
      return cli_die(EXIT_USAGE, "--catchup-window: %s", err);
    if (jitter && schedule_parse_duration(jitter, &sp.jitter_ms, err, sizeof err) != 0)
      return cli_die(EXIT_USAGE, "--jitter: %s", err);
    char *input = NULL;
    if ((rc = cli_read_input(input_spec, &input))) return rc;
    sp.input = input;
    if (schedule_check(&sp, now, err, sizeof err) != 0) { /* before the database is touched (or created) */
      free(input);
      return cli_die(EXIT_USAGE, "schedule create: %s", err);
    }
    if (cli_unwritable(c->db, err, sizeof err)) {
      free(input);
      return cli_die(EXIT_USAGE, "schedule create: cannot write %s: %s", engine_db_shown(c->db, shown, sizeof shown), err);
    }
    if (store_open(c->db, 0, &st, err, sizeof err) != STORE_OK) {
      free(input);
      return cli_die(EXIT_USAGE, "%s", err);
    }
    rc = schedule_create(st, &sp, now, err, sizeof err);
    free(input);
    store_close(st);
    if (rc) return cli_die(EXIT_USAGE, "schedule create: %s", err);
    render_line(stderr, DIE_MAX, "engine: schedule %s created; engine serve starts its fires", name);
    return EXIT_OK;
  }
  if ((rc = cli_open_existing(c->db, &st))) return rc;
  char id[ENGINE_ID_MAX + 1] = "", who[300];
  if (strcmp(sub, "pause") == 0 || strcmp(sub, "resume") == 0) {
    rc = schedule_set_paused(st, name, strcmp(sub, "pause") == 0, now, err, sizeof err);
  } else if (strcmp(sub, "trigger") == 0) {
    cli_local_identity(who, sizeof who);
    rc = schedule_trigger(st, name, who, now, id, sizeof id, err, sizeof err);
  } else {
    rc = schedule_delete(st, name, err, sizeof err);
  }
  store_close(st);
  if (rc) return cli_die(EXIT_USAGE, "schedule %s: %s", sub, err);
  if (*id) render_line(stdout, 0, "%s", id);
  else render_line(stderr, DIE_MAX, "engine: schedule %s: %s", name,
                   strcmp(sub, "pause") == 0 ? "paused" : strcmp(sub, "resume") == 0 ? "resumed" : "deleted");
  return EXIT_OK;
}

/* ---------------------------------------------------------------- quota --- */

static const char *QUOTA_HELP =
    "usage: engine quota list [--json] [--db PATH]\n"
    "\n"
    "Shows the quotas of the engine's limits file ($ENGINE_LIMITS, else limits.lua\n"
    "beside the database) and what each identity used: identity, quota, period (the\n"
    "UTC day or month), used and limit, one row per counter the sessions kept\n"
    "(earlier periods too) and one for each identity the file names that has used\n"
    "nothing this period. --json prints one object per row: {identity, quota,\n"
    "period, used, limit} (no limit when the file sets none). A session over a\n"
    "quota ends with limit.exceeded.\n";

typedef struct counters {
  ubuf b;
  int n;
} counters;

static int add_counter(void *ud, const counter_row *r) {
  counters *l = ud;
  char *name = json_quote(r->name), num[40];
  snprintf(num, sizeof num, "%.17g", r->value);
  char *item = util_fmt("%s{\"name\":%s,\"value\":%s}", l->n++ ? "," : "", name, num);
  ubuf_add(&l->b, item, strlen(item));
  free(item);
  free(name);
  return 0;
}

static int print_quota_json(void *ud, const char *v, size_t n) {
  (void)ud;
  cli_put_json(stdout, util_fmt("%.*s", (int)n, v));
  return 0;
}

static int print_quota_line(void *ud, const char *v, size_t n) {
  (void)ud;
  char *line = json_string(v, n);
  if (line) render_line(stdout, 0, "%s", line);
  free(line);
  return 0;
}

/* The counters come from the store (prefix total:quota:); the limits and the
 * table from the worker's quota_list hook (lua/activities/worker.lua), which
 * reads the limits file as sessions do. */
int cmd_quota(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, QUOTA_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  if (strcmp(pos[0], "list") != 0) return cli_die(EXIT_USAGE, "quota: unknown subcommand '%s' (list; see --help)", pos[0]);
  store *st;
  if ((rc = cli_open_existing(c->db, &st))) return rc;
  counters l = {{0}, 0};
  ubuf_add(&l.b, "{\"counters\":[", 13);
  if (store_counter_list(st, "total:quota:", add_counter, &l) != STORE_OK) {
    ubuf_free(&l.b);
    return cli_read_failed(st, "the quota counters", c->db);
  }
  ubuf_add(&l.b, "]}", 3); /* with the NUL */
  enum { REPORT_MAX = 8 << 20 };
  char *report = util_xmalloc(REPORT_MAX);
  rc = engine_maintenance(st, "quota_list", l.b.p, report, REPORT_MAX);
  store_close(st);
  ubuf_free(&l.b);
  const char *v;
  size_t vn, n = strlen(report);
  if (rc == 0 && n + 1 >= REPORT_MAX) { /* cut short: never print part of the list */
    util_seterr(report, REPORT_MAX, "the list is longer than %d bytes", REPORT_MAX);
    rc = -1;
  }
  if (rc) {
    rc = cli_die(EXIT_USAGE, "quota list: %s", report);
    free(report);
    return rc;
  }
  char *warning = json_get_string(report, n, "warning");
  if (warning) render_line(stderr, 0, "engine: quota list: %s", warning);
  free(warning);
  if (c->json) {
    if (json_get(report, n, "rows", &v, &vn) == 1 && *v == '[') json_each(v, vn, print_quota_json, NULL);
  } else if (json_get(report, n, "lines", &v, &vn) == 1 && *v == '[') {
    json_each(v, vn, print_quota_line, NULL);
  }
  free(report);
  return EXIT_OK;
}

/* -------------------------------------------------------------- migrate --- */

static const char *MIGRATE_HELP =
    "usage: engine migrate [--db PATH|URL]\n"
    "       engine migrate --from PATH|URL --to PATH|URL\n"
    "\n"
    "The first form brings the database's schema up to this engine's version (what\n"
    "every command does when it opens one) and prints the version; a database of a\n"
    "newer engine is refused, naming both versions.\n"
    "The second copies a whole database to another, SQLite to PostgreSQL or back:\n"
    "every workflow with its history, code, tasks, timers, buffered signals, domain\n"
    "events, tokens, slots, counters, deliveries, schedules and the engine's own\n"
    "values (its instance id too: sandboxes stay their sessions'). The target must\n"
    "be empty (it is created when missing); no worker may run on either; the copy is\n"
    "one transaction of the target, so a failure leaves it as it was. Afterwards\n"
    "both are read back and every table's row count and SHA-256 compared; a table\n"
    "a line. Serve the target from then on; the source is left as it was.\n";

int cmd_migrate(args *a, common *c) {
  const char *from = NULL, *to = NULL;
  int bad = 0, db_given = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v, db_given = 1;
    else if ((v = cli_flag_value(a, "--from", &bad))) from = v;
    else if ((v = cli_flag_value(a, "--to", &bad))) to = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(MIGRATE_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "migrate: unknown option %s (see engine migrate --help)", cur);
    else return cli_die(EXIT_USAGE, "migrate: unexpected argument %s", cur);
  }
  if (bad) return EXIT_USAGE;
  char err[1024] = "";
  if (from || to) {
    if (!from || !to) return cli_die(EXIT_USAGE, "migrate: --from and --to go together (see engine migrate --help)");
    if (db_given) return cli_die(EXIT_USAGE, "migrate: --db is for the first form; the copy takes --from and --to");
    if (migrate_copy(from, to, stdout, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "migrate: %s", err);
    return EXIT_OK;
  }
  if (migrate_schema(c->db, stdout, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "migrate: %s", err);
  return EXIT_OK;
}

