/* session_view: what a client shows of a workflow and its session, in one
 * place for the CLI and the HTTP API: a domain event as a transcript line (for
 * people) or as JSON, and a workflow's summary (status, what it waits on,
 * counts, its sandbox and artifacts). Lines for people are terminal-safe
 * (render.h); JSON is as the log holds it, for json_for_output. */
#ifndef ENGINE_SESSION_VIEW_H
#define ENGINE_SESSION_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "util.h"

/* "2026-12-01 11:05:38.123Z" in out (at least 32 bytes). */
void view_time(int64_t ms, char *out, size_t n);

/* The top-level field key of the JSON object text (an error, a payload) as
 * one rendered line in out (strings as they are, other values as JSON); ""
 * when text is not an object or has no such field. Returns out. */
const char *view_json_field(const char *text, const char *key, char *out, size_t max);

/* The event as one transcript line, without a newline: "#SEQ TIME  TEXT",
 * known session events in their own words, others as type and payload (cut
 * at 1,000 bytes: a line, not a dump). Malloc'd. */
char *view_event_line(const domain_event *e);

/* The event as a JSON object {session_id, seq, type, time, payload}. Malloc'd. */
char *view_event_json(const domain_event *e);

/* ---- cost and tokens of a tree of sessions ----
 * A session's own spend is what its own model turns used: its result's (or,
 * for a sub-session that failed, its error's "usage") `tokens` and
 * `cost_usd` less its `sub_sessions`' (a delegating session's totals include
 * what its ended sub-sessions spent). A tree's spend is the sum of the own
 * spend of the workflow and every workflow under it by the parent column, so
 * nothing is counted twice. A workflow that has not ended (or ended with no
 * numbers) counts nothing yet; `running` says how many have not ended. */
typedef struct view_spend {
  int64_t tokens;
  double cost_usd;
  int known;  /* the result (or error usage) had tokens */
  int priced; /* it had cost_usd */
} view_spend;

/* The own spend of a workflow from its result and error texts (either may be
 * NULL): 1 with *out filled when it has numbers, else 0 (*out zero). */
int view_own_spend(const char *result, const char *error, view_spend *out);

typedef struct view_tree {
  int64_t sessions; /* the workflow and those under it */
  int64_t running;  /* of them, those not ended */
  int64_t tokens;   /* the sum of their own tokens */
  double cost_usd;  /* the sum of their own cost */
  int priced;       /* a session of it had a cost (else the cost is unknown: null) */
} view_tree;

/* At most this many workflows under one are counted (a tree is bounded by
 * child_max_depth and child_max_fanout far below it). */
#define VIEW_TREE_MAX 10000

/* Adds a workflow (its status, result and error) to t. */
void view_tree_add(view_tree *t, const wf_row *w);
/* The tree of workflow w (w itself and every workflow under it): 0, or -1
 * when the store cannot be read (err says what). */
int view_tree_load(store *st, const wf_row *w, view_tree *t, char *err, size_t errlen);
/* The tree as JSON {sessions, tokens, cost_usd, running}. Malloc'd. */
char *view_tree_json(const view_tree *t);

typedef struct view_summary {
  wf_row w;
  char waiting[512]; /* what it waits on ("signal 'x' (event #4)"), or "" */
  size_t history_events;
  int tasks, signals;
  char *sandbox;     /* the payload of the last sandbox.* event with a driver, or NULL */
  char *artifacts;   /* JSON array of artifact.saved payloads, or NULL */
  char *waits;       /* what it waits on as JSON ({"kind":"approval"|"signal"|"timer"|"activity",...}), or NULL */
  int nartifacts;
  char *children;    /* JSON array of the workflows it started as children ([] when none) */
  char *forks;       /* JSON array of the workflows forked from it (engine fork; [] when none) */
  view_tree tree;    /* it and every workflow under it: cost and tokens rolled up */
} view_summary;

/* Loads the summary of workflow id: 1, 0 when there is no such workflow, -1
 * when the store cannot be read, STORE_ECORRUPT when the workflow's log is
 * damaged (err says what: the first bad seq). view_summary_free after 1. */
int view_summary_load(store *st, const char *id, view_summary *s, char *err, size_t errlen);
/* The summary as one JSON object (what `show --json` prints). Malloc'd. */
char *view_summary_json(const view_summary *s);
void view_summary_free(view_summary *s);
/* The summary of a workflow just started, from its row as written (its
 * first event and its task; nothing under it): what view_summary_json
 * shows of it once that start is committed. Malloc'd. */
char *view_summary_json_started(const wf_row *w);

/* ---- rendering what the HTTP API answers ----
 * The CLI prints from the same JSON in both modes (local, and `--server`): a
 * local command builds the JSON the API would send and prints it through
 * these, so both show the same lines. Each returns malloc'd rendered text,
 * NULL when the JSON is not what it expects. */

/* Member key of the JSON object json[0..n) as text (malloc'd): a string
 * decoded, any other value as its JSON text (an error is an object or a
 * text); NULL when absent or null. */
char *view_json_member(const char *json, size_t n, const char *key);

/* A workflow's summary (view_summary_json, GET /v1/workflows/ID) as the
 * lines `show` prints, each ending in a newline. */
char *view_summary_text(const char *json, size_t n);
/* The same, with the JSON values (input, result, an error object, the
 * sandbox, the artifacts) laid out by fold: it gets the value's JSON and the column it
 * starts at, and returns its rendered text (malloc'd, no final newline), or
 * NULL for the one-line form. */
typedef char *(*view_fold)(const char *json, size_t n, size_t col, void *ud);
char *view_summary_text_folded(const char *json, size_t n, view_fold fold, void *ud);

/* One workflow of a list (`list --json`, an item of GET /v1/workflows) and
 * its line (ID, status, run, updated, script). */
/* A queued workflow's item has "queue": {pool, key, position} (1 is next);
 * a child's has "parent" (the id of the workflow that started it). */
char *view_list_item_json(store *st, const wf_row *w);
char *view_list_line(const char *item, size_t n);
/* The same for `list --tree`: the id indented by its depth under its root
 * (0: a root), "- " before a child's. */
char *view_list_line_at(const char *item, size_t n, int depth);

/* One history event (`history --json`, an item of GET .../history) and its
 * line, without a newline. */
char *view_hist_item_json(const hist_event *e);
char *view_hist_line(const char *item, size_t n);

/* A domain event decoded from its JSON (view_event_json, an SSE frame's
 * data): e points into the strings, the payload kept as the JSON text sent. */
typedef struct view_event {
  domain_event e;
  char *session_id, *type, *payload;
} view_event;
int view_event_parse(const char *json, size_t n, view_event *out); /* 0, or -1 */
void view_event_free(view_event *ev);

/* The text of an agent.delta frame (a model's text as it streams; never
 * logged) rendered for a line, with its step (the model turn's seq) in
 * *step; NULL for other deltas (tool calls). */
char *view_live_text(const char *json, size_t n, int64_t *step);
/* What opens the line of a step's live text ("~ live (step 12): "). */
char *view_live_head(int64_t step);

/* ---- transcripts for a terminal ----
 * `engine events` on a terminal, and the events of a foreground start on one:
 * each event laid out to the terminal's width, a body taller than the screen
 * folded, approvals marked. Piped output keeps view_event_line. */

/* The columns a code point takes on a terminal: 0 (combining marks, zero
 * width joiners, variation selectors), 2 (East Asian wide and fullwidth
 * forms, emoji) or 1. */
int view_cp_width(uint32_t cp);

/* Lays text[0..n) out in rows of at most width columns (0: no limit): every
 * byte rendered (render.h; its newlines break rows, tabs go to the next
 * multiple of 8 columns), words wrapped at spaces, a word wider than a row
 * cut; trailing newlines dropped. The first row starts at column first_col
 * (the caller wrote what is before it), the others with indent spaces. Appends
 * at most max_rows rows (0: all) to out (NULL: only count), each ending in a
 * newline. Returns the number of rows the whole text takes; *shown (may be
 * NULL) gets how many bytes of text the appended rows hold. */
size_t view_wrap(ubuf *out, const char *text, size_t n, int width, int first_col, int indent, size_t max_rows,
                 size_t *shown);

typedef struct view_layout {
  int width;        /* columns to wrap to (0: no wrapping) */
  int height;       /* an event taller than this many rows is folded (0: never) */
  int full;         /* nothing folded */
  int color;        /* approvals in colour (SGR sequences of its own, never from data) */
  const char *more; /* the command that prints a folded event whole ("engine events ID --full") */
} view_layout;

/* The event as transcript rows, each ending in a newline: "#SEQ TIME  TEXT"
 * in the words of view_event_line, but nothing cut: multi-line text on rows of
 * its own (indented under its start), wrapped to lay->width; approvals
 * requested, decided and overruled marked ("?? APPROVAL NEEDED", "ok
 * APPROVED by WHO", "!! DENIED by WHO") with their reason and arguments on
 * rows below; an event taller than lay->height shown as its first rows and
 * "[... N bytes more: MORE]". Malloc'd. */
char *view_event_transcript(const domain_event *e, const view_layout *lay);

/* Whether out_fd is a terminal; its size in *cols and *rows (TIOCGWINSZ, else
 * $COLUMNS and $LINES, else 80x24). */
int view_terminal_size(int fd, int *cols, int *rows);

/* What workflow id waits on now (the "waits" JSON of its summary), from the
 * last event of its current run alone: cheap enough to ask after each commit.
 * Returns 1 with *waits malloc'd (NULL: it waits on nothing, it runs or has
 * ended) and *seq the run's last event, 0 when there is no such workflow, -1
 * when the store cannot be read. */
int view_waits_now(store *st, const char *id, char **waits, int64_t *seq);

/* A webhook delivery as the JSON the CLI and the API print (malloc'd):
 * {received_at, trigger, delivery, outcome, status, workflow_id, detail}. */
char *view_delivery_json(const delivery_row *d);

#endif
