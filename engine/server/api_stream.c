/* api_stream: the API's live event streams (Server-Sent Events). Each
 * subscriber follows one session (GET /v1/workflows/{id}/events) or every
 * session (GET /v1/events): first its backlog from the committed store, a
 * megabyte at a time as the client reads it, then the events of each commit,
 * read once from the feed for all subscribers, and the ephemeral agent.delta
 * frames of a running model turn; the stream ends after its workflow's
 * terminal status. All on the loop's thread, between commits, so nothing
 * committed falls between a backlog and the live events. */
#include "api_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "session_view.h"
#include "util.h"

/* A stream whose client reads slower than events come is dropped past this
 * (it reconnects with Last-Event-ID and misses nothing). */
#define SSE_MAX_QUEUED ((size_t)8 << 20)
/* A backlog is queued this much at a time, the next part as the client reads
 * it: a resume from far behind must not hit the cap before its first byte. */
#define SSE_BACKLOG_BYTES ((size_t)1 << 20)
#define FEED_PAGE 1000

typedef struct sub sub;
struct sub {
  sub *prev, *next; /* in the list of its session, or of every session */
  struct streams *a;
  httpd_stream *s;
  char *session; /* NULL: every session's events (GET /v1/events) */
  int64_t last;  /* seq (or feed position) sent last */
  int ended;
  int catching_up;  /* its backlog is being sent: live events wait in the store */
  char *end_status; /* the workflow ended while it was catching up */
};

struct streams {
  store *rd; /* read-only: what is committed */
  uv_timer_t heartbeat;
  int heartbeat_on;
  strmap subs; /* session id -> first sub of its list */
  sub *all;
  size_t nsubs;
  int64_t feed_cursor; /* valid while nsubs > 0 */
  strmap finished;     /* sessions that ended in this commit -> their status */
};

static void sub_write(sub *s, const char *text, size_t len) {
  if (s->ended) return;
  if (httpd_stream_write(s->s, text, len) > SSE_MAX_QUEUED) {
    /* too slow: cut off (a client that reads nothing would hold the queue
     * for as long as it likes); it reconnects with Last-Event-ID */
    s->ended = 1;
    httpd_stream_abort(s->s);
  }
}

/* The SSE frame of an event: "id: ID" and its JSON (malloc'd). */
static char *event_frame(int64_t id, const domain_event *e) {
  char *json = view_event_json(e), *out = json_for_output(json, strlen(json));
  char *frame = util_fmt("id: %lld\ndata: %s\n\n", (long long)id, out);
  free(out);
  free(json);
  return frame;
}

static void sub_frame(sub *s, int64_t id, const char *frame) {
  sub_write(s, frame, strlen(frame));
  s->last = id;
}

static void sub_event(sub *s, int64_t id, const domain_event *e) {
  char *frame = event_frame(id, e);
  sub_frame(s, id, frame);
  free(frame);
}

static void sub_end(sub *s, const char *status) {
  if (s->ended) return;
  char *q = json_quote(status);
  char *frame = util_fmt("event: end\ndata: {\"status\":%s}\n\n", q);
  sub_write(s, frame, strlen(frame));
  free(frame);
  free(q);
  s->ended = 1;
  httpd_stream_end(s->s);
}

static void sub_unlink(sub *s) {
  streams *a = s->a;
  if (s->prev) {
    s->prev->next = s->next;
  } else if (s->session) {
    if (s->next) strmap_put(&a->subs, s->session, s->next);
    else strmap_del(&a->subs, s->session);
  } else {
    a->all = s->next;
  }
  if (s->next) s->next->prev = s->prev;
  a->nsubs--;
}

static void sub_closed(void *ud) {
  sub *s = ud;
  sub_unlink(s);
  free(s->session);
  free(s->end_status);
  free(s);
}

/* The end of a workflow's stream; after the backlog when it is catching up. */
static void sub_finished(sub *s, const char *status) {
  if (!s->catching_up) return sub_end(s, status);
  if (!s->end_status) s->end_status = util_strdup(status);
}

typedef struct feed_ctx {
  streams *a;
  sub *only; /* a subscriber catching up, or NULL: dispatch to all */
  int n, full;
} feed_ctx;

/* Stops a backlog read once a part of it is queued. */
static int backlog_full(feed_ctx *f) {
  f->full = f->only->ended || httpd_stream_queued(f->only->s) >= SSE_BACKLOG_BYTES;
  return f->full;
}

static int backlog_session(void *ud, const domain_event *e) {
  feed_ctx *f = ud;
  sub_event(f->only, e->seq, e);
  return backlog_full(f);
}

static int on_feed(void *ud, int64_t id, const domain_event *e) {
  feed_ctx *f = ud;
  f->n++;
  if (f->only) {
    sub_event(f->only, id, e);
    return backlog_full(f);
  }
  streams *a = f->a;
  a->feed_cursor = id;
  /* rendered once for all the session's subscribers, once for the feed's */
  char *frame = NULL;
  for (sub *s = strmap_get(&a->subs, e->session_id); s; s = s->next) {
    if (s->catching_up || e->seq <= s->last) continue;
    if (!frame) frame = event_frame(e->seq, e);
    sub_frame(s, e->seq, frame);
  }
  free(frame);
  frame = NULL;
  for (sub *s = a->all; s; s = s->next) {
    if (s->catching_up || id <= s->last) continue;
    if (!frame) frame = event_frame(id, e);
    sub_frame(s, id, frame);
  }
  free(frame);
  return 0;
}

/* The next part of a subscriber's backlog, from the committed store, until
 * SSE_BACKLOG_BYTES are queued (the rest when the client has read them:
 * sub_drained) or it has everything; live dispatch takes over from there.
 * Everything runs on the loop's thread, between commits: nothing committed
 * can fall between the backlog and the live events. */
static void catch_up(sub *s) {
  streams *a = s->a;
  feed_ctx f = {a, s, 0, 0};
  int rc;
  if (s->session) {
    rc = store_domain_list(a->rd, s->session, s->last, backlog_session, &f);
  } else {
    do {
      f.n = 0;
      rc = store_feed_after(a->rd, s->last, FEED_PAGE, on_feed, &f);
    } while (rc == STORE_OK && !f.full && f.n == FEED_PAGE);
  }
  if (s->ended) return;
  if (rc == STORE_ECORRUPT) { /* a damaged stream: said, then the end (a reconnection finds it again) */
    char *q = json_quote(store_errmsg(a->rd)), *frame = util_fmt("event: error\ndata: {\"error\":%s}\n\n", q);
    sub_write(s, frame, strlen(frame));
    free(frame);
    free(q);
  }
  if (rc != STORE_OK) { /* the client reconnects and resumes */
    s->ended = 1;
    httpd_stream_end(s->s);
    return;
  }
  s->catching_up = f.full;
  if (!s->catching_up && s->end_status) sub_end(s, s->end_status);
}

static void sub_drained(void *ud) {
  sub *s = ud;
  if (s->catching_up && !s->ended) catch_up(s);
}

/* After each commit: the new events to their subscribers, then the end of
 * the streams of sessions that finished. One read of the feed, whatever the
 * number of subscribers. */
void streams_committed(streams *a) {
  if (a->nsubs > 0) {
    feed_ctx f = {a, NULL, 0, 0};
    do {
      f.n = 0;
      if (store_feed_after(a->rd, a->feed_cursor, FEED_PAGE, on_feed, &f) != STORE_OK) break;
    } while (f.n == FEED_PAGE);
  }
  for (size_t i = 0; i < a->finished.cap; i++) {
    if (!STRMAP_LIVE(&a->finished, i)) continue;
    for (sub *s = strmap_get(&a->subs, a->finished.keys[i]); s; s = s->next) sub_finished(s, a->finished.vals[i]);
    free(a->finished.vals[i]);
  }
  strmap_free(&a->finished);
  strmap_init(&a->finished);
}

static void on_heartbeat(uv_timer_t *t) {
  streams *a = t->data;
  for (size_t i = 0; i < a->subs.cap; i++)
    if (STRMAP_LIVE(&a->subs, i))
      for (sub *s = a->subs.vals[i]; s; s = s->next) sub_write(s, ":\n\n", 3);
  for (sub *s = a->all; s; s = s->next) sub_write(s, ":\n\n", 3);
}

static const char *SSE_HEADERS[] = {"X-Accel-Buffering: no", NULL};

static sub *subscribe(streams *a, httpd_req *r, const char *session, int64_t after) {
  sub *s = util_xcalloc(1, sizeof *s);
  s->a = a;
  s->session = session ? util_strdup(session) : NULL;
  s->last = after;
  s->s = httpd_stream_open(r, "text/event-stream", SSE_HEADERS, sub_closed, s);
  httpd_stream_on_drain(s->s, sub_drained);
  if (a->nsubs == 0) a->feed_cursor = store_feed_last(a->rd);
  if (a->feed_cursor < 0) a->feed_cursor = 0;
  a->nsubs++;
  if (session) {
    sub *head = strmap_get(&a->subs, session);
    s->next = head;
    if (head) head->prev = s;
    strmap_put(&a->subs, session, s);
  } else {
    s->next = a->all;
    if (a->all) a->all->prev = s;
    a->all = s;
  }
  sub_write(s, "retry: 2000\n\n", 13);
  return s;
}


void streams_open(streams *a, httpd_req *r, const char *session, int64_t after, const char *finished) {
  sub *s = subscribe(a, r, session, after);
  catch_up(s);
  if (finished) sub_finished(s, finished);
}

void streams_finished(streams *a, const char *id, const char *status) {
  if (strmap_get(&a->subs, id) && !strmap_get(&a->finished, id)) strmap_put(&a->finished, id, util_strdup(status));
}

void streams_live(streams *a, const char *wf_id, const char *type, const char *json) {
  sub *s = strmap_get(&a->subs, wf_id);
  if (!s) return;
  char *qi = json_quote(wf_id), *qt = json_quote(type);
  char *ev = util_fmt("{\"session_id\":%s,\"type\":%s,\"time\":%lld,\"payload\":%s}", qi, qt,
                      (long long)util_now_ms(), json);
  char *out = json_for_output(ev, strlen(ev));
  /* no id: ephemeral, never part of what Last-Event-ID resumes; not to a
   * subscriber still sending its backlog (it would come before older events) */
  char *frame = util_fmt("event: %s\ndata: %s\n\n", type, out);
  for (; s; s = s->next)
    if (!s->catching_up) sub_write(s, frame, strlen(frame));
  free(frame);
  free(out);
  free(ev);
  free(qi);
  free(qt);
}

streams *streams_new(uv_loop_t *loop, store *rd) {
  streams *a = util_xcalloc(1, sizeof *a);
  a->rd = rd;
  strmap_init(&a->subs);
  strmap_init(&a->finished);
  const char *hb = getenv("ENGINE_SSE_HEARTBEAT_MS");
  int64_t ms = hb && atoll(hb) > 0 ? atoll(hb) : 15000;
  if (uv_timer_init(loop, &a->heartbeat) == 0) {
    a->heartbeat.data = a;
    a->heartbeat_on = 1;
    uv_timer_start(&a->heartbeat, on_heartbeat, (uint64_t)ms, (uint64_t)ms);
  }
  return a;
}

static void on_timer_closed(uv_handle_t *h) { free(h->data); }

void streams_free(streams *a) {
  if (!a) return;
  for (size_t i = 0; i < a->finished.cap; i++)
    if (STRMAP_LIVE(&a->finished, i)) free(a->finished.vals[i]);
  strmap_free(&a->finished);
  strmap_free(&a->subs);
  if (a->heartbeat_on) uv_close((uv_handle_t *)&a->heartbeat, on_timer_closed); /* frees a once closed */
  else free(a);
}
