/* cli: the `engine` command line: the options before the command (where it
 * goes: --server, --token, --color), and the table of commands. Each command
 * is in a cmd_*.c file by group; those that ask a workflow something are
 * written once against client_ops.h, whose two implementations are the local
 * database (client_local.c) and the HTTP API of `engine serve --listen`
 * (client_http.c), so both print the same. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "cli_internal.h"
#include "completion.h"
#include "config.h"
#include "home.h"
#include "json.h"
#include "otel_export.h"
#include "store.h"
#include "wftest.h"

static const char *MAIN_HELP =
    "engine: durable workflows for long-running agent sessions\n"
    "\n"
    "usage: engine [--config FILE] [--server URL] [--token TOKEN] [--color WHEN] COMMAND [options]   (engine COMMAND --help)\n"
    "       engine --version\n"
    "\n"
    "  start FILE.lua [--input JSON|@file] [--id ID] [--detach]   run until done or waiting\n"
    "  fork ID (--at SEQ | --turn N) [--id NEW] [--input-patch JSON] [--script FILE]   run on from a point of ID\n"
    "  serve [--listen ADDR] [--workflows DIR]   worker for every workflow; --listen: the HTTP API\n"
    "  signal ID NAME [JSON]              send a signal\n"
    "  approve ID [--request RID] [--deny] [--reason TEXT]   answer an approval request\n"
    "  message ID TEXT, interrupt ID, close ID   talk to a running session\n"
    "  cancel ID                          cancel (the script's cleanup runs)\n"
    "  list [--status S]                  list workflows\n"
    "  show ID                            one workflow\n"
    "  events ID [--follow] [--full] [--json]   its domain events\n"
    "  history ID                         its event log\n"
    "  grants ID [--json]                 a session's grants, and each use and denial of one\n"
    "  eval SUITE [--baseline RUN] [--live]   run an eval suite's cases as sessions and score them\n"
    "  replay ID [--script FILE]          check that code replays a run's history\n"
    "  replay --all --script FILE         check an edited script against every live run of it\n"
    "  test FILE_test.lua...              workflow tests: stubbed activities, a clock that skips timers\n"
    "  audit export ID | verify FILE --key PUB | key   a session's signed audit export, checked offline\n"
    "  memory list [--kind K] [--identity I] | show ID | revoke ID [--reason R]   approved knowledge and preferences\n"
    "  gc                                 remove sandboxes of finished or unknown sessions\n"
    "  policy check [DIR]                 validate a policy set\n"
    "  trigger check|test|deliveries      webhook trigger scripts: validate, try a delivery, see deliveries\n"
    "  token create|list|revoke           API tokens for the HTTP API\n"
    "  quota list                         quotas of the limits file: use and limits\n"
    "  schedule create|list|pause|resume|trigger|delete   cron schedules that engine serve starts\n"
    "  migrate [--from DB --to DB]        schema up to date; or copy a database (SQLite <-> PostgreSQL)\n"
    "  verify ID... | --all               check the workflows' hash chains and artifacts\n"
    "  doctor [--json]                    check this host for a first session: database, sandbox, keys, ...\n"
    "  completion bash|zsh                a shell completion script: source <(engine completion bash)\n"
    "  config [--json]                    every setting, its value and where it came from\n"
    "\n"
    "Database: --db PATH, else $ENGINE_DB, else ./engine.db; a postgres:// URL is a PostgreSQL\n"
    "  database (its limits.lua and workspaces are in $ENGINE_DATA_DIR, else ./engine-data)\n"
    "Server: --server URL (else $ENGINE_SERVER; http:// or https://) before the command sends start,\n"
    "  fork, list, show, events, history, signal, approve and cancel to `engine serve --listen` there\n"
    "  instead of opening a database, with the same output and exit codes; the token is\n"
    "  --token TOKEN, else $ENGINE_TOKEN (sent as Authorization: Bearer, never printed)\n"
    "Output: on a terminal, start and show print for people; piped, or with --json, what\n"
    "  scripts read. --color auto|always|never (before or after the command): auto colours\n"
    "  a terminal's output unless NO_COLOR is set (not empty) or TERM is dumb\n"
    "Configuration: --config FILE, else $ENGINE_CONFIG, else /etc/engine/engine.conf when it\n"
    "  exists (\"none\": no file); the environment overrides the file, a flag both (engine config)\n"
    "Exit codes: 0 success, 1 workflow failed, 2 usage or input error, 3 waiting or stuck\n";

static int cmd_message(args *a, common *c) { return cmd_session_input(a, c, "message"); }
static int cmd_interrupt(args *a, common *c) { return cmd_session_input(a, c, "interrupt"); }
static int cmd_close(args *a, common *c) { return cmd_session_input(a, c, "close"); }

/* The commands: with local set, one runs on this machine only (its database,
 * its files) and refuses --server; the others run either way. */
typedef struct command {
  const char *name;
  int (*run)(args *a, common *c);
  int local;
} command;

static const command COMMANDS[] = {
    /* cmd_start.c, cmd_workflows.c, cmd_approvals.c: the local database or --server */
    {"start", cmd_start, 0},
    {"fork", cmd_fork, 0},
    {"signal", cmd_signal, 0},
    {"message", cmd_message, 0},
    {"interrupt", cmd_interrupt, 0},
    {"close", cmd_close, 0},
    {"cancel", cmd_cancel, 0},
    {"list", cmd_list, 0},
    {"show", cmd_show, 0},
    {"events", cmd_events, 0},
    {"history", cmd_history, 0},
    {"grants", cmd_grants, 0},
    {"approve", cmd_approve, 0},
    {"audit", cmd_audit, 0}, /* cmd_audit.c: export either way; verify and key need no server */
    {"memory", cmd_memory, 0}, /* cmd_memory.c */
    /* cmd_replay.c, cmd_admin.c: this machine only */
    {"replay", cmd_replay, 1},
    {"eval", cmd_eval, 1},
    {"serve", cmd_serve, 1},
    {"gc", cmd_gc, 1},
    {"policy", cmd_policy, 1},
    {"trigger", cmd_trigger, 1},
    {"token", cmd_token, 1},
    {"quota", cmd_quota, 1},
    {"schedule", cmd_schedule, 1},
    {"migrate", cmd_migrate, 1},
    {"verify", cmd_verify, 1},
    {"config", cmd_config, 0},
    {"doctor", cmd_doctor, 1},
};

/* engine --version: what this binary is and which databases it reads. */
static int print_version(void) {
  printf("engine %s (commit %s)\nstore schema: SQLite %d, PostgreSQL %d\n", engine_build_version, engine_build_commit,
         STORE_SQLITE_SCHEMA_VERSION, STORE_PG_SCHEMA_VERSION);
  return EXIT_OK;
}

int cli_main(int argc, char **argv) {
  /* the options before the command: which configuration, where the command goes */
  const char *config = NULL, *server = NULL, *token = NULL, *color = NULL;
  args a = {argc, argv, 1};
  for (; a.i < argc; a.i++) {
    int bad = 0;
    const char *v;
    if ((v = cli_flag_value(&a, "--config", &bad))) config = v;
    else if ((v = cli_flag_value(&a, "--server", &bad))) server = v;
    else if ((v = cli_flag_value(&a, "--token", &bad))) token = v;
    else if ((v = cli_flag_value(&a, "--color", &bad))) color = v;
    else if (bad) return EXIT_USAGE;
    else if (cli_is_flag(argv[a.i], "--version")) return print_version();
    else break;
  }
  /* the file first: what it sets is the environment's default from here on */
  char err[1024];
  if (config_load(config, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "%s", err);
  const char *env_server = getenv("ENGINE_SERVER");
  common c = {cli_default_db(), 0, 0, NULL, NULL, token ? token : getenv("ENGINE_TOKEN"), 0, color};
  c.db_default = c.db;
  if (server) c.server = server, config_flag("server", server);
  else if (env_server && *env_server) c.server = env_server, c.server_from_env = 1;
  if (token) config_flag("token", token);
  if (a.i >= argc || cli_is_flag(argv[a.i], "--help") || cli_is_flag(argv[a.i], "-h") || cli_is_flag(argv[a.i], "help")) {
    fputs(MAIN_HELP, a.i >= argc ? stderr : stdout);
    return a.i >= argc ? EXIT_USAGE : EXIT_OK;
  }
  const char *cmd = argv[a.i++];
  /* a home that is named must be right (nothing else is looked at); doctor
   * and config report it in their tables instead */
  const char *home = getenv("ENGINE_HOME");
  if (home && *home && !engine_home() && strcmp(cmd, "doctor") != 0 && strcmp(cmd, "config") != 0)
    return cli_die(EXIT_USAGE, "%s", engine_home_error());
  if (strcmp(cmd, "completion") == 0) return completion_script(argc - a.i, argv + a.i);
  if (strcmp(cmd, "__complete") == 0) return completion_query(argc - a.i, argv + a.i); /* for the scripts */
  if (strcmp(cmd, "test") == 0) return wftest_main(argc - a.i, argv + a.i); /* no database, no server */
  if (json_max_payload_check(err, sizeof err) != 0) return cli_die(EXIT_USAGE, "%s", err);
  /* read where a child starts, deep in a run: a bad value stops the command here instead */
  static const char *const checked_ints[] = {"child_max_depth", "child_max_fanout"};
  for (size_t i = 0; i < sizeof checked_ints / sizeof *checked_ints; i++) {
    long long v;
    if (config_int(checked_ints[i], &v, err, sizeof err) != 0) return cli_die(EXIT_USAGE, "%s", err);
  }
  /* the commands that may run workflows in this process export their spans:
   * a bad OTEL_* variable stops them before anything is written */
  if ((strcmp(cmd, "serve") == 0 || ((strcmp(cmd, "start") == 0 || strcmp(cmd, "fork") == 0) && !c.server)) && otel_config_check(err, sizeof err) != 0)
    return cli_die(EXIT_USAGE, "%s", err);
  if (cli_check_color(&c)) return EXIT_USAGE;
  const command *found = NULL;
  for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS && !found; i++)
    if (strcmp(cmd, COMMANDS[i].name) == 0) found = &COMMANDS[i];
  if (found && found->local && c.server && !cli_asks_help(&a))
    return cli_die(EXIT_USAGE, "%s does not work with --server (yet)%s", cmd,
                   c.server_from_env ? "; ENGINE_SERVER is set: unset it to run it on this machine" : "");
  if (found) return found->run(&a, &c);
  return cli_die(EXIT_USAGE, "unknown command '%s' (see engine --help)", cmd);
}
