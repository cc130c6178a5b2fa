/* cmd_eval: `engine eval SUITE` (docs/evals.md). Checks the suite first
 * (worker.eval_check: every problem named by its file and field, nothing
 * written), then starts workflows/eval_suite.lua as engine start starts a
 * workflow (run in this process, or recorded for a running worker and
 * followed; --id of a run that exists carries it on from its log) and
 * prints its result: on a terminal the table of the cases
 * (worker.eval_table), else the suite result's JSON on one line. */
#include <stdlib.h>
#include <string.h>

#include "client_ops.h"
#include "engine.h"
#include "json.h"
#include "render.h"
#include "util.h"

static const char *EVAL_HELP =
    "usage: engine eval SUITE [--id RUN] [--baseline RUN|@FILE] [--live] [--detach] [--quiet] [--json]\n"
    "                   [--color WHEN] [--db PATH]\n"
    "\n"
    "Runs an eval suite: a folder with suite.json, cases/*.json and scorers/*.lua\n"
    "(docs/evals.md). Each case runs as a durable agent session, a child of the\n"
    "eval run (id RUN.CASE), several at once; each ended session is scored by the\n"
    "suite's scorers over its result and its events. The suite is checked before\n"
    "anything starts: every problem is named by its file and field (exit 2).\n"
    "The run is a workflow (workflows/eval_suite.lua): after a crash, the same\n"
    "command with --id RUN, or engine serve, carries it on; no case runs twice.\n"
    "\n"
    "The result: on a terminal, a table (case, pass or fail per scorer, turns,\n"
    "tokens, cost, wall time) and the failures; piped or with --json, the suite\n"
    "result's JSON on one line. It is also stored as the artifact\n"
    "suite_result.json (an artifact.saved event of the run).\n"
    "\n"
    "--id RUN            the run's id (default eval-SUITE-XXXXXXXX)\n"
    "--baseline RUN      compare with an earlier run (or @FILE, a suite_result.json):\n"
    "                    a case regressed when a scorer that passed there does not now\n"
    "--live              each case's model.live instead of its recording\n"
    "--detach            record the run for engine serve and print its id (exit 3)\n"
    "\n"
    "Exit codes: 0 every case passed (with --baseline: no case regressed), 1 a case\n"
    "failed (with --baseline: a case regressed) or the run failed, 2 usage or a bad\n"
    "suite, 3 detached or stuck.\n";

enum { CHECK_REPORT = 65536, TABLE_REPORT = 1 << 20 };

/* The baseline as the run's input holds it: {"run": RUN, "result": ...}, from
 * an earlier run's summary or a file (@FILE). 0, or the exit code. */
static int read_baseline(const common *c, const char *spec, char **out) {
  char *result = NULL;
  int rc;
  if (spec[0] == '@') {
    if ((rc = cli_read_json("--baseline", spec, &result))) return rc;
  } else {
    client *cl;
    if ((rc = client_open(c, &cl))) return rc;
    char *summary = NULL;
    client_err err;
    if (cl->ops->summary(cl, spec, &summary, &err) != 0) {
      client_close(cl);
      return client_fail(&err, "eval: --baseline: ");
    }
    client_close(cl);
    size_t n = strlen(summary);
    char *status = json_get_string(summary, n, "status");
    const char *v;
    size_t vn;
    int done = status && strcmp(status, "completed") == 0;
    if (done && json_get(summary, n, "result", &v, &vn) == 1) result = util_fmt("%.*s", (int)vn, v);
    free(summary);
    if (!result) {
      rc = cli_die(EXIT_USAGE, "eval: --baseline: %s is %s, not a completed eval run", spec, status ? status : "unknown");
      free(status);
      return rc;
    }
    free(status);
  }
  char *run = json_quote(spec);
  *out = util_fmt("{\"result\":%s,\"run\":%s}", result, run);
  free(run);
  free(result);
  return 0;
}

/* Each problem of a report's "problems" list on a line of its own. */
static int say_problem(void *ud, const char *v, size_t vn) {
  char *p = json_string(v, vn);
  render_line(stderr, DIE_MAX, "engine: eval: %s: %s", (const char *)ud, p ? p : "(a problem that is not text)");
  free(p);
  return 0;
}

typedef struct eval_out {
  const common *c;
  int baseline;
} eval_out;

static int print_line(void *ud, const char *v, size_t vn) {
  (void)ud;
  char *line = json_string(v, vn);
  render_line(stdout, 0, "%s", line ? line : "");
  free(line);
  return 0;
}

static int is_true(const char *json, size_t n, const char *key) {
  const char *v;
  size_t vn;
  return json_get(json, n, key, &v, &vn) == 1 && vn == 4 && memcmp(v, "true", 4) == 0;
}

/* The run's outcome: the table or the JSON when it completed (exit 0 or 1
 * by the cases), else what engine start says of a run that did not. */
static int eval_outcome(void *ud, const char *id, const char *summary, size_t n) {
  eval_out *o = ud;
  char *status = json_get_string(summary, n, "status");
  const char *v;
  size_t vn;
  if (!status || strcmp(status, "completed") != 0 || json_get(summary, n, "result", &v, &vn) != 1) {
    free(status);
    return cli_report_outcome(id, summary, n, o->c);
  }
  free(status);
  int printed = 0;
  if (cli_human_stdout(o->c)) {
    char *args = util_fmt("{\"result\":%.*s}", (int)vn, v), *report = util_xmalloc(TABLE_REPORT);
    const char *lines;
    size_t ln;
    if (engine_maintenance(NULL, "eval_table", args, report, TABLE_REPORT) == 0 &&
        json_get(report, strlen(report), "lines", &lines, &ln) == 1) {
      json_each(lines, ln, print_line, NULL);
      printed = 1;
    } else {
      render_line(stderr, DIE_MAX, "engine: eval: cannot lay out the table (%s); the result's JSON follows", report);
    }
    free(args);
    free(report);
  }
  if (!printed) cli_put_json(stdout, util_fmt("%.*s", (int)vn, v));
  fflush(stdout);
  if (o->baseline) return is_true(v, vn, "regressed") ? EXIT_FAILED : EXIT_OK;
  return is_true(v, vn, "pass") ? EXIT_OK : EXIT_FAILED;
}

int cmd_eval(args *a, common *c) {
  const char *suite = NULL, *id = NULL, *baseline_spec = NULL, *v;
  int live = 0, detach = 0, quiet = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i];
    if ((v = cli_flag_value(a, "--id", &bad))) id = v;
    else if ((v = cli_flag_value(a, "--baseline", &bad))) baseline_spec = v;
    else if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--color", &bad))) c->color = v;
    else if (cli_is_flag(cur, "--live")) live = 1;
    else if (cli_is_flag(cur, "--detach")) detach = 1;
    else if (cli_is_flag(cur, "--quiet") || cli_is_flag(cur, "-q")) quiet = 1;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(EVAL_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "eval: unknown option %s (see engine eval --help)", cur);
    else if (!suite) suite = cur;
    else return cli_die(EXIT_USAGE, "eval: unexpected argument %s", cur);
    if (bad) return EXIT_USAGE;
  }
  if (!suite) return cli_die(EXIT_USAGE, "eval: missing SUITE, the suite's folder (see engine eval --help)");
  if ((rc = cli_check_color(c))) return rc;
  char *baseline = NULL;
  if (baseline_spec && (rc = read_baseline(c, baseline_spec, &baseline))) return rc;
  /* the suite checked as the run will load it, before anything is written */
  char *qdir = json_quote(suite);
  char *check_args = util_fmt("{\"baseline\":%s,\"dir\":%s,\"live\":%s}", baseline ? baseline : "null", qdir,
                              live ? "true" : "false");
  free(qdir);
  char *report = util_xmalloc(CHECK_REPORT);
  rc = engine_maintenance(NULL, "eval_check", check_args, report, CHECK_REPORT);
  free(check_args);
  size_t rn = strlen(report);
  const char *pv;
  size_t pn;
  if (rc != 0 || !is_true(report, rn, "ok")) {
    if (rc == 0 && json_get(report, rn, "problems", &pv, &pn) == 1) json_each(pv, pn, say_problem, (void *)suite);
    else render_line(stderr, DIE_MAX, "engine: eval: %s: %s", suite, report);
    free(report);
    free(baseline);
    return EXIT_USAGE;
  }
  char *dir = json_get_string(report, rn, "dir"), *script = json_get_string(report, rn, "script"),
       *name = json_get_string(report, rn, "suite");
  free(report);
  char made[ENGINE_ID_MAX + 1];
  if (!id) {
    char *seed = util_fmt("eval-%s.lua", name ? name : "suite");
    engine_generate_id(seed, made, sizeof made);
    free(seed);
    id = made;
  }
  qdir = json_quote(dir ? dir : suite);
  char *input = util_fmt("{%s%s%s\"live\":%s,\"suite\":%s}", baseline ? "\"baseline\":" : "", baseline ? baseline : "",
                         baseline ? "," : "", live ? "true" : "false", qdir);
  free(qdir);
  client_start_req req = {script, id, input, detach, quiet, NULL};
  eval_out out = {c, baseline != NULL};
  rc = cli_start_run(c, &req, eval_outcome, &out);
  free(input);
  free(dir);
  free(script);
  free(name);
  free(baseline);
  return rc;
}
