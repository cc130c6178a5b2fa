/* progress: the status of a session running in the foreground (progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "render.h"
#include "session_view.h"
#include "util.h"

/* What the run does now. */
enum { PS_RUNNING, PS_MODEL, PS_TOOL, PS_DECIDE, PS_ACTIVITY, PS_APPROVAL, PS_SIGNAL, PS_TIMER };

/* The streamed text kept for the terminal: its tail is what shows. */
enum { LIVE_KEEP = 16384 };
/* Deltas come by the token: the area is redrawn at most this often for them. */
enum { DRAW_EVERY_MS = 40 };

struct progress {
  FILE *out;
  store *st;
  char *wf_id, *id; /* as given, and rendered for lines */
  int tty, color, stopped;
  uv_timer_t *timer;

  /* what it does now (strings rendered) */
  int kind;
  char *waits; /* the JSON it was told last */
  char name[256], tool[256], request[256], about[64], last_error[400];
  int64_t seq, since, until;

  /* learnt from the events */
  char last_tool[256];
  int turns;
  int64_t tokens;

  /* the text a model step streams */
  ubuf live;
  int64_t live_step, live_attempt, live_chars;
  int live_open; /* plain: a "~ live" line is open */

  /* drawing */
  int drawn; /* rows of the status area on the screen; the cursor ends its last */
  int64_t drawn_at;
  int dirty;
  unsigned spin;
  char *plain_last; /* the last plain status line written */
};

progress *progress_new(FILE *out, store *st, const char *id, int tty, int color) {
  progress *p = util_xcalloc(1, sizeof *p);
  p->out = out;
  p->st = st;
  p->wf_id = util_strdup(id);
  p->id = render_str(id, 0, 0);
  p->tty = tty;
  p->color = color;
  p->kind = PS_RUNNING;
  p->stopped = 1; /* nothing of the status shows before progress_start */
  return p;
}

void progress_free(progress *p) {
  if (!p) return;
  if (p->timer) p->timer->data = NULL; /* its close callback frees it */
  free(p->wf_id);
  free(p->id);
  free(p->waits);
  free(p->plain_last);
  ubuf_free(&p->live);
  free(p);
}

/* --------------------------------------------------------------- text --- */

void progress_duration(int64_t ms, char *out, size_t n) {
  int64_t s = ms < 0 ? 0 : ms / 1000;
  if (s < 60) snprintf(out, n, "%lld s", (long long)s);
  else if (s < 3600) snprintf(out, n, "%lld min %02lld s", (long long)(s / 60), (long long)(s % 60));
  else snprintf(out, n, "%lld h %02lld min", (long long)(s / 3600), (long long)(s / 60 % 60));
}

/* "10:42:01", local time (the reader's clock). */
static void clock_time(int64_t ms, char *out, size_t n) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(out, n, "%H:%M:%S", &tm);
}

static void add(ubuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(ubuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = util_vfmt(fmt, ap);
  va_end(ap);
  ubuf_add(b, s, strlen(s));
  free(s);
}

/* An attempt that failed: the waits JSON's attempt counts the one a crash
 * would run next, so only the error says it is being retried. */
static void add_retry(ubuf *b, const progress *p) {
  if (*p->last_error) add(b, " (retrying; last error: %s)", p->last_error);
}

char *progress_status(const progress *p, int64_t now, int durations) {
  ubuf b = {0};
  char dur[48], at[16], until[16];
  progress_duration(now - p->since, dur, sizeof dur);
  clock_time(p->since, at, sizeof at);
  clock_time(p->until, until, sizeof until);
  switch (p->kind) {
  case PS_MODEL:
    add(&b, "%smodel turn %d", durations ? "" : "~ ", p->turns + 1);
    if (durations) {
      if (p->live_chars && p->live_step == p->seq)
        add(&b, " streaming: %lld characters so far (%s)", (long long)p->live_chars, dur);
      else
        add(&b, ": waiting for the model (%s)", dur);
      if (p->tokens) add(&b, "; %lld tokens in the turns before", (long long)p->tokens);
    }
    add_retry(&b, p);
    break;
  case PS_TOOL:
    add(&b, "%stool %s running", durations ? "" : "~ ", *p->tool ? p->tool : "(unknown)");
    if (durations) add(&b, " for %s", dur);
    add_retry(&b, p);
    break;
  case PS_DECIDE:
    if (durations) add(&b, "policy check of %s (%s)", *p->tool ? p->tool : "a tool call", dur);
    break; /* a moment between the request and the tool: no line of its own */
  case PS_ACTIVITY:
    add(&b, "%sactivity %s running", durations ? "" : "~ ", p->name);
    if (durations) add(&b, " for %s", dur);
    add_retry(&b, p);
    break;
  case PS_APPROVAL:
    if (!durations) {
      add(&b, "engine: %s is waiting for approval %s; from another terminal: engine approve %s --request %s (or "
              "--deny --reason TEXT)",
          p->id, p->request, p->id, p->request);
      break;
    }
    if (*p->tool) add(&b, "waiting for approval of %s since %s (%s)", p->tool, at, dur);
    else add(&b, "waiting for approval of a %s since %s (%s)", *p->about ? p->about : "request", at, dur);
    if (p->until > 0) add(&b, "; times out at %s", until);
    add(&b, "\nanswer from another terminal: engine approve %s --request %s (or --deny --reason TEXT)", p->id,
        p->request);
    break;
  case PS_SIGNAL:
    if (!durations) {
      add(&b, "engine: %s is waiting for signal '%s'; send it with: engine signal %s %s '{...}'", p->id, p->name,
          p->id, p->name);
      break;
    }
    add(&b, "waiting for signal '%s' since %s (%s)", p->name, at, dur);
    if (p->until > 0) add(&b, "; times out at %s", until);
    add(&b, "\nsend it from another terminal: engine signal %s %s '{...}'", p->id, p->name);
    break;
  case PS_TIMER:
    if (!durations) {
      add(&b, "engine: %s is waiting (timer)", p->id);
      break;
    }
    progress_duration(p->until - now + 999, dur, sizeof dur);
    add(&b, "sleeping until %s (%s left)", until, dur);
    break;
  default:
    if (durations) add(&b, "running");
  }
  ubuf_add(&b, "", 1);
  return b.p;
}

/* ------------------------------------------------------------ drawing --- */

/* Moves to the start of the status area and erases it. */
static void erase_into(ubuf *b, progress *p) {
  if (!p->drawn) return;
  ubuf_add(b, "\r", 1);
  if (p->drawn > 1) add(b, "\033[%dA", p->drawn - 1);
  ubuf_add(b, "\033[J", 3);
  p->drawn = 0;
}

static int count_rows(const char *s, size_t n) {
  int rows = 0;
  for (size_t i = 0; i < n; i++) rows += s[i] == '\n';
  return rows;
}

/* Appends the status area (streamed text, then the status) without its last
 * newline: the cursor stays at its end, so the next erase finds it. */
static void area_into(ubuf *b, progress *p) {
  int cols, rows;
  view_terminal_size(fileno(p->out), &cols, &rows);
  int width = cols > 11 ? cols - 1 : 10; /* never the last column: no wrap the area does not count */
  static const char spinner[] = "-\\|/";
  char *status = progress_status(p, util_now_ms(), 1);
  ubuf srows = {0};
  char lead[4] = {spinner[p->spin % 4], ' ', 0};
  ubuf_add(&srows, lead, 2);
  view_wrap(&srows, status, strlen(status), width, 2, 2, 0, NULL);
  free(status);
  int nstatus = count_rows(srows.p, srows.n), shown = 0;
  if (p->live.n) {
    ubuf lrows = {0};
    view_wrap(&lrows, p->live.p, p->live.n, width, 0, 0, 0, NULL);
    int keep = rows / 2 < rows - nstatus - 1 ? rows / 2 : rows - nstatus - 1, total = count_rows(lrows.p, lrows.n);
    if (keep < 1) keep = 1;
    size_t from = 0;
    for (int skip = total - keep; skip > 0; skip--) from = (size_t)((char *)memchr(lrows.p + from, '\n', lrows.n - from) - lrows.p) + 1;
    if (p->color) ubuf_add(b, "\033[2m", 4); /* dim: not recorded yet */
    ubuf_add(b, lrows.p + from, lrows.n - from);
    if (p->color) ubuf_add(b, "\033[0m", 4);
    shown = total < keep ? total : keep;
    ubuf_free(&lrows);
  }
  int waiting = p->kind == PS_APPROVAL || p->kind == PS_SIGNAL;
  if (p->color && waiting) ubuf_add(b, "\033[1;33m", 7);
  ubuf_add(b, srows.p, srows.n - 1); /* without its last newline */
  if (p->color && waiting) ubuf_add(b, "\033[0m", 4);
  p->drawn = shown + nstatus;
  ubuf_free(&srows);
}

static void draw(progress *p) {
  if (!p->tty || p->stopped) return;
  ubuf b = {0};
  erase_into(&b, p);
  area_into(&b, p);
  fwrite(b.p, 1, b.n, p->out);
  fflush(p->out);
  ubuf_free(&b);
  p->drawn_at = util_mono_ms();
  p->dirty = 0;
}

/* Plain: ends an open "~ live" line. */
static void live_close(progress *p) {
  if (!p->live_open) return;
  fputc('\n', p->out);
  p->live_open = 0;
}

/* Shows the state: redrawn on a terminal, a plain line when it changed. */
static void show(progress *p) {
  if (p->stopped) return;
  if (p->tty) {
    draw(p);
    return;
  }
  char *line = progress_status(p, util_now_ms(), 0);
  if (*line && (!p->plain_last || strcmp(line, p->plain_last) != 0)) {
    live_close(p);
    render_line(p->out, 0, "%s", line);
    fflush(p->out);
    free(p->plain_last);
    p->plain_last = line;
    return;
  }
  free(line);
}

/* ------------------------------------------------------------- inputs --- */

static void live_reset(progress *p, int64_t step, int64_t attempt) {
  p->live.n = 0;
  p->live_chars = 0;
  p->live_step = step;
  p->live_attempt = attempt;
}

void progress_event(progress *p, const domain_event *e) {
  char v[256];
  if (strcmp(e->type, "tool.requested") == 0) {
    snprintf(p->last_tool, sizeof p->last_tool, "%s", view_json_field(e->payload, "tool", v, sizeof v));
  } else if (strcmp(e->type, "agent.message") == 0) {
    /* the recorded message replaces the text streamed for it */
    int64_t turn = e->payload ? json_get_int(e->payload, strlen(e->payload), "turn", 0) : 0;
    p->turns = turn > p->turns ? (int)turn : p->turns + 1;
    const char *u;
    size_t un;
    if (e->payload && json_get(e->payload, strlen(e->payload), "usage", &u, &un) == 1)
      p->tokens += json_get_int(u, un, "input_tokens", 0) + json_get_int(u, un, "output_tokens", 0);
    if (p->tty) live_reset(p, p->live_step, p->live_attempt);
  }
  if (!p->tty) {
    live_close(p);
    char *line = view_event_line(e);
    fprintf(p->out, "%s\n", line);
    free(line);
    fflush(p->out);
    return;
  }
  int cols, rows;
  view_terminal_size(fileno(p->out), &cols, &rows);
  char *more = util_fmt("engine events %s --full", p->id);
  view_layout lay = {cols, rows, 0, p->color, more};
  char *text = view_event_transcript(e, &lay);
  ubuf b = {0};
  erase_into(&b, p);
  ubuf_add(&b, text, strlen(text));
  if (!p->stopped) area_into(&b, p);
  fwrite(b.p, 1, b.n, p->out);
  fflush(p->out);
  ubuf_free(&b);
  free(text);
  free(more);
}

/* The number of characters in s[0..n) (UTF-8 sequences, invalid bytes one each). */
static int64_t chars_in(const char *s, size_t n) {
  int64_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

void progress_delta(progress *p, const char *payload) {
  size_t n = strlen(payload);
  const char *d;
  size_t dn;
  if (json_get(payload, n, "delta", &d, &dn) != 1) return;
  int64_t step = json_get_int(payload, n, "step", 0), attempt = json_get_int(payload, n, "attempt", 1);
  char *type = json_get_string(d, dn, "type"), *text = json_get_string(d, dn, "text"),
       *args = json_get_string(d, dn, "arguments");
  int is_text = type && text && strcmp(type, "text") == 0;
  if (step != p->live_step || attempt != p->live_attempt) {
    if (!p->tty && step != p->live_step) live_close(p);
    live_reset(p, step, attempt);
  }
  if (is_text) p->live_chars += chars_in(text, strlen(text));
  else if (type && args && strcmp(type, "tool_call") == 0) p->live_chars += chars_in(args, strlen(args));
  if (is_text && !p->tty) {
    if (!p->live_open) {
      char *head = view_live_head(step);
      fputs(head, p->out);
      free(head);
      p->live_open = 1;
    }
    char *shown = render_str(text, 0, 0);
    fputs(shown, p->out);
    fflush(p->out);
    free(shown);
  } else if (is_text) {
    ubuf_add(&p->live, text, strlen(text));
    if (p->live.n > LIVE_KEEP) { /* keep the tail, from the start of a character */
      size_t cut = p->live.n - LIVE_KEEP;
      while (cut < p->live.n && ((unsigned char)p->live.p[cut] & 0xC0) == 0x80) cut++;
      memmove(p->live.p, p->live.p + cut, p->live.n - cut);
      p->live.n -= cut;
    }
  }
  if (p->tty) {
    if (util_mono_ms() - p->drawn_at >= DRAW_EVERY_MS) draw(p);
    else p->dirty = 1;
  }
  free(type);
  free(text);
  free(args);
}

/* A string member of the JSON object j, rendered into out ("" when absent). */
static void member(const char *j, const char *key, char *out, size_t n) {
  char *s = json_get_string(j, strlen(j), key);
  render_buf(out, n, s ? s : "", s ? strlen(s) : 0, 0);
  free(s);
}

void progress_set_waits(progress *p, const char *waits) {
  if (waits && p->waits && strcmp(waits, p->waits) == 0) return;
  free(p->waits);
  p->waits = util_strdup(waits);
  p->kind = PS_RUNNING;
  p->name[0] = p->tool[0] = p->request[0] = p->about[0] = p->last_error[0] = 0;
  p->seq = p->since = p->until = 0;
  if (!waits) return;
  size_t n = strlen(waits);
  char kind[32];
  member(waits, "kind", kind, sizeof kind);
  p->since = json_get_int(waits, n, "since", 0);
  p->until = json_get_int(waits, n, "deadline", 0);
  if (strcmp(kind, "activity") == 0) {
    member(waits, "activity", p->name, sizeof p->name);
    p->seq = json_get_int(waits, n, "seq", 0);
    const char *le;
    size_t len;
    if (json_get(waits, n, "last_error", &le, &len) == 1 && *le == '{') {
      char *msg = json_get_string(le, len, "message");
      if (msg) render_buf(p->last_error, sizeof p->last_error, msg, strlen(msg), 0);
      free(msg);
    }
    if (strcmp(p->name, "model.turn") == 0) {
      p->kind = PS_MODEL;
    } else if (strcmp(p->name, "session.tool") == 0 || strcmp(p->name, "session.decide") == 0) {
      /* agent_session.lua's tool step and its policy check: the tool requested last */
      p->kind = strcmp(p->name, "session.tool") == 0 ? PS_TOOL : PS_DECIDE;
      snprintf(p->tool, sizeof p->tool, "%s", p->last_tool);
    } else {
      p->kind = PS_ACTIVITY;
    }
  } else if (strcmp(kind, "approval") == 0) {
    p->kind = PS_APPROVAL;
    member(waits, "request_id", p->request, sizeof p->request);
    member(waits, "tool", p->tool, sizeof p->tool);
    member(waits, "about", p->about, sizeof p->about);
    member(waits, "signal", p->name, sizeof p->name);
  } else if (strcmp(kind, "signal") == 0) {
    p->kind = PS_SIGNAL;
    member(waits, "signal", p->name, sizeof p->name);
  } else if (strcmp(kind, "timer") == 0) {
    p->kind = PS_TIMER;
    p->until = json_get_int(waits, n, "due_at", 0);
  }
}

void progress_refresh(progress *p) {
  if (p->st) {
    char *waits;
    int64_t seq;
    if (view_waits_now(p->st, p->wf_id, &waits, &seq) == 1) progress_set_waits(p, waits);
    free(waits);
  }
  show(p);
}

/* ------------------------------------------------------------- timer --- */

static void on_tick(uv_timer_t *t) {
  progress *p = t->data;
  if (!p) return;
  p->spin++;
  /* an activity's next attempt writes no event: ask again while one runs */
  if (p->kind != PS_RUNNING && p->kind != PS_APPROVAL && p->kind != PS_SIGNAL && p->kind != PS_TIMER)
    progress_refresh(p);
  else
    show(p);
}

static void free_timer(uv_handle_t *h) { free(h); }

int progress_start(progress *p, uv_loop_t *loop) {
  p->stopped = 0;
  if (!loop) return 0;
  uv_timer_t *t = util_xcalloc(1, sizeof *t);
  int rc = uv_timer_init(loop, t);
  if (rc != 0) {
    free(t);
    return rc;
  }
  t->data = p;
  uv_unref((uv_handle_t *)t); /* the worker's loop ends as it would without it */
  uv_timer_start(t, on_tick, 1000, 1000);
  p->timer = t;
  return 0;
}

void progress_stop(progress *p) {
  if (p->tty && p->drawn) {
    ubuf b = {0};
    erase_into(&b, p);
    fwrite(b.p, 1, b.n, p->out);
    ubuf_free(&b);
  }
  live_close(p);
  fflush(p->out);
  p->stopped = 1;
  if (p->timer) {
    uv_timer_stop(p->timer);
    p->timer->data = NULL;
    uv_close((uv_handle_t *)p->timer, free_timer);
    p->timer = NULL;
  }
}
