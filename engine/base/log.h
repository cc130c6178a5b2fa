/* log: the running engine's log on stderr, one line per message, each with
 * a level. Two formats:
 *
 *   text  "engine: MESSAGE", "engine: warning: MESSAGE", "engine: error:
 *         MESSAGE", terminal-safe (render.h). When stderr is the journal
 *         (JOURNAL_STREAM names it), each line begins with its syslog
 *         priority, "<4>engine: warning: ...", which journald takes as the
 *         level (sd-daemon.h's convention) and does not show.
 *   json  one object per line, {"ts":"2025-01-31T12:00:00.123Z","level":
 *         "info","pid":42,"msg":"..."} (a line about a workflow adds
 *         "workflow"), for log shippers; strict JSON, inert on a terminal.
 *
 * A line about a workflow whose run this process loaded carries its trace
 * (trace_cache.h), so it leads to the trace: "trace_id" and "span_id" (the
 * run's span) in json, "trace=ID" in text. Never a read of the log per line:
 * a workflow this process has not loaded gets none.
 *
 * `engine serve --log-format json`, or ENGINE_LOG_FORMAT=text|json, picks
 * one; the default is text. ENGINE_LOG_LEVEL=error|warning|info|debug is the
 * least severe level shown (default info: debug lines are not). What the CLI's commands say to their user
 * (cli_die, progress) is not a log and stays as it is. */
#ifndef ENGINE_LOG_H
#define ENGINE_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* The levels, numbered as syslog's priorities. */
typedef enum { LOGL_ERROR = 3, LOGL_WARNING = 4, LOGL_INFO = 6, LOGL_DEBUG = 7 } log_level;

/* Picks the format: name ("text" or "json"; NULL: $ENGINE_LOG_FORMAT, else
 * text) and the level ($ENGINE_LOG_LEVEL), and looks whether stderr is the
 * journal. 0, or -1 with err for a name or a level that is none of them. */
int log_configure(const char *name, char *err, size_t errlen);

/* 1 when the format is json. */
int log_json(void);

/* One message, without the "engine: " of the text format (it adds it). */
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(log_level level, const char *fmt, va_list ap);

/* A message of the engine about workflow wf_id: "engine: MESSAGE trace=ID"
 * in text, with "workflow", "trace_id" and "span_id" in json. */
void log_wf(log_level level, const char *wf_id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A line a workflow's script printed: "[ID trace=TRACE] TEXT" in text
 * ("[ID] TEXT" without a trace), an info object with "workflow": ID (and
 * the trace) in json. */
void log_workflow(const char *wf_id, const char *text);

#endif
