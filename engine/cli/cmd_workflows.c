/* cmd_workflows: the commands on workflows that exist, once for both ways
 * (client_ops.h): signal, message / interrupt / close, cancel, list, show,
 * history, events. Each checks what it can before anything is opened or
 * sent, asks the client, and prints its answer: the same lines, JSON and
 * exit codes with the local database as with --server. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_ops.h"
#include "json.h"
#include "render.h"
#include "util.h"
#include "workflow_ops.h"

/* ------------------------------------------------------- signal / cancel --- */

static const char *SIGNAL_HELP =
    "usage: engine signal ID NAME [JSON] [--db PATH]\n"
    "\n"
    "Sends signal NAME with a JSON payload (default null) to workflow ID. A signal\n"
    "that arrives before the workflow waits for it is buffered. Exit 2 when the\n"
    "workflow is unknown or already finished.\n";

int cmd_signal(args *a, common *c) {
  const char *pos[3] = {NULL, NULL, "null"};
  int rc = cli_parse_simple(a, c, SIGNAL_HELP, pos, 3, 2);
  if (rc || c->help) return rc;
  char err[512];
  /* all checked before the database is opened or the server asked */
  if (engine_check_signal_name(pos[1], err, sizeof err) != 0 || engine_reserved_signal(pos[1], err, sizeof err))
    return cli_die(EXIT_USAGE, "%s", err);
  char *canon = json_accept(pos[2], strlen(pos[2]), "the signal payload", err, sizeof err);
  if (!canon) return cli_die(EXIT_USAGE, "%s", err);
  client *cl;
  client_err e;
  if ((rc = client_open(c, &cl)) == 0 && cl->ops->signal(cl, pos[0], pos[1], canon, &e) != 0) rc = client_fail(&e, NULL);
  free(canon);
  client_close(cl);
  if (rc == EXIT_OK) render_line(stderr, DIE_MAX, "engine: signal '%s' sent to %s", pos[1], pos[0]);
  return rc;
}

static const char *MESSAGE_HELP =
    "usage: engine message ID TEXT [--db PATH]\n"
    "       engine interrupt ID [--reason TEXT] [--db PATH]\n"
    "       engine close ID [--db PATH]\n"
    "\n"
    "Tells a running agent session something, recorded with who sent it.\n"
    "message: TEXT joins the transcript before the session's next model turn\n"
    "(event user.message). interrupt: the session stops at its next safe point\n"
    "(before a model turn, before a turn's tool calls run), says so\n"
    "(session.interrupted) and waits for a message. close: a chat\n"
    "(workflows/chat.lua, or a session started with waitForMessages) ends\n"
    "after its current answer. Exit 2 when the workflow is unknown or\n"
    "finished, or TEXT is empty or over 64 KiB.\n";

/* message / interrupt / close: the signal session:input with the sender the
 * client knows (the local user; with --server, the token's identity). */
int cmd_session_input(args *a, common *c, const char *kind) {
  const char *pos[2] = {NULL, NULL}, *reason = NULL;
  int bad = 0, n = 0, want = strcmp(kind, "message") == 0 ? 2 : 1;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (strcmp(kind, "interrupt") == 0 && (v = cli_flag_value(a, "--reason", &bad))) reason = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) {
      fputs(MESSAGE_HELP, stdout);
      return EXIT_OK;
    } else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-' && cur[1]) return cli_die(EXIT_USAGE, "unknown option %s (see --help)", cur);
    else if (n < want) pos[n++] = cur;
    else return cli_die(EXIT_USAGE, "unexpected argument %s (see --help)", cur);
  }
  if (n < want) {
    fputs(MESSAGE_HELP, stderr);
    return EXIT_USAGE;
  }
  const char *text = want == 2 ? pos[1] : reason;
  char err[512], who[300];
  cli_local_identity(who, sizeof who);
  char *payload = engine_session_input(kind, text, who, err, sizeof err); /* checked before anything is opened */
  if (!payload) return cli_die(EXIT_USAGE, "%s: %s", kind, err);
  free(payload);
  client *cl;
  client_err e;
  int rc = client_open(c, &cl);
  if (rc == EXIT_OK && cl->ops->session_input(cl, pos[0], kind, text, &e) != 0) rc = client_fail(&e, NULL);
  client_close(cl);
  if (rc == EXIT_OK) render_line(stderr, DIE_MAX, "engine: %s sent to %s", kind, pos[0]);
  return rc;
}

static const char *CANCEL_HELP =
    "usage: engine cancel ID [--db PATH]\n"
    "\n"
    "Requests cancellation: the command the workflow waits on raises a Cancelled\n"
    "error in the script, which can run its cleanup (activities included) and then\n"
    "ends as cancelled.\n";

int cmd_cancel(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, CANCEL_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  client *cl;
  client_err e;
  if ((rc = client_open(c, &cl)) == 0 && cl->ops->cancel(cl, pos[0], &e) != 0) rc = client_fail(&e, NULL);
  client_close(cl);
  if (rc == EXIT_OK) render_line(stderr, DIE_MAX, "engine: cancellation of %s requested", pos[0]);
  return rc;
}

/* ----------------------------------------------------------- list / show --- */

static const char *LIST_HELP =
    "usage: engine list [--status S] [--tree] [--json] [--db PATH]\n"
    "\n"
    "Lists workflows (S: running, waiting, queued, completed, failed, cancelled, stuck).\n"
    "--tree puts each child workflow (wf.child) under its parent, indented; a child\n"
    "whose parent is not listed (another status) is a root of its own. With --json\n"
    "the items come in that order (a child's has \"parent\").\n";

/* An item of `list --tree`, kept until every page came. */
typedef struct tree_item {
  char *id, *parent, *item;
  size_t n;
  int shown;
} tree_item;

typedef struct list_out {
  const common *c;
  int header; /* the header line is printed */
  int tree;
  tree_item *v;
  size_t nv, capv;
} list_out;

static void list_header(list_out *l) {
  if (!l->header && !l->c->json) printf("%-36s %-10s %4s  %-24s  %s\n", "ID", "STATUS", "RUN", "UPDATED", "SCRIPT");
  l->header = 1;
}

/* An item of a list or a history: its JSON as it is (--json), else the line
 * line_of makes of it. */
static void print_item(int json, const char *item, size_t n, char *(*line_of)(const char *, size_t)) {
  if (json) {
    cli_put_json(stdout, util_fmt("%.*s", (int)n, item));
    return;
  }
  char *line = line_of(item, n);
  printf("%s\n", line);
  free(line);
}

/* One workflow of a list, from its JSON (view_list_item_json, an item of
 * GET /v1/workflows). */
static int print_list_item(void *ud, const char *item, size_t n) {
  list_out *l = ud;
  if (l->tree) {
    if (l->nv == l->capv) {
      l->capv = l->capv ? 2 * l->capv : 64;
      l->v = util_xrealloc(l->v, l->capv * sizeof *l->v);
    }
    char *id = json_get_string(item, n, "id"), *parent = json_get_string(item, n, "parent");
    l->v[l->nv++] = (tree_item){id ? id : util_strdup(""), parent, util_fmt("%.*s", (int)n, item), n, 0};
    return 0;
  }
  list_header(l);
  print_item(l->c->json, item, n, view_list_line);
  return 0;
}

/* Item i and, under it, the items whose parent it is, depth first. */
static void print_subtree(list_out *l, size_t i, int depth) {
  tree_item *t = &l->v[i];
  if (t->shown) return; /* each once, whatever the rows say */
  t->shown = 1;
  if (l->c->json) {
    cli_put_json(stdout, util_strdup(t->item));
  } else {
    char *line = view_list_line_at(t->item, t->n, depth);
    printf("%s\n", line);
    free(line);
  }
  for (size_t k = 0; k < l->nv; k++)
    if (l->v[k].parent && strcmp(l->v[k].parent, t->id) == 0) print_subtree(l, k, depth + 1);
}

/* --tree: the roots in list order (a workflow without a parent, or whose
 * parent is not in the list), each with its children under it. */
static void print_tree(list_out *l) {
  list_header(l);
  for (size_t i = 0; i < l->nv; i++) {
    int root = 1;
    for (size_t k = 0; l->v[i].parent && k < l->nv && root; k++) root = strcmp(l->v[k].id, l->v[i].parent) != 0;
    if (root) print_subtree(l, i, 0);
  }
  for (size_t i = 0; i < l->nv; i++) print_subtree(l, i, 0); /* a cycle no root reaches */
}

static void tree_free(list_out *l) {
  for (size_t i = 0; i < l->nv; i++) {
    free(l->v[i].id);
    free(l->v[i].parent);
    free(l->v[i].item);
  }
  free(l->v);
}

int cmd_list(args *a, common *c) {
  const char *status = NULL;
  int bad = 0, tree = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--status", &bad))) status = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--tree")) tree = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(LIST_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else return cli_die(EXIT_USAGE, "list: unknown argument %s", cur);
  }
  static const char *known[] = {"running", "waiting", "queued", "completed", "failed", "cancelled", "stuck", NULL};
  if (status) {
    int ok = 0;
    for (const char **k = known; *k; k++) ok |= strcmp(*k, status) == 0;
    if (!ok) return cli_die(EXIT_USAGE, "list: unknown status '%s'", status);
  }
  client *cl;
  int rc = client_open(c, &cl);
  if (rc) return rc;
  /* page by page; the header once the first page came (not before an error) */
  list_out l = {c, 0, tree, NULL, 0, 0};
  char *cursor = NULL;
  do {
    char *next = NULL;
    client_err e;
    if (cl->ops->list(cl, status, cursor, print_list_item, &l, &next, &e) != 0) rc = client_fail(&e, NULL);
    else if (!tree) list_header(&l);
    free(cursor);
    cursor = next;
  } while (cursor && rc == EXIT_OK);
  free(cursor);
  if (tree && rc == EXIT_OK) print_tree(&l);
  tree_free(&l);
  fflush(stdout);
  client_close(cl);
  return rc;
}

/* A JSON value of `show` laid out for a terminal (view_fold). */
static char *fold_json(const char *json, size_t n, size_t col, void *ud) {
  ubuf b = {0};
  if (pretty_json(&b, json, n, col, ud) != 0) return ubuf_free(&b), NULL;
  ubuf_add(&b, "", 1);
  return b.p;
}

static const char *SHOW_HELP =
    "usage: engine show ID [--json] [--color WHEN] [--db PATH]\n"
    "\n"
    "Shows a workflow: status, what it waits on, input, result or error, counts.\n"
    "On a terminal the input, result, sandbox and artifacts are indented JSON folded\n"
    "to its width (long strings cut, with the number of bytes left out); piped, each\n"
    "is one line. --json prints the summary as one JSON object.\n";

int cmd_show(args *a, common *c) {
  const char *pos[1] = {NULL};
  int rc = cli_parse_simple(a, c, SHOW_HELP, pos, 1, 1);
  if (rc || c->help) return rc;
  client *cl;
  client_err e;
  char *json = NULL;
  if ((rc = client_open(c, &cl)) == 0 && cl->ops->summary(cl, pos[0], &json, &e) != 0) rc = client_fail(&e, NULL);
  client_close(cl);
  if (rc) return rc;
  if (c->json) {
    cli_put_json(stdout, json);
    return EXIT_OK;
  }
  pretty_opts o = cli_stdout_layout(c);
  char *text = cli_human_stdout(c) ? view_summary_text_folded(json, strlen(json), fold_json, &o)
                                   : view_summary_text(json, strlen(json));
  free(json);
  if (!text) return cli_die(EXIT_USAGE, "the summary of %s is not a workflow's summary", pos[0]);
  fputs(text, stdout);
  free(text);
  return EXIT_OK;
}

/* -------------------------------------------------------------- history --- */

static const char *HISTORY_HELP =
    "usage: engine history ID [--run N] [--json] [--db PATH]\n"
    "\n"
    "Prints the engine's event log of a workflow run (default: the current run).\n";

/* One event of a history, from its JSON (view_hist_item_json, an item of
 * GET /v1/workflows/ID/history). */
static int print_hist_item(void *ud, const char *item, size_t n) {
  const common *c = ud;
  print_item(c->json, item, n, view_hist_line);
  return 0;
}

int cmd_history(args *a, common *c) {
  const char *id = NULL;
  int64_t run = 0;
  int bad = 0;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if ((v = cli_flag_value(a, "--run", &bad))) run = atoll(v);
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(HISTORY_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "history: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "history: unexpected argument %s", cur);
  }
  if (!id) return cli_die(EXIT_USAGE, "history: missing ID (see engine history --help)");
  client *cl;
  client_err e;
  int rc = client_open(c, &cl);
  if (rc == EXIT_OK && cl->ops->history(cl, id, run, print_hist_item, c, &e) != 0) rc = client_fail(&e, NULL);
  client_close(cl);
  return rc;
}

/* --------------------------------------------------------------- events --- */

static const char *EVENTS_HELP =
    "usage: engine events ID [--follow] [--full] [--json] [--color WHEN] [--db PATH]\n"
    "\n"
    "Prints the workflow's domain events (what wf.emit recorded), one per line.\n"
    "On a terminal they read as a transcript: each event wrapped to the width,\n"
    "text with newlines on rows of its own, approvals marked (?? APPROVAL NEEDED,\n"
    "ok APPROVED by WHO, !! DENIED by WHO; in colour unless NO_COLOR is set), and\n"
    "an event taller than the screen (a long tool result) folded to its first\n"
    "rows and \"[... N bytes more: engine events ID --full]\".\n"
    "--full prints every event whole in that form, folded nowhere and cut nowhere\n"
    "(piped too, without wrapping; --json has every byte anyway). Piped without\n"
    "--full, the lines stay one per event, long fields cut, as scripts read them.\n"
    "--follow keeps printing new events until the workflow ends.\n"
    "--json prints one JSON object per line: session_id, seq, type, time, payload.\n"
    "With engine --server URL events ID --follow, the text a model writes as it\n"
    "streams (agent.delta, never recorded) shows too, on one line per model step\n"
    "starting with \"~ live (step N): \"; --json leaves it out, so its lines are the\n"
    "recorded events, the same as without --server. A dropped stream resumes where\n"
    "it stopped (Last-Event-ID); after 6 failed attempts (about 16 s) it exits 2.\n";

/* How events are laid out for people on stdout: a transcript on a terminal
 * (its width and height) or with --full (folded nowhere), else NULL: the
 * lines scripts read, byte for byte as they always were. more gets the
 * command a folded event names (freed by the caller). */
static const view_layout *events_layout(const common *c, view_layout *lay, const char *id, int full, char **more) {
  int cols, rows, tty = view_terminal_size(STDOUT_FILENO, &cols, &rows);
  *more = NULL;
  if (c->json || (!tty && !full)) return NULL;
  *more = util_fmt("engine events %s --full", id);
  *lay = (view_layout){tty ? cols : 0, tty ? rows : 0, full, cli_color_on(c, STDOUT_FILENO), *more};
  return lay;
}

/* A page's events printed, and the seq of the last one. */
typedef struct events_out {
  cli_printer p;
  int64_t last;
} events_out;

static void print_page_event(void *ud, const domain_event *e) {
  events_out *o = ud;
  cli_print_event(&o->p, e);
  o->last = e->seq;
}

/* Every event so far, page by page; with follow, the events as they come
 * until the workflow ends (for people, with the text a model streams, which
 * only a server's stream carries). */
static int print_events(client *cl, const char *id, int follow, const common *c, const view_layout *lay) {
  events_out o = {{stdout, c->json, lay, follow, 0, 0}, 0};
  client_err e;
  int rc = EXIT_OK;
  if (follow) {
    client_sink sink = {cli_print_event, c->json ? NULL : cli_print_live, &o.p};
    if (cl->ops->follow(cl, id, CLIENT_FOLLOW_EVENTS, &sink, NULL, &e) != 0) rc = -1;
  } else {
    for (int more = 1; more && rc == EXIT_OK;)
      if (cl->ops->events(cl, id, o.last, print_page_event, &o, &more, &e) != 0) rc = -1;
  }
  cli_print_end(&o.p);
  return rc ? client_fail(&e, NULL) : EXIT_OK;
}

int cmd_events(args *a, common *c) {
  const char *id = NULL;
  int follow = 0, full = 0, bad = 0, rc;
  for (; a->i < a->argc; a->i++) {
    const char *cur = a->argv[a->i], *v;
    if ((v = cli_flag_value(a, "--db", &bad))) c->db = v;
    else if (cli_is_flag(cur, "--json")) c->json = 1;
    else if (cli_is_flag(cur, "--follow") || cli_is_flag(cur, "-f")) follow = 1;
    else if (cli_is_flag(cur, "--full")) full = 1;
    else if ((v = cli_flag_value(a, "--color", &bad))) c->color = v;
    else if (cli_is_flag(cur, "--help") || cli_is_flag(cur, "-h")) return fputs(EVENTS_HELP, stdout), EXIT_OK;
    else if (bad) return EXIT_USAGE;
    else if (cur[0] == '-') return cli_die(EXIT_USAGE, "events: unknown option %s", cur);
    else if (!id) id = cur;
    else return cli_die(EXIT_USAGE, "events: unexpected argument %s", cur);
  }
  if (!id) return cli_die(EXIT_USAGE, "events: missing ID (see engine events --help)");
  if ((rc = cli_check_color(c))) return rc;
  view_layout layout;
  char *more;
  const view_layout *lay = events_layout(c, &layout, id, full, &more);
  client *cl;
  if ((rc = client_open(c, &cl)) == 0) rc = print_events(cl, id, follow, c, lay);
  client_close(cl);
  free(more);
  return rc;
}
