/* progress: what a session running in the foreground (`engine start`, the
 * worker itself) is doing now, on stderr. It learns from the recorded events
 * (tool.requested, agent.message with its usage, approvals), from what the
 * run waits on after each commit (view_waits_now: an activity and its
 * attempt, an approval, a signal, a timer) and from the text a model streams
 * (agent.delta, never recorded).
 *
 * On a terminal it keeps a status area below the events: one line ("model
 * turn 3 streaming: 812 characters so far (4 s)", "tool shell running for
 * 12 s", "waiting for approval of shell since 10:42:01 (3 min)" and the
 * command that answers it), redrawn in place every second and after each
 * change, with the model's text as it streams above it, replaced by the
 * recorded agent.message when the turn ends. Events are printed above the
 * area as transcript rows (view_event_transcript). Elsewhere (a pipe, a log,
 * TERM=dumb) it writes plain lines only when the state changes ("~ model turn
 * 3", the waiting lines with their commands), events as view_event_line and
 * the streamed text on "~ live (step N): " lines. Every byte of data goes
 * through render.h. */
#ifndef ENGINE_PROGRESS_H
#define ENGINE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "store.h"

typedef struct progress progress;

/* A status for workflow id, written to out (a terminal when tty); color: SGR
 * sequences allowed. st is where it reads what the run waits on (NULL: only
 * what progress_set_waits tells it). */
progress *progress_new(FILE *out, store *st, const char *id, int tty, int color);
/* Shows the status from now on (before, only events print), with a 1 s
 * timer on loop that redraws (terminal) and rereads the state (an activity's
 * next attempt writes no event); loop NULL: no timer. Returns 0 or a libuv
 * error (the status still shows, at each change). */
int progress_start(progress *p, uv_loop_t *loop);
/* Erases the status area (what is printed next starts on a clean line) and
 * ends an open live line; closes the timer (the loop frees it when it runs or
 * is drained). The status comes back with the next change. */
void progress_stop(progress *p);
void progress_free(progress *p);

/* Prints a recorded event of the workflow above the status area, and learns
 * what the session does from it. */
void progress_event(progress *p, const domain_event *e);
/* The payload of an agent.delta ({step, attempt, delta: {type, text|arguments}}). */
void progress_delta(progress *p, const char *payload);
/* Rereads what the run waits on (after a commit) and shows it if it changed. */
void progress_refresh(progress *p);
/* What the run waits on now: view_waits_now's JSON, NULL for nothing. */
void progress_set_waits(progress *p, const char *waits);

/* The status as text (rendered), its rows separated by newlines, as at
 * now_ms (wall clock); with durations (the terminal's line) or without (the
 * plain line; "" when that state prints none). Malloc'd. */
char *progress_status(const progress *p, int64_t now_ms, int durations);

/* "12 s", "3 min 04 s", "2 h 05 min" into out. */
void progress_duration(int64_t ms, char *out, size_t n);

#endif
