/* cli_internal: what the files of engine/cli share, and nothing outside this
 * folder includes. cli.c is the command table; each cmd_*.c a group of
 * commands; args.c reads arguments and --input; output.c prints; localdb.c
 * opens the local database as a command does; client_ops.h is how a command
 * asks the engine (the local database or a server). Exit codes: 0 success,
 * 1 workflow failed, 2 usage or input error, 3 waiting (detached or stuck). */
#ifndef ENGINE_CLI_INTERNAL_H
#define ENGINE_CLI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pretty.h"
#include "session_view.h"
#include "store.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_WAITING = 3 };

/* An error line is cut at DIE_MAX bytes. */
enum { DIE_MAX = 4096 };

/* The arguments, read from i on. */
typedef struct args {
  int argc;
  char **argv;
  int i;
} args;

/* Options common to every command. */
typedef struct common {
  const char *db;
  int json;
  int help;
  const char *db_default; /* db before any --db: a --db with --server is refused */
  const char *server;     /* --server URL or $ENGINE_SERVER: the command asks that API, NULL: the database */
  const char *token;      /* --token or $ENGINE_TOKEN, sent only as the bearer token */
  int server_from_env;
  const char *color; /* --color WHEN (global or after the command), NULL: auto */
} common;

/* ---- args.c: arguments and input ---- */

/* $ENGINE_DB, else engine.db. */
const char *cli_default_db(void);
/* The workflows of serve and the triggers' default folder: $ENGINE_WORKFLOWS_DIR,
 * else ./workflows when it exists, else the engine home's workflows/. */
const char *cli_workflows_dir(void);
int cli_is_flag(const char *a, const char *name);
/* Takes the value of --flag VALUE or --flag=VALUE; returns NULL if the
 * current argument is not it (*err set, after saying so, when the value is
 * missing). */
const char *cli_flag_value(args *a, const char *name, int *err);
/* Whether the arguments from a->i on ask for help. */
int cli_asks_help(const args *a);
/* The options of a command with up to npos positional arguments (at least
 * minpos): --db, --json, --color, --help (which prints help and sets
 * c->help). 0, or the exit code after saying what is wrong. */
int cli_parse_simple(args *a, common *c, const char *help, const char **pos, int npos, int minpos);
/* Reads --input JSON or @file and checks it (size, UTF-8, no NUL byte,
 * JSON): *out is its canonical form. 0, or the exit code after saying why. */
int cli_read_input(const char *spec, char **out);
/* The same for another flag that takes JSON or @file (named in what it says). */
int cli_read_json(const char *flag, const char *spec, char **out);

/* ---- output.c: every line for people and every JSON line ---- */

/* Says "engine: MESSAGE" on stderr (rendered, cut at DIE_MAX); returns code. */
int cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints one line of JSON (freeing it) as strict JSON (json_for_output). */
void cli_put_json(FILE *f, char *json);
/* --color WHEN: 0, or the exit code after naming the problem. */
int cli_check_color(const common *c);
/* Whether stdout gets the layout for people (pretty.h): a terminal, and no
 * --json. Anything else gets the bytes scripts read. */
int cli_human_stdout(const common *c);
/* Whether what goes to fd is coloured: --color, else auto (pretty.h). */
int cli_color_on(const common *c, int fd);
pretty_opts cli_stdout_layout(const common *c);

/* Prints a workflow's events as they come (events, a start that follows
 * one): each as its JSON line, or for people as its line (lay NULL) or its
 * transcript rows; for people also the text a model streams, on one
 * "~ live (step N): " line per model step. */
typedef struct cli_printer {
  FILE *out;
  int json;
  const view_layout *lay;
  int flush;     /* after each event: a follower's reader sees it at once */
  int live_open; /* a live line is being written */
  int64_t live_step;
} cli_printer;

/* Each takes a cli_printer as ud (client_sink's event and live). */
void cli_print_event(void *printer, const domain_event *e);
void cli_print_live(void *printer, const char *payload, size_t n);
/* Ends an open live line and flushes. */
void cli_print_end(cli_printer *p);

/* ---- localdb.c: the local database as a command opens it ---- */

/* Why the database at db cannot be written, or NULL. */
const char *cli_unwritable(const char *db, char *why, size_t n);
/* Opens the existing database at db: 0, or -1 with err ("no database at
 * ...", "cannot open database ...: ..."). */
int cli_db_open(const char *db, store **st, char *err, size_t errlen);
/* The same, or the exit code after saying why. */
int cli_open_existing(const char *db, store **st);
/* A read that failed is an error, never a shorter answer: says "cannot read
 * WHAT of ID: ..." and closes st; returns the exit code. */
int cli_read_failed(store *st, const char *what, const char *id);
/* Who acts from this shell: "local:USER" (the identity a start records and
 * an approval names; the API's are "token:NAME"). */
void cli_local_identity(char *out, size_t n);

/* ---- the commands (cmd_*.c): each returns the exit code ---- */

/* cmd_start.c */
int cmd_start(args *a, common *c);
int cmd_fork(args *a, common *c);
/* Prints a start's outcome from the workflow's summary (view_summary_json,
 * what GET /v1/workflows/ID answers) and returns the exit code. */
typedef int (*cli_outcome_fn)(void *ud, const char *id, const char *summary, size_t n);
/* engine start's outcome: the result (for people on a terminal, else its
 * JSON), or why it did not complete; the exit code. */
int cli_report_outcome(const char *id, const char *json, size_t n, const common *c);
/* A start as engine start runs it: recorded (or run in this process when no
 * worker runs), followed until it ends, its outcome printed by report.
 * again: the command that carries it on after an interruption, said with
 * --id ID (NULL: engine start SCRIPT). */
struct client_start_req;
int cli_start_run(const common *c, const struct client_start_req *req, cli_outcome_fn report, void *ud,
                  const char *again);
/* cmd_eval.c */
int cmd_eval(args *a, common *c);
/* cmd_workflows.c */
int cmd_signal(args *a, common *c);
/* cmd_config.c */
int cmd_config(args *a, common *c);
extern const char engine_build_version[], engine_build_commit[]; /* version.c, generated */
int cmd_session_input(args *a, common *c, const char *kind);
int cmd_cancel(args *a, common *c);
int cmd_list(args *a, common *c);
int cmd_show(args *a, common *c);
int cmd_history(args *a, common *c);
int cmd_events(args *a, common *c);
int cmd_grants(args *a, common *c); /* cmd_grants.c */
/* cmd_approvals.c */
int cmd_approve(args *a, common *c);
int cmd_audit(args *a, common *c);
int cmd_memory(args *a, common *c);
/* cmd_replay.c */
int cmd_replay(args *a, common *c);
/* cmd_admin.c */
int cmd_serve(args *a, common *c);
int cmd_gc(args *a, common *c);
int cmd_policy(args *a, common *c);
int cmd_trigger(args *a, common *c);
int cmd_token(args *a, common *c);
int cmd_schedule(args *a, common *c);
int cmd_quota(args *a, common *c);
int cmd_migrate(args *a, common *c);
/* cmd_verify.c */
int cmd_verify(args *a, common *c);
/* The webhook triggers' folder `trigger check` reads: $ENGINE_TRIGGERS_DIR,
 * else workflows/triggers. */
const char *cli_triggers_dir(void);
/* cmd_doctor.c */
int cmd_doctor(args *a, common *c);

#endif
