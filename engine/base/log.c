/* log: see log.h. */
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "render.h"
#include "trace_cache.h"
#include "util.h"

static int as_json;  /* the json format */
static int journald; /* stderr is the journal: text lines begin with <N> */
static log_level shown_up_to = LOGL_INFO; /* debug lines only when asked for */

/* JOURNAL_STREAM is "DEV:INO" of the journal's stream that systemd gave
 * the service as stdout/stderr; stderr may since have been redirected. */
static int stderr_is_journal(void) {
  const char *js = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) != 0) return 0;
  return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* ENGINE_LOG_LEVEL: the least severe level shown. */
static int configure_level(char *err, size_t errlen) {
  static const struct {
    const char *name;
    log_level level;
  } LEVELS[] = {{"error", LOGL_ERROR}, {"warning", LOGL_WARNING}, {"info", LOGL_INFO}, {"debug", LOGL_DEBUG}};
  const char *name = getenv("ENGINE_LOG_LEVEL");
  if (!name || !*name) {
    shown_up_to = LOGL_INFO;
    return 0;
  }
  for (size_t i = 0; i < sizeof LEVELS / sizeof LEVELS[0]; i++)
    if (strcmp(name, LEVELS[i].name) == 0) {
      shown_up_to = LEVELS[i].level;
      return 0;
    }
  util_seterr(err, errlen, "ENGINE_LOG_LEVEL must be error, warning, info or debug, not '%.40s'", name);
  return -1;
}

int log_configure(const char *name, char *err, size_t errlen) {
  if (configure_level(err, errlen) != 0) return -1;
  const char *from = "--log-format";
  if (!name || !*name) {
    name = getenv("ENGINE_LOG_FORMAT");
    from = "ENGINE_LOG_FORMAT";
  }
  if (!name || !*name || strcmp(name, "text") == 0) as_json = 0;
  else if (strcmp(name, "json") == 0) as_json = 1;
  else {
    util_seterr(err, errlen, "%s must be text or json, not '%.40s'", from, name);
    return -1;
  }
  journald = stderr_is_journal();
  return 0;
}

int log_json(void) { return as_json; }

static const char *level_name(log_level level) {
  switch (level) {
    case LOGL_ERROR: return "error";
    case LOGL_WARNING: return "warning";
    case LOGL_INFO: return "info";
    default: return "debug";
  }
}

/* Writes one line in one call: lines of concurrent writers never mix. */
static void put(ubuf *b) {
  ubuf_add(b, "\n", 1);
  if (b->p) fwrite(b->p, 1, b->n, stderr);
  ubuf_free(b);
}

/* The trace of workflow wf_id, when this process has loaded one of its runs
 * (trace_cache.h): never a read of the log per line. */
static const run_trace *trace_of(const char *wf_id) { return wf_id ? trace_cache_get(wf_id, 0) : NULL; }

/* One line. wf_id: the workflow it concerns, or NULL; print: a line its
 * script printed ("[ID] TEXT" in text) rather than the engine's own. */
static void emit(log_level level, const char *wf_id, int print, const char *msg) {
  if (level > shown_up_to) return;
  const run_trace *t = trace_of(wf_id);
  ubuf b = {0};
  if (as_json) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts); /* the wall clock, even where the engine's is virtual (engine test) */
    gmtime_r(&ts.tv_sec, &tm);
    char when[40], head[160];
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    char *q = json_quote(msg), *w = wf_id ? json_quote(wf_id) : NULL;
    int n = snprintf(head, sizeof head, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"pid\":%ld,", when,
                     ts.tv_nsec / 1000000, level_name(level), (long)getpid());
    ubuf raw = {0};
    ubuf_add(&raw, head, (size_t)n);
    if (w) {
      ubuf_add(&raw, "\"workflow\":", 11);
      ubuf_add(&raw, w, strlen(w));
      ubuf_add(&raw, ",", 1);
    }
    if (t) { /* hex digits: nothing to quote */
      char ids[96];
      n = snprintf(ids, sizeof ids, "\"trace_id\":\"%s\",\"span_id\":\"%s\",", t->ctx.trace_id, t->run_span);
      ubuf_add(&raw, ids, (size_t)n);
    }
    ubuf_add(&raw, "\"msg\":", 6);
    ubuf_add(&raw, q, strlen(q));
    ubuf_add(&raw, "}", 1);
    char *out = json_for_output(raw.p, raw.n); /* strict UTF-8, no control character left */
    ubuf_add(&b, out, strlen(out));
    free(out);
    ubuf_free(&raw);
    free(q);
    free(w);
  } else {
    char head[16];
    if (journald) ubuf_add(&b, head, (size_t)snprintf(head, sizeof head, "<%d>", (int)level));
    ubuf text = {0};
    if (print) {
      ubuf_add(&text, "[", 1);
      ubuf_add(&text, wf_id, strlen(wf_id));
      if (t) {
        ubuf_add(&text, " trace=", 7);
        ubuf_add(&text, t->ctx.trace_id, strlen(t->ctx.trace_id));
      }
      ubuf_add(&text, "] ", 2);
      ubuf_add(&text, msg, strlen(msg));
    } else {
      ubuf_add(&text, "engine: ", 8);
      if (level <= LOGL_WARNING) {
        const char *l = level_name(level);
        ubuf_add(&text, l, strlen(l));
        ubuf_add(&text, ": ", 2);
      }
      ubuf_add(&text, msg, strlen(msg));
      if (t) {
        ubuf_add(&text, " trace=", 7);
        ubuf_add(&text, t->ctx.trace_id, strlen(t->ctx.trace_id));
      }
    }
    render_add(&b, text.p, text.n, 0, 0); /* one line: a newline inside becomes \n */
    ubuf_free(&text);
  }
  put(&b);
}

void log_vmsg(log_level level, const char *fmt, va_list ap) {
  if (level > shown_up_to) return;
  char *msg = util_vfmt(fmt, ap);
  emit(level, NULL, 0, msg);
  free(msg);
}

void log_msg(log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vmsg(level, fmt, ap);
  va_end(ap);
}

void log_wf(log_level level, const char *wf_id, const char *fmt, ...) {
  if (level > shown_up_to) return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = util_vfmt(fmt, ap);
  va_end(ap);
  emit(level, wf_id, 0, msg);
  free(msg);
}

void log_workflow(const char *wf_id, const char *text) { emit(LOGL_INFO, wf_id, 1, text); }
