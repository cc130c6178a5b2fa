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
    "       engine eval --fork ID (--at SEQ | --turn N) --variants FILE [--id RUN] [...]\n"
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
    "--fork ID --at SEQ | --turn N --variants FILE: the same fork point of ID run once\n"
    "per variant of FILE ({suite, case, variants: [{name, model, input_patch,\n"
    "policies, script}]}), each an engine fork with id RUN.NAME, side by side: the\n"
    "table compares them, scored by the suite's scorers with the case's expectations\n"
    "(or, without a suite, by their numbers alone).\n"
    "\n"
    "Exit codes: 0 every case passed (with --baseline: no case regressed; with --fork:\n"
    "every variant ran, whatever it scored), 1 a case failed (with --baseline: a case\n"
    "regressed) or the run failed, 2 usage or a bad suite, 3 detached or stuck.\n";

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
  int variants; /* a comparison: it completed, whatever each variant scored */
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
  if (o->variants) return EXIT_OK;
  if (o->baseline) return is_true(v, vn, "regressed") ? EXIT_FAILED : EXIT_OK;
  return is_true(v, vn, "pass") ? EXIT_OK : EXIT_FAILED;
}

/* The fork point of engine eval --fork. */
typedef struct fork_point {
  const char *source;
  int at_given, turn_given;
  int64_t at, turn;
} fork_point;

typedef struct variant_ctx {
  client *cl;
  const fork_point *fp;
  const char *run;
  int quiet;
  ubuf list; /* the run's input: [{name, session}] */
  int rc;
} variant_ctx;

/* The text of member key of object v (malloc'd), or NULL when absent. */
static char *member_text(const char *v, size_t vn, const char *key) {
  const char *m;
  size_t mn;
  return json_get(v, vn, key, &m, &mn) == 1 ? util_fmt("%.*s", (int)mn, m) : NULL;
}

/* One variant: its fork, id RUN.NAME, recorded for the eval run's worker
 * (a retry of the same command finds the fork it made). */
static int fork_variant(void *ud, const char *v, size_t vn) {
  variant_ctx *x = ud;
  char *name = json_get_string(v, vn, "name"), *model = member_text(v, vn, "model"),
       *patch = member_text(v, vn, "input_patch"), *policies = json_get_string(v, vn, "policies"),
       *script = json_get_string(v, vn, "script");
  char *id = util_fmt("%s.%s", x->run, name ? name : "");
  fork_req q = {x->fp->source, x->fp->at_given, x->fp->turn_given, x->fp->at, x->fp->turn, id, patch, script, model,
                policies, NULL};
  client_fork_req req = {&q, 1, x->quiet};
  client_started st = {0};
  fork_made made;
  client_err err;
  int rc = x->cl->ops->fork(x->cl, &req, &st, &made, &err);
  if (rc != 0) {
    char *prefix = util_fmt("eval: variant %s: fork: ", name ? name : "?");
    x->rc = client_fail(&err, prefix);
    free(prefix);
  } else {
    if (!x->quiet)
      render_line(stderr, DIE_MAX, "engine: variant %s: %s %s at #%lld as %s", name, st.existed ? "found the fork of" : "forked",
                  x->fp->source, (long long)made.seq, st.id);
    char *qn = json_quote(name), *qs = json_quote(st.id);
    char *item = util_fmt("%s{\"name\":%s,\"session\":%s}", x->list.n > 1 ? "," : "", qn, qs);
    ubuf_add(&x->list, item, strlen(item));
    free(item);
    free(qn);
    free(qs);
  }
  free(st.id);
  free(id);
  free(name);
  free(model);
  free(patch);
  free(policies);
  free(script);
  return rc != 0;
}

/* engine eval --fork ID --at SEQ --variants FILE: the variants checked, one
 * fork each, then the eval run that waits for them and scores them. */
static int run_variants(common *c, const fork_point *fp, const char *file, const char *id, int detach, int quiet) {
  char *qf = json_quote(file), *args = util_fmt("{\"file\":%s}", qf);
  free(qf);
  char *report = util_xmalloc(CHECK_REPORT);
  int rc = engine_maintenance(NULL, "eval_variants_check", args, report, CHECK_REPORT);
  free(args);
  size_t rn = strlen(report);
  const char *pv;
  size_t pn;
  if (rc != 0 || !is_true(report, rn, "ok")) {
    if (rc == 0 && json_get(report, rn, "problems", &pv, &pn) == 1) json_each(pv, pn, say_problem, (void *)file);
    else render_line(stderr, DIE_MAX, "engine: eval: %s: %s", file, report);
    free(report);
    return EXIT_USAGE;
  }
  char made[ENGINE_ID_MAX + 1];
  if (!id) {
    char *seed = util_fmt("eval-%s.lua", fp->source);
    engine_generate_id(seed, made, sizeof made);
    free(seed);
    id = made;
  }
  client *cl;
  if ((rc = client_open(c, &cl))) return free(report), rc;
  variant_ctx x = {cl, fp, id, quiet, {0}, 0};
  ubuf_add(&x.list, "[", 1);
  json_get(report, rn, "variants", &pv, &pn);
  json_each(pv, pn, fork_variant, &x);
  client_close(cl);
  ubuf_add(&x.list, "]", 2);
  if (x.rc) {
    free(x.list.p);
    free(report);
    return x.rc;
  }
  char *suite = member_text(report, rn, "suite"), *kase = member_text(report, rn, "case"),
       *script = json_get_string(report, rn, "script"), *src = json_quote(fp->source);
  char *point = fp->turn_given ? util_fmt("\"turn\":%lld", (long long)fp->turn) : util_fmt("\"at\":%lld", (long long)fp->at);
  char *flag = fp->turn_given ? util_fmt("--turn %lld", (long long)fp->turn) : util_fmt("--at %lld", (long long)fp->at);
  char *input = util_fmt("{%s%s%s\"fork\":{%s,\"source\":%s},\"mode\":\"variants\",%s%s%s\"variants\":%s}",
                         kase ? "\"case\":" : "", kase ? kase : "", kase ? "," : "", point, src,
                         suite ? "\"suite\":" : "", suite ? suite : "", suite ? "," : "", x.list.p);
  client_start_req req = {script, id, input, detach, quiet, NULL};
  eval_out out = {c, 0, 1};
  char *again = util_fmt("engine eval --fork %s %s --variants %s", fp->source, flag, file);
  rc = cli_start_run(c, &req, eval_outcome, &out, again);
  free(again);
  free(flag);
  free(input);
  free(point);
  free(src);
  free(script);
  free(kase);
  free(suite);
  free(x.list.p);
  free(report);
  return rc;
}

static int parse_count(const char *flag, const char *v, int64_t *out) {
  char *end;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || n < 1) return cli_die(EXIT_USAGE, "eval: %s must be a whole number from 1 (got '%s')", flag, v);
  *out = n;
  return 0;
}

int cmd_eval(args *a, common *c) {
  const char *suite = NULL, *id = NULL, *baseline_spec = NULL, *variants = NULL, *v;
  int live = 0, detach = 0, quiet = 0, bad = 0, rc;
  fork_point fp = {0};
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i];
    if ((v = cli_flag_value(a, "--id", &bad))) id = v;
    else if ((v = cli_flag_value(a, "--fork", &bad))) fp.source = v;
    else if ((v = cli_flag_value(a, "--variants", &bad))) variants = v;
    else if ((v = cli_flag_value(a, "--at", &bad))) {
      if ((rc = parse_count("--at", v, &fp.at))) return rc;
      fp.at_given = 1;
    } else if ((v = cli_flag_value(a, "--turn", &bad))) {
      if ((rc = parse_count("--turn", v, &fp.turn))) return rc;
      fp.turn_given = 1;
    }
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
  if ((rc = cli_check_color(c))) return rc;
  if (fp.source || variants || fp.at_given || fp.turn_given) {
    if (suite) return cli_die(EXIT_USAGE, "eval: --fork takes no SUITE (the variants file names one)");
    if (!fp.source || !variants) return cli_die(EXIT_USAGE, "eval: --fork ID and --variants FILE go together");
    if (fp.at_given == fp.turn_given)
      return cli_die(EXIT_USAGE, "eval: --fork: give the fork point: --at SEQ or --turn N%s", fp.at_given ? ", not both" : "");
    if (live || baseline_spec) return cli_die(EXIT_USAGE, "eval: --fork takes neither --live nor --baseline");
    return run_variants(c, &fp, variants, id, detach, quiet);
  }
  if (!suite) return cli_die(EXIT_USAGE, "eval: missing SUITE, the suite's folder (see engine eval --help)");
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
  eval_out out = {c, baseline != NULL, 0};
  char *again = util_fmt("engine eval %s", suite);
  rc = cli_start_run(c, &req, eval_outcome, &out, again);
  free(again);
  free(input);
  free(dir);
  free(script);
  free(name);
  free(baseline);
  return rc;
}
