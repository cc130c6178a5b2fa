/* cmd_start: `engine start` and `engine fork`, once for both ways
 * (client_ops.h): the client records the start or the fork (or, locally with
 * no worker running, says this process is to run it), the command follows
 * its events until it ends and prints the outcome from the workflow's
 * summary, the same lines either way. `engine eval` starts its run through
 * cli_start_run too, with an outcome of its own (cmd_eval.c). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_ops.h"
#include "json.h"
#include "render.h"
#include "util.h"

static const char *START_HELP =
    "usage: engine start FILE.lua [--input JSON|@file] [--id ID] [--detach] [--quiet] [--json] [--color WHEN]\n"
    "                    [--traceparent TP [--tracestate TS]] [--db PATH]\n"
    "\n"
    "Starts a workflow and runs it in the foreground until it completes (exit 0),\n"
    "fails (exit 1) or is stuck (exit 3). While it waits for a signal or a timer it\n"
    "keeps running; `engine signal` from another terminal wakes it at once.\n"
    "With --id of an existing workflow, carries that workflow on from its log.\n"
    "An ID is 1-128 bytes of A-Z a-z 0-9 . _ : @ -, starting with a letter or digit,\n"
    "without \"..\"; without --id one is made from the script's name and 8 hex digits.\n"
    "With --detach it only records the start (exit 3) for `engine serve` to run.\n"
    "Domain events are printed to stderr as they happen; the result goes to stdout:\n"
    "on a terminal as the outcome for people (status, summary, verdict, usage, the\n"
    "findings as a table, artifacts), else (a pipe, a file, or with --json) as the\n"
    "result's JSON on one line.\n"
    "When this process runs the workflow (not engine serve) and stderr is a\n"
    "terminal, the events read as a transcript (as engine events shows them) and\n"
    "a status line below them says what the session does now: a model turn\n"
    "streaming and its characters so far, a tool or an activity running and for\n"
    "how long, an approval or a signal it waits for since when, with the command\n"
    "that answers it. It is redrawn in place every second and erased before the\n"
    "result; the text a model streams shows above it until the turn's message is\n"
    "recorded. Elsewhere (a pipe, a file, TERM=dumb) the same goes out as plain\n"
    "lines, one each time it changes (\"~ model turn 2\", \"~ tool shell running\",\n"
    "\"engine: ID is waiting for approval RID; ...\"), the events one per line and\n"
    "the streamed text on lines that start with \"~ live (step N): \". Colour only\n"
    "on a terminal, never with NO_COLOR set. --quiet prints the outcome alone.\n"
    "\n"
    "With engine --server URL start ..., the server starts it: FILE.lua names a script\n"
    "in its workflows directory (serve --workflows), like hello.lua, and its token's\n"
    "identity is recorded as who started it. The events and the outcome print as\n"
    "when a local start finds engine serve running it (one line per event, no\n"
    "status line), and the text a model streams too, on lines that start with\n"
    "\"~ live\".\n"
    "\n"
    "--traceparent TP (a W3C traceparent, 00-TRACEID-PARENTID-FLAGS) links the\n"
    "workflow's trace to the caller's: it is recorded in the workflow's start, so\n"
    "its spans, its log lines and its outgoing requests are in that trace; a value\n"
    "that is not a valid traceparent is refused (exit 2). --tracestate TS goes with\n"
    "it. Without the flag, the TRACEPARENT and TRACESTATE environment variables\n"
    "(OpenTelemetry's environment carrier, as a CI job may set them) are used; an\n"
    "invalid TRACEPARENT there is ignored with a warning. A start of an id that\n"
    "exists keeps the trace it recorded.\n";

static int exit_for_status(const char *status) {
  if (strcmp(status, "completed") == 0) return EXIT_OK;
  if (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0) return EXIT_FAILED;
  return EXIT_WAITING;
}

static int is_invalid_input(const char *error) {
  char type[64];
  return strcmp(view_json_field(error, "type", type, sizeof type), "InvalidInput") == 0;
}

int cli_report_outcome(const char *id, const char *json, size_t n, const common *c) {
  char *status = json_get_string(json, n, "status");
  if (!status) return cli_die(EXIT_USAGE, "the summary of %s has no status", id);
  const char *v;
  size_t vn;
  char *error = view_json_member(json, n, "error"); /* as the row holds it */
  int code = exit_for_status(status);
  if (strcmp(status, "completed") == 0) {
    pretty_opts o = cli_stdout_layout(c);
    char *human = cli_human_stdout(c) ? pretty_outcome(json, n, &o) : NULL;
    if (human) fputs(human, stdout);
    else cli_put_json(stdout, json_get(json, n, "result", &v, &vn) == 1 ? util_fmt("%.*s", (int)vn, v) : NULL);
    free(human);
  } else if (strcmp(status, "stuck") == 0) {
    render_line(stderr, 0, "engine: %s is stuck: %s", id, error ? error : "");
    render_line(stderr, 0, "engine: fix the script, check it with: engine replay %s --script FILE, then add --apply", id);
  } else if (strcmp(status, "failed") == 0 && error && is_invalid_input(error)) {
    /* the workflow refused its input before doing anything: a usage error.
     * The message is decoded, not scanned: a problem may quote a value. */
    char msg[4096];
    view_json_field(error, "message", msg, sizeof msg);
    render_line(stderr, 0, "engine: %s: %s", id, *msg ? msg : "invalid input");
    code = EXIT_USAGE;
  } else if (engine_status_terminal(status)) {
    render_line(stderr, 0, "engine: %s %s: %s", id, status, error ? error : "");
  } else {
    render_line(stderr, 0, "engine: %s is %s", id, status);
  }
  free(status);
  free(error);
  return code;
}

/* How a start's outcome is printed: cli_report_outcome, or the command's own. */
typedef struct outcome {
  cli_outcome_fn fn;
  void *ud;
  const char *again; /* the command that carries it on (with --id ID); NULL: engine start SCRIPT */
} outcome;

static int print_outcome(void *ud, const char *id, const char *summary, size_t n) {
  return cli_report_outcome(id, summary, n, ud);
}

/* The outcome of a run in this process; one that did not end was interrupted
 * (a stuck one said what to do). */
typedef struct here_ctx {
  const char *id, *script;
  outcome out;
} here_ctx;

static int report_here(void *ud, const char *summary, size_t n) {
  here_ctx *h = ud;
  int code = h->out.fn(h->out.ud, h->id, summary, n);
  char *status = json_get_string(summary, n, "status");
  if (code == EXIT_WAITING && !(status && strcmp(status, "stuck") == 0) && h->out.again)
    render_line(stderr, DIE_MAX, "engine: interrupted; `%s --id %s` or `engine serve` carries it on", h->out.again,
                h->id);
  else if (code == EXIT_WAITING && !(status && strcmp(status, "stuck") == 0) && h->script)
    render_line(stderr, DIE_MAX, "engine: interrupted; `engine start %s --id %s` or `engine serve` carries it on",
                h->script, h->id);
  else if (code == EXIT_WAITING && !(status && strcmp(status, "stuck") == 0))
    render_line(stderr, DIE_MAX, "engine: interrupted; `engine serve` carries %s on", h->id);
  free(status);
  return code;
}

/* Runs workflow id in this process (no other runs it, or any more; script:
 * the start's, NULL for a fork, whose code is pinned; made: it exists
 * already, a fork, carried on rather than created) and returns its exit code. */
static int run_here(client *cl, const common *c, const char *id, const char *script, int quiet, int made,
                    outcome out) {
  here_ctx h = {id, script, out};
  client_run run = {id, script ? script : "", quiet, cli_color_on(c, STDERR_FILENO), made, report_here, &h};
  client_err err = {0};
  int rc = 0;
  if (!cl->ops->run_here) return cli_die(EXIT_USAGE, "%s cannot run here: nothing runs it", id);
  if (cl->ops->run_here(cl, &run, &rc, &err) != 0) rc = client_fail(&err, NULL);
  return rc;
}

/* Another process runs it (engine serve, another start, the server): its
 * events as lines on stderr until it ends or is stuck, then its outcome.
 * *took_over: that process went away and this one is to carry it on. */
static int follow_start(client *cl, const char *id, int quiet, int *took_over, outcome out) {
  cli_printer p = {stderr, 0, NULL, 1, 0, 0};
  client_sink sink = {quiet ? NULL : cli_print_event, quiet ? NULL : cli_print_live, &p};
  client_err err;
  int rc = cl->ops->follow(cl, id, CLIENT_FOLLOW_START, &sink, took_over, &err);
  cli_print_end(&p);
  if (rc) return client_fail(&err, NULL);
  if (*took_over) return EXIT_OK;
  char *summary;
  if (cl->ops->summary(cl, id, &summary, &err) != 0) return client_fail(&err, NULL);
  rc = out.fn(out.ud, id, summary, strlen(summary));
  free(summary);
  return rc;
}

/* The caller's trace for the start: --traceparent (and --tracestate), which
 * must be valid, else TRACEPARENT and TRACESTATE from the environment (the
 * OpenTelemetry environment carrier), ignored with a warning when invalid
 * (the W3C rule for a header no one typed). 0, or the exit code after saying
 * what is wrong with a flag. */
static int read_trace(const char *traceparent, const char *tracestate, trace_start *out) {
  char why[200], note[200];
  if (tracestate && !traceparent) return cli_die(EXIT_USAGE, "start: --tracestate needs --traceparent");
  if (traceparent) {
    if (!trace_start_read(traceparent, tracestate, out, why, sizeof why, note, sizeof note))
      return cli_die(EXIT_USAGE, "start: --traceparent: %s", why);
    if (*note) return cli_die(EXIT_USAGE, "start: --tracestate: %s", note);
    return 0;
  }
  const char *env = getenv("TRACEPARENT");
  if (!env || !*env) return 0;
  if (!trace_start_read(env, getenv("TRACESTATE"), out, why, sizeof why, note, sizeof note))
    render_line(stderr, DIE_MAX, "engine: warning: TRACEPARENT is ignored: %s", why);
  else if (*note)
    render_line(stderr, DIE_MAX, "engine: warning: TRACESTATE is ignored: %s", note);
  return 0;
}

int cmd_start(args *a, common *c) {
  const char *script = NULL, *input_spec = "{}", *id = NULL, *traceparent = NULL, *tracestate = NULL;
  int detach = 0, quiet = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--input", &bad))) input_spec = v;
    else if ((v = cli_flag_value(a, "--id", &bad))) id = v;
    else if ((v = cli_flag_value(a, "--traceparent", &bad))) traceparent = v;
    else if ((v = cli_flag_value(a, "--tracestate", &bad))) tracestate = v;
    else if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--detach")) detach = 1;
    else if (cli_is_flag(cur, "--quiet") || cli_is_flag(cur, "-q")) quiet = 1;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if ((v = cli_flag_value(a, "--color", &bad))) c->color = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(START_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "start: unknown option %s (see engine start --help)", cur);
    else if (!script) script = cur;
    else return cli_die(EXIT_USAGE, "start: unexpected argument %s", cur);
    if (bad) return EXIT_USAGE;
  }
  if (!script) return cli_die(EXIT_USAGE, "start: missing FILE.lua (see engine start --help)");
  if ((rc = cli_check_color(c))) return rc;
  trace_start trace;
  memset(&trace, 0, sizeof trace);
  if ((rc = read_trace(traceparent, tracestate, &trace))) return rc;
  char *input = NULL;
  if ((rc = cli_read_input(input_spec, &input))) return rc;
  client_start_req req = {script, id, input, detach, quiet, trace.traceparent[0] ? &trace : NULL};
  rc = cli_start_run(c, &req, print_outcome, c, NULL);
  free(input);
  return rc;
}

int cli_start_run(const common *c, const client_start_req *req, cli_outcome_fn report, void *ud, const char *again) {
  outcome out = {report, ud, again};
  int detach = req->detach, quiet = req->quiet, rc;
  client *cl;
  if ((rc = client_open(c, &cl))) return rc;
  client_started s = {0};
  client_err err;
  if (cl->ops->start(cl, req, &s, &err) != 0) {
    client_close(cl);
    return client_fail(&err, NULL);
  }
  int took_over = 0;
  if (!s.here) {
    if (s.existed) render_line(stderr, DIE_MAX, "engine: %s already exists; following it", s.id);
    if (detach) {
      render_line(stdout, 0, "%s", s.id);
      rc = EXIT_WAITING;
      goto out;
    }
    if (!quiet) render_line(stderr, DIE_MAX, "engine: %s started; %s runs it", s.id, s.runner);
    rc = follow_start(cl, s.id, quiet, &took_over, out);
    if (rc != EXIT_OK || !took_over) goto out;
    if (!quiet) render_line(stderr, DIE_MAX, "engine: the worker went away; carrying %s on here", s.id);
  }
  /* no other process runs it (any more): this one does */
  rc = run_here(cl, c, s.id, req->script, quiet, 0, out);
out:
  free(s.id);
  client_close(cl);
  return rc;
}

/* ----------------------------------------------------------------- fork --- */

static const char *FORK_HELP =
    "usage: engine fork ID (--at SEQ | --turn N) [--id NEW] [--input-patch JSON|@file] [--script FILE]\n"
    "                   [--model JSON|@file] [--policies DIR] [--detach] [--quiet] [--json] [--db PATH]\n"
    "\n"
    "Makes a new workflow from a point of workflow ID's history and runs it on from\n"
    "there, as engine start runs a workflow (in the foreground until it ends, or\n"
    "recorded for engine serve with --detach; the same output and exit codes).\n"
    "The fork's history is a copy of ID's up to the point, its domain events are\n"
    "ID's up to it, and it records where it came from (engine show: forked). ID is\n"
    "never changed. The fork is one transaction: it is made whole or not at all.\n"
    "\n"
    "--at SEQ     the point: domain event #SEQ, as engine events ID numbers them (an\n"
    "             event the workflow recorded; not a client's signal.sent)\n"
    "--turn N     the point: an agent session, just before its N-th model turn (the\n"
    "             fork calls the model for turn N again)\n"
    "             An activity that had not ended at the point runs again: the fork\n"
    "             starts just before it (said on stderr). With continue-as-new, the\n"
    "             fork continues the run that recorded the point.\n"
    "--id NEW     the fork's id (default: ID.fork-N, the first that is free)\n"
    "--input-patch JSON|@file   an RFC 7386 merge patch on ID's input; the copied\n"
    "             history must replay with the patched input, else the fork is refused\n"
    "             naming where it diverges\n"
    "--script FILE  new code, checked by replaying the copied history first (as engine\n"
    "             replay ID --script FILE does); refused naming the divergence\n"
    "--model JSON   an agent session's model from the point on, as its input's model\n"
    "             ({\"name\": ..., \"baseUrl\": ...}); its earlier turns keep theirs\n"
    "--policies DIR an agent session's policy set from the point on (local only)\n"
    "\n"
    "With engine --server URL fork ..., the server makes the fork (POST\n"
    "/v1/workflows/ID/fork) as the token's identity; --script and --policies are\n"
    "for a fork on the engine's host.\n";

static int parse_count(const char *flag, const char *v, int64_t *out) {
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (!*v || *end || errno) return cli_die(EXIT_USAGE, "fork: %s must be a whole number (got '%s')", flag, v);
  *out = n;
  return 0;
}

int cmd_fork(args *a, common *c) {
  const char *source = NULL, *patch_spec = NULL, *model_spec = NULL, *v;
  fork_req q = {0};
  int detach = 0, quiet = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i];
    if ((v = cli_flag_value(a, "--at", &bad))) {
      if ((rc = parse_count("--at", v, &q.at))) return rc;
      q.at_given = 1;
    } else if ((v = cli_flag_value(a, "--turn", &bad))) {
      if ((rc = parse_count("--turn", v, &q.turn))) return rc;
      q.turn_given = 1;
    } else if ((v = cli_flag_value(a, "--id", &bad))) q.id = v;
    else if ((v = cli_flag_value(a, "--input-patch", &bad))) patch_spec = v;
    else if ((v = cli_flag_value(a, "--script", &bad))) q.script = v;
    else if ((v = cli_flag_value(a, "--model", &bad))) model_spec = v;
    else if ((v = cli_flag_value(a, "--policies", &bad))) q.policies = v;
    else if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--color", &bad))) c->color = v;
    else if (cli_is_flag(cur, "--detach")) detach = 1;
    else if (cli_is_flag(cur, "--quiet") || cli_is_flag(cur, "-q")) quiet = 1;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(FORK_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "fork: unknown option %s (see engine fork --help)", cur);
    else if (!source) source = cur;
    else return cli_die(EXIT_USAGE, "fork: unexpected argument %s", cur);
    if (bad) return EXIT_USAGE;
  }
  if (!source) return cli_die(EXIT_USAGE, "fork: missing ID (see engine fork --help)");
  if (q.at_given == q.turn_given)
    return cli_die(EXIT_USAGE, "fork: give the fork point: --at SEQ or --turn N%s", q.at_given ? ", not both" : "");
  if ((rc = cli_check_color(c))) return rc;
  char policies[PATH_MAX];
  if (q.policies) { /* the fork records where the set is: an absolute path */
    if (!realpath(q.policies, policies)) return cli_die(EXIT_USAGE, "fork: --policies %s: %s", q.policies, strerror(errno));
    q.policies = policies;
  }
  char *patch = NULL, *model = NULL;
  if (patch_spec && (rc = cli_read_json("--input-patch", patch_spec, &patch))) return rc;
  if (model_spec && (rc = cli_read_json("--model", model_spec, &model))) return free(patch), rc;
  q.source = source;
  q.input_patch = patch;
  q.model = model;
  client *cl;
  if ((rc = client_open(c, &cl))) return free(patch), free(model), rc;
  client_fork_req req = {&q, detach, quiet};
  client_started s = {0};
  fork_made made;
  client_err err;
  rc = cl->ops->fork ? cl->ops->fork(cl, &req, &s, &made, &err) : -1;
  free(patch);
  free(model);
  if (rc != 0) {
    if (!cl->ops->fork) rc = cli_die(EXIT_USAGE, "fork: not available here");
    else rc = client_fail(&err, "fork: ");
    client_close(cl);
    return rc;
  }
  int took_over = 0;
  if (s.existed) render_line(stderr, DIE_MAX, "engine: %s exists, a fork of %s by the same request; following it", s.id,
                             source);
  else if (!quiet)
    render_line(stderr, DIE_MAX, "engine: forked %s at #%lld (run %lld, history event #%lld) as %s", source,
                (long long)made.seq, (long long)made.run, (long long)made.at, s.id);
  if (!s.existed && made.note[0]) render_line(stderr, DIE_MAX, "engine: %s", made.note);
  else if (!s.existed && made.asked && made.seq < made.asked)
    render_line(stderr, DIE_MAX, "engine: the fork starts before #%lld: an activity had not ended there and runs again",
                (long long)made.asked);
  if (!s.here) {
    if (detach) {
      render_line(stdout, 0, "%s", s.id);
      rc = EXIT_WAITING;
      goto out;
    }
    if (!quiet) render_line(stderr, DIE_MAX, "engine: %s runs it", s.runner);
    rc = follow_start(cl, s.id, quiet, &took_over, (outcome){print_outcome, c, NULL});
    if (rc != EXIT_OK || !took_over) goto out;
    if (!quiet) render_line(stderr, DIE_MAX, "engine: the worker went away; carrying %s on here", s.id);
  }
  rc = run_here(cl, c, s.id, NULL, quiet, 1, (outcome){print_outcome, (void *)c, NULL});
out:
  free(s.id);
  client_close(cl);
  return rc;
}
