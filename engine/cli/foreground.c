/* foreground: a workflow run in the foreground by `engine start`, this
 * process being the worker (see foreground.h). Its events and what it does
 * now go to stderr through progress.c: on a terminal as a transcript above a
 * status line, elsewhere as plain lines. */
#include "foreground.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "progress.h"
#include "render.h"
#include "util.h"

typedef struct fg {
  engine *e;
  const char *id;
  int64_t last; /* the seq of the event shown last */
  int quiet;
  progress *prog; /* what the session does now, on stderr; NULL with --quiet */
  int damaged;    /* its event stream did not check (said once) */
} fg;

static int on_domain(void *ud, const domain_event *e) {
  fg *s = ud;
  if (s->prog) {
    progress_event(s->prog, e);
  } else {
    char *line = view_event_line(e);
    fprintf(stderr, "%s\n", line);
    free(line);
  }
  s->last = e->seq;
  return 0;
}

/* Shows the events after the last one shown. */
static void show_new(fg *s) {
  store *st = engine_store(s->e);
  /* a damaged stream shows nothing of it, and says so (once) */
  if (store_domain_list(st, s->id, s->last, on_domain, s) == STORE_ECORRUPT && !s->damaged++)
    render_line(stderr, DIE_MAX, "engine: %s", store_errmsg(st));
  fflush(stderr);
}

/* The worker hears its model's text as the API's watchers do (activity.live):
 * on a terminal above the status line, replaced by the recorded message;
 * elsewhere on "~ live" lines. */
static void on_live(void *ud, const char *id, const char *type, const char *json) {
  fg *s = ud;
  if (!s->prog || strcmp(id, s->id) != 0 || strcmp(type, "agent.delta") != 0) return;
  progress_delta(s->prog, json);
}

/* What it waits on is shown by the status (on_commit): an approval or a
 * signal with the command that answers it. */
static void on_status(void *ud, const char *id, const char *status, const char *detail) {
  fg *s = ud;
  (void)detail;
  if (strcmp(id, s->id) != 0) return;
  if (engine_status_terminal(status) || strcmp(status, "stuck") == 0) engine_stop(s->e);
}

/* After each commit: the new events, then what the run does now. */
static void on_commit(void *ud) {
  fg *s = ud;
  if (s->quiet) return;
  show_new(s);
  progress_refresh(s->prog);
}

/* The summary of the run to report, while the worker is still open. */
static int report(fg *s, const client_run *run, int *code, char *err, size_t errlen) {
  view_summary v;
  char msg[700];
  int found = view_summary_load(engine_store(s->e), s->id, &v, msg, sizeof msg);
  if (found != 1) {
    if (found == 0) util_seterr(err, errlen, "workflow '%s' vanished", s->id);
    else util_seterr(err, errlen, "%s", msg);
    return -1;
  }
  char *json = view_summary_json(&v);
  *code = run->report(run->ud, json, strlen(json));
  free(json);
  view_summary_free(&v);
  return 0;
}

int foreground_run(const char *db, const client_run *run, const char *input, const trace_start *trace, int *code,
                   char *err, size_t errlen) {
  fg s = {NULL, run->id, 0, run->quiet, NULL, 0};
  /* the worker runs every workflow of the database, not only this one: a
   * start that follows it must not wait for a worker that never runs it */
  engine_config cfg = {.db_path = db, .on_status = on_status, .on_commit = on_commit, .on_live = on_live, .ud = &s};
  if (engine_open(&s.e, &cfg, err, errlen) != 0) return -1;
  if (!run->quiet) {
    /* in place on a terminal that can move its cursor; plain lines elsewhere */
    const char *term = getenv("TERM");
    int tty = isatty(STDERR_FILENO) && !(term && strcmp(term, "dumb") == 0);
    s.prog = progress_new(stderr, engine_store(s.e), run->id, tty, run->color);
  }
  int existed = run->made; /* a fork exists already: it is carried on */
  if (!run->made &&
      engine_create_workflow(engine_store(s.e), run->id, run->script, input, trace, &existed, err, errlen) != 0) {
    engine_free(s.e);
    progress_free(s.prog);
    return -1;
  }
  wf_row w;
  int done = 0;
  if (store_wf_get(engine_store(s.e), run->id, &w) == 1) {
    done = engine_status_terminal(w.status);
    if (existed && !run->quiet && !run->made)
      render_line(stderr, DIE_MAX, "engine: %s exists (%s); %s", run->id, w.status,
                  done ? "it has finished" : "carrying it on from its log (its own script and input)");
    wf_row_free(&w);
  }
  if (!existed && !run->quiet) render_line(stderr, DIE_MAX, "engine: started %s", run->id);
  if (!done) {
    if (existed && !run->quiet) show_new(&s); /* what happened so far, then only what is new */
    if (s.prog) {
      progress_start(s.prog, engine_loop(s.e)); /* without its timer it still shows every change */
      progress_refresh(s.prog);
    }
    int failed = engine_run(s.e) != 0;
    if (s.prog) progress_stop(s.prog);
    if (failed) fprintf(stderr, "engine: the worker stopped after a store error\n");
  }
  if (!run->quiet) show_new(&s);
  if (s.prog) progress_stop(s.prog);
  int rc = report(&s, run, code, err, errlen);
  engine_free(s.e); /* drains the loop: the status timer's close runs */
  progress_free(s.prog);
  return rc;
}
