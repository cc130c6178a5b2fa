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

typedef struct view_summary {
  wf_row w;
  char waiting[512]; /* what it waits on ("signal 'x' (event #4)"), or "" */
  size_t history_events;
  int tasks, signals;
  char sandbox[512]; /* the last sandbox.* event with a driver, or "" */
  char *artifacts;   /* JSON array of artifact.saved payloads, or NULL */
  char *waits;       /* what it waits on as JSON ({"kind":"approval"|"signal"|"timer"|"activity",...}), or NULL */
  int nartifacts;
} view_summary;

/* Loads the summary of workflow id: 1, 0 when there is no such workflow, -1
 * when the store cannot be read (err says what). view_summary_free after 1. */
int view_summary_load(store *st, const char *id, view_summary *s, char *err, size_t errlen);
/* The summary as one JSON object (what `show --json` prints). Malloc'd. */
char *view_summary_json(const view_summary *s);
void view_summary_free(view_summary *s);

#endif
