/* cmd_replay: `engine replay`, on the local database only: replays a run's
 * history against a script with no side effects (and with --apply moves the
 * run to it), or checks an edited script against every live run of it. */
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "engine.h"
#include "json.h"
#include "render.h"
#include "util.h"

/* --------------------------------------------------------------- replay --- */

static const char *REPLAY_HELP =
    "usage: engine replay ID [--script FILE] [--apply] [--db PATH]\n"
    "       engine replay --all --script FILE [--status S,...] [--json] [--db PATH]\n"
    "\n"
    "Replays the workflow's history against FILE (default: the code the run is\n"
    "pinned to) with no side effects, and reports whether it replays cleanly\n"
    "(exit 0) or where it diverges (exit 1). Use it to check an edit before rollout.\n"
    "--apply moves the run to FILE when it replays cleanly, and resumes a stuck run.\n"
    "--all checks FILE against every live run (running, waiting, queued, stuck; --status\n"
    "narrows it) started from the same script path, one line per run and a summary;\n"
    "exit 0 only when all replay. It never applies and never writes to the database.\n"
    "--json prints one object per run: {id, status, replays, report}.\n";

/* The path as the start recorded it: its directory resolved (script_dir) and
 * its file name. */
static char *script_abs(const char *dir, const char *path) {
  char *tmp = util_strdup(path), *abs = util_fmt("%s/%s", dir, basename(tmp));
  free(tmp);
  return abs;
}

/* The runs of one script, collected before any of them is replayed. */
typedef struct replay_pick {
  const char *script, *statuses; /* statuses: ",a,b," or NULL for every live one */
  char *abs, *real;              /* the script as start records it, and its realpath */
  char **ids, **status;
  size_t n, cap;
} replay_pick;

static int same_script(const replay_pick *p, const wf_row *w) {
  if (strcmp(w->script_name, p->script) == 0) return 1;
  char *abs = script_abs(w->script_dir, w->script_name), real[PATH_MAX];
  int same = strcmp(abs, p->abs) == 0 || (p->real && realpath(abs, real) && strcmp(real, p->real) == 0);
  free(abs);
  return same;
}

static int pick_run(void *ud, const wf_row *w) {
  replay_pick *p = ud;
  if (engine_status_terminal(w->status)) return 0;
  if (p->statuses) {
    char *needle = util_fmt(",%s,", w->status);
    int named = strstr(p->statuses, needle) != NULL;
    free(needle);
    if (!named) return 0;
  }
  if (!same_script(p, w)) return 0;
  if (p->n == p->cap) {
    p->cap = p->cap ? 2 * p->cap : 16;
    p->ids = util_xrealloc(p->ids, p->cap * sizeof *p->ids);
    p->status = util_xrealloc(p->status, p->cap * sizeof *p->status);
  }
  p->ids[p->n] = util_strdup(w->id);
  p->status[p->n++] = util_strdup(w->status);
  return 0;
}

/* "diverges: non-determinism at event #N: ..." as "diverges at event N: ...". */
static char *divergence_line(const char *report) {
  static const char pre[] = "diverges: non-determinism at event #";
  if (strncmp(report, pre, sizeof pre - 1) == 0) {
    char *end;
    long long ev = strtoll(report + sizeof pre - 1, &end, 10);
    if (end[0] == ':' && end[1] == ' ') return util_fmt("diverges at event %lld: %s", ev, end + 2);
  }
  return util_strdup(report);
}

/* `engine replay --all --script FILE`: reads only, on a query_only connection. */
static int replay_all(common *c, const char *script, const char *statuses) {
  static const char *live[] = {"running", "waiting", "queued", "stuck", NULL};
  char *among = NULL;
  if (statuses) {
    among = util_fmt(",%s,", statuses);
    char *list = util_strdup(statuses), *save = NULL;
    for (char *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
      int ok = 0;
      for (const char **k = live; *k; k++) ok |= strcmp(*k, s) == 0;
      if (!ok) {
        int rc = cli_die(EXIT_USAGE, "replay: unknown status '%s' for --all (live runs are running, waiting, queued, stuck)", s);
        free(list);
        free(among);
        return rc;
      }
    }
    free(list);
  }
  char err[512];
  size_t len;
  char *src = engine_read_script(script, &len, err, sizeof err); /* a missing script is a usage error, once */
  if (!src) return free(among), cli_die(EXIT_USAGE, "%s", err);
  free(src);
  if (engine_db_missing(c->db))
    return free(among), cli_die(EXIT_USAGE, "no database at %s (start a workflow first, or pass --db)", c->db);
  const char *btm = getenv("ENGINE_BUSY_TIMEOUT_MS");
  store *st;
  if (store_open_readonly(c->db, btm ? atoi(btm) : 5000, &st, err, sizeof err) != STORE_OK)
    return free(among), cli_die(EXIT_USAGE, "%s", err);
  replay_pick p = {script, among, NULL, NULL, NULL, NULL, 0, 0};
  char absdir[PATH_MAX], real[PATH_MAX], *tmp = util_strdup(script);
  if (!realpath(dirname(tmp), absdir)) snprintf(absdir, sizeof absdir, "."); /* as start records it */
  free(tmp);
  p.abs = script_abs(absdir, script);
  p.real = realpath(script, real) ? util_strdup(real) : NULL;
  int rc = EXIT_OK;
  if (store_wf_list(st, NULL, pick_run, &p) != STORE_OK) {
    rc = cli_read_failed(st, "the workflows", c->db);
    st = NULL;
  }
  size_t ok = 0, diverged = 0, unchecked = 0;
  for (size_t i = 0; st && i < p.n; i++) {
    char report[2048];
    int r = engine_replay_check(st, p.ids[i], script, 0, report, sizeof report);
    if (r == 0) ok++;
    else if (r > 0) diverged++;
    else unchecked++;
    char *line = r == 0 ? util_strdup("replays") : r > 0 ? divergence_line(report) : util_fmt("cannot check: %s", report);
    if (c->json) {
      char *id = json_quote(p.ids[i]), *status = json_quote(p.status[i]), *rep = json_quote(report);
      cli_put_json(stdout, util_fmt("{\"id\":%s,\"status\":%s,\"replays\":%s,\"report\":%s}", id, status,
                                r == 0 ? "true" : "false", rep));
      free(id), free(status), free(rep);
    } else {
      render_line(stdout, 0, "%s  %s", p.ids[i], line);
    }
    free(line);
  }
  if (st && !p.n) {
    if (c->json) render_line(stderr, 0, "engine: no live run uses %s", script);
    else render_line(stdout, 0, "no live run uses %s", script);
  } else if (st && !c->json) {
    printf("%zu run%s checked: %zu replay, %zu diverge", p.n, p.n == 1 ? "" : "s", ok, diverged);
    if (unchecked) printf(", %zu cannot be checked", unchecked);
    printf("\n");
  }
  if (st) {
    store_close(st);
    rc = unchecked ? EXIT_USAGE : diverged ? EXIT_FAILED : EXIT_OK;
  }
  for (size_t i = 0; i < p.n; i++) free(p.ids[i]), free(p.status[i]);
  free(p.ids), free(p.status), free(p.abs), free(p.real), free(among);
  return rc;
}

int cmd_replay(args *a, common *c) {
  const char *id = NULL, *script = NULL, *statuses = NULL;
  int apply = 0, all = 0, bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--script", &bad))) script = v;
    else if ((v = cli_flag_value(a, "--status", &bad))) statuses = v;
    else if (cli_is_flag(cur, "--apply")) apply = 1;
    else if (cli_is_flag(cur, "--all")) all = 1;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(REPLAY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "replay: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "replay: unexpected argument %s", cur);
  }
  if (all) {
    if (id) return cli_die(EXIT_USAGE, "replay: --all checks every live run: give no ID with it");
    if (apply)
      return cli_die(EXIT_USAGE, "replay: --all never applies: check with --all, then apply run by run with "
                             "engine replay ID --script FILE --apply");
    if (!script) return cli_die(EXIT_USAGE, "replay: --all needs --script FILE (the edited script to check)");
    return replay_all(c, script, statuses);
  }
  if (statuses || c->json) return cli_die(EXIT_USAGE, "replay: --status and --json go with --all");
  if (!id) return cli_die(EXIT_USAGE, "replay: missing ID (see engine replay --help)");
  store *st;
  int rc = cli_open_existing(c->db, &st);
  if (rc) return rc;
  char report[2048];
  rc = engine_replay_check(st, id, script, apply, report, sizeof report);
  store_close(st);
  if (rc < 0) return cli_die(EXIT_USAGE, "%s", report);
  char *shown = render_str(report, RENDER_MULTILINE, 0); /* a divergence quotes the script's error */
  printf("%s\n", shown);
  free(shown);
  return rc == 0 ? EXIT_OK : EXIT_FAILED;
}

