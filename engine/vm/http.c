#include "http.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "child.h"
#include "util.h"

#define DEFAULT_MAX_BYTES ((size_t)64 << 20)

struct http_ctx {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;   /* curl's timeout */
  uv_check_t deliver; /* hands events out after curl callbacks have returned */
  uv_idle_t nudge;    /* keeps the loop from blocking while events wait */
  http_call *pending; /* calls with undelivered events (singly linked) */
  int open_handles;   /* of timer, deliver, nudge (initialised in that order); freed after the last closes */
};

typedef struct sockctx {
  uv_poll_t poll;
  curl_socket_t fd;
  http_ctx *h;
} sockctx;

struct http_call {
  http_ctx *h;
  CURL *easy;
  struct curl_slist *req_headers;
  char *body_copy; /* the request body, owned for curl */
  void (*on_event)(void *ud);
  void *ud;
  /* response */
  long status;
  int headers_done;
  char **hnames, **hvalues;
  size_t nh, caph;
  ubuf body; /* received since the last http_take */
  size_t total, max_bytes;
  size_t window; /* stream mode: at most this much unread before the transfer pauses; 0: no bound */
  int paused;    /* by write_cb, for a full window; http_resume() lets it go on */
  /* end */
  int done, err;
  char errmsg[CURL_ERROR_SIZE + 64];
  char curl_err[CURL_ERROR_SIZE];
  char abort_why[128]; /* set by our own callback when it aborted the transfer (curl only says "write error") */
  /* idle timeout */
  uv_timer_t *idle;
  long idle_ms;
  int queued;
  http_call *next_pending;
  int in_multi;
};

static int curl_inited;

/* ------------------------------------------------------------ delivery --- */

/* Marks a call as having news; delivered from the check handle, outside curl. */
static void on_nudge(uv_idle_t *i);

static void queue_event(http_call *c) {
  if (c->queued || !c->on_event) return;
  c->queued = 1;
  c->next_pending = c->h->pending;
  c->h->pending = c;
  /* fails only without a callback (EINVAL); even then the check handle
   * delivers the event, at the loop's next wake-up instead of this turn */
  int rc = uv_idle_start(&c->h->nudge, on_nudge);
  (void)rc;
}

static void unqueue(http_call *c) {
  if (!c->queued) return;
  for (http_call **p = &c->h->pending; *p; p = &(*p)->next_pending)
    if (*p == c) {
      *p = c->next_pending;
      break;
    }
  c->queued = 0;
}

static void deliver_events(http_ctx *h) {
  while (h->pending) {
    http_call *c = h->pending;
    h->pending = c->next_pending;
    c->queued = 0;
    c->on_event(c->ud); /* may release c, or start new calls */
  }
  uv_idle_stop(&h->nudge);
}

static void on_check(uv_check_t *ch) { deliver_events(ch->data); }
static void on_nudge(uv_idle_t *i) { deliver_events(i->data); }

/* --------------------------------------------------------------- curl --- */

static void finish(http_call *c, int err, const char *msg) {
  if (c->done) return;
  c->done = 1;
  c->err = err;
  if (msg) snprintf(c->errmsg, sizeof c->errmsg, "%s", msg);
  if (c->idle) uv_timer_stop(c->idle);
  if (c->in_multi) {
    curl_multi_remove_handle(c->h->multi, c->easy);
    c->in_multi = 0;
  }
  queue_event(c);
}

static void read_done(http_ctx *h) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(h->multi, &left))) {
    if (m->msg != CURLMSG_DONE) continue;
    http_call *c = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
    CURLcode rc = m->data.result;
    if (!c || c->done) continue;
    if (rc == CURLE_OK) {
      curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
      c->headers_done = 1;
      finish(c, HTTP_OK, NULL);
      continue;
    }
    char msg[CURL_ERROR_SIZE + 64];
    const char *detail = c->abort_why[0] ? c->abort_why : c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc);
    int kind = HTTP_ETRANSFER;
    if (rc == CURLE_OPERATION_TIMEDOUT) kind = HTTP_ETIMEOUT;
    else if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY ||
             rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_PEER_FAILED_VERIFICATION ||
             (rc == CURLE_SEND_ERROR && !c->headers_done) || (rc == CURLE_RECV_ERROR && !c->headers_done) ||
             (rc == CURLE_GOT_NOTHING))
      kind = HTTP_ECONNECT;
    else if (rc == CURLE_WRITE_ERROR && c->total > c->max_bytes) kind = HTTP_ETOOLARGE;
    if (kind == HTTP_ETOOLARGE)
      snprintf(msg, sizeof msg, "response larger than %zu bytes", c->max_bytes);
    else
      snprintf(msg, sizeof msg, "%s", detail);
    finish(c, kind, msg);
  }
}

static void on_poll(uv_poll_t *p, int status, int events) {
  sockctx *s = p->data;
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  int running;
  curl_multi_socket_action(s->h->multi, s->fd, flags, &running);
  read_done(s->h);
}

static void on_timer(uv_timer_t *t) {
  http_ctx *h = t->data;
  int running;
  curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  read_done(h);
}

/* A failure (-1) makes curl fail every transfer of the multi handle: none
 * waits for a timeout that would never come. */
static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  http_ctx *h = userp;
  int rc = timeout_ms < 0 ? uv_timer_stop(&h->timer)
                          : uv_timer_start(&h->timer, on_timer, (uint64_t)timeout_ms, 0); /* 0: on the next loop turn */
  return rc == 0 ? 0 : -1;
}

static void sock_closed(uv_handle_t *hd) { free(hd->data); }

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  http_ctx *h = userp;
  sockctx *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      uv_poll_stop(&s->poll);
      uv_close((uv_handle_t *)&s->poll, sock_closed);
      curl_multi_assign(h->multi, fd, NULL);
    }
    return 0;
  }
  if (!s) {
    s = util_xcalloc(1, sizeof *s);
    s->fd = fd;
    s->h = h;
    if (uv_poll_init_socket(h->loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->poll.data = s;
    curl_multi_assign(h->multi, fd, s);
  }
  int ev = 0;
  if (what & CURL_POLL_IN) ev |= UV_READABLE;
  if (what & CURL_POLL_OUT) ev |= UV_WRITABLE;
  /* -1: curl fails the transfers instead of waiting on a socket nobody watches */
  return uv_poll_start(&s->poll, ev, on_poll) == 0 ? 0 : -1;
}

/* Every socket curl opens is close-on-exec: a child the engine starts (a
 * sandbox, git) must never inherit a connection (the Docker socket above all). */
static curl_socket_t open_socket_cb(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
  (void)ud;
  (void)purpose;
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void idle_fired(uv_timer_t *t) {
  http_call *c = t->data;
  char msg[96];
  snprintf(msg, sizeof msg, "no data received for %ld ms (idle timeout)", c->idle_ms);
  finish(c, HTTP_EIDLE, msg);
}

/* Restarts the idle timeout; returns 0 or a libuv error. */
static int touch_idle(http_call *c) {
  return c->idle ? uv_timer_start(c->idle, idle_fired, (uint64_t)c->idle_ms, 0) : 0;
}

/* For a curl callback that must stop the transfer: says why, for read_done,
 * and returns what makes curl abort it (CURLE_WRITE_ERROR). */
static size_t abort_transfer(http_call *c, const char *why, const char *detail) {
  snprintf(c->abort_why, sizeof c->abort_why, "%s: %s", why, detail);
  return 0;
}

static size_t header_cb(char *data, size_t size, size_t n, void *ud) {
  http_call *c = ud;
  size_t len = size * n;
  int rc = touch_idle(c);
  if (rc != 0) return abort_transfer(c, "cannot restart the idle timer", uv_strerror(rc));
  if (len >= 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new header block (e.g. after 100 Continue) */
    for (size_t i = 0; i < c->nh; i++) {
      free(c->hnames[i]);
      free(c->hvalues[i]);
    }
    c->nh = 0;
    c->headers_done = 0;
    return len;
  }
  if (len <= 2) { /* the blank line */
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
    if (c->status >= 200) {
      c->headers_done = 1;
      queue_event(c);
    }
    return len;
  }
  const char *colon = memchr(data, ':', len);
  if (!colon) return len;
  if (c->nh == c->caph) {
    c->caph = c->caph ? c->caph * 2 : 16;
    c->hnames = util_xrealloc(c->hnames, c->caph * sizeof(char *));
    c->hvalues = util_xrealloc(c->hvalues, c->caph * sizeof(char *));
  }
  size_t nl = (size_t)(colon - data);
  char *name = util_xmalloc(nl + 1);
  for (size_t i = 0; i < nl; i++) name[i] = (char)((data[i] >= 'A' && data[i] <= 'Z') ? data[i] + 32 : data[i]);
  name[nl] = 0;
  const char *v = colon + 1, *end = data + len;
  while (v < end && (*v == ' ' || *v == '\t')) v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
  char *value = util_xmalloc((size_t)(end - v) + 1);
  memcpy(value, v, (size_t)(end - v));
  value[end - v] = 0;
  c->hnames[c->nh] = name;
  c->hvalues[c->nh] = value;
  c->nh++;
  return len;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud) {
  http_call *c = ud;
  size_t len = size * n;
  if (c->window && c->body.n > 0 && c->body.n + len > c->window) {
    /* The reader lags: hold the transfer instead of buffering (curl keeps this
     * chunk and offers it again on resume). The engine is the slow side, so
     * the idle timer waits too. */
    c->paused = 1;
    if (c->idle) uv_timer_stop(c->idle);
    queue_event(c);
    return CURL_WRITEFUNC_PAUSE;
  }
  int rc = touch_idle(c);
  if (rc != 0) return abort_transfer(c, "cannot restart the idle timer", uv_strerror(rc));
  c->total += len;
  if (c->total > c->max_bytes) return 0; /* aborts with CURLE_WRITE_ERROR */
  /* a body memory cannot hold fails this transfer, not the engine */
  if (ubuf_try_add(&c->body, data, len) != 0) return abort_transfer(c, "response body", "out of memory");
  if (!c->headers_done) {
    curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->status);
    c->headers_done = 1;
  }
  queue_event(c);
  return len;
}

/* --------------------------------------------------------------- api --- */

http_ctx *http_new(uv_loop_t *loop, char *err, size_t errlen) {
  if (!curl_inited) {
    CURLcode cc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (cc != CURLE_OK) {
      util_seterr(err, errlen, "cannot start the HTTP client: libcurl: %s", curl_easy_strerror(cc));
      return NULL;
    }
    curl_inited = 1;
  }
  http_ctx *h = util_xcalloc(1, sizeof *h);
  h->loop = loop;
  h->multi = curl_multi_init();
  if (!h->multi) {
    util_seterr(err, errlen, "cannot start the HTTP client: libcurl has no multi handle (out of memory)");
    free(h);
    return NULL;
  }
  child_cloexec_all(); /* curl's own wake-up socketpair is not close-on-exec */
  curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h);
  curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h);
  curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
  h->timer.data = h->deliver.data = h->nudge.data = h;
  int rc = uv_timer_init(loop, &h->timer);
  if (rc == 0) {
    h->open_handles = 1;
    rc = uv_check_init(loop, &h->deliver);
  }
  if (rc == 0) {
    h->open_handles = 2;
    rc = uv_idle_init(loop, &h->nudge);
  }
  if (rc == 0) {
    h->open_handles = 3;
    rc = uv_check_start(&h->deliver, on_check);
  }
  if (rc != 0) {
    util_seterr(err, errlen, "cannot start the HTTP client: %s", uv_strerror(rc));
    http_free(h);
    return NULL;
  }
  uv_unref((uv_handle_t *)&h->deliver); /* does not keep the loop alive by itself */
  return h;
}

static void ctx_closed(uv_handle_t *hd) {
  http_ctx *h = hd->data;
  if (--h->open_handles == 0) free(h);
}

void http_free(http_ctx *h) {
  if (!h) return;
  /* calls still in flight are the owner's to release; curl's sockets close with the multi */
  curl_multi_cleanup(h->multi);
  uv_handle_t *handles[] = {(uv_handle_t *)&h->timer, (uv_handle_t *)&h->deliver, (uv_handle_t *)&h->nudge};
  int n = h->open_handles;
  if (n == 0) free(h);
  for (int i = 0; i < n; i++) uv_close(handles[i], ctx_closed);
}

http_call *http_start(http_ctx *h, const http_req *r, void (*on_event)(void *ud), void *ud, char *err,
                      size_t errlen) {
  if (!r->url || strncasecmp(r->url, "http", 4) != 0) {
    util_seterr(err, errlen, "only http:// and https:// URLs are supported (got %s)", r->url ? r->url : "none");
    return NULL;
  }
  CURL *e = curl_easy_init();
  if (!e) {
    util_seterr(err, errlen, "cannot start the request: libcurl has no handle (out of memory)");
    return NULL;
  }
  http_call *c = util_xcalloc(1, sizeof *c);
  c->h = h;
  c->on_event = on_event;
  c->ud = ud;
  c->max_bytes = r->max_bytes ? r->max_bytes : DEFAULT_MAX_BYTES;
  c->window = r->window;
  c->easy = e;
  curl_easy_setopt(e, CURLOPT_URL, r->url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, c);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->curl_err);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket_cb);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, r->connect_timeout_ms > 0 ? r->connect_timeout_ms : 10000L);
  if (r->timeout_ms > 0) curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, r->timeout_ms);
  if (r->unix_socket) curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, r->unix_socket);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* whatever curl can decode */
  if (r->body) {
    c->body_copy = util_xmalloc(r->body_len + 1);
    memcpy(c->body_copy, r->body, r->body_len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body_copy);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
  }
  const char *method = r->method ? r->method : (r->body ? "POST" : "GET");
  if (strcmp(method, "GET") == 0 && !r->body)
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  else if (strcmp(method, "HEAD") == 0)
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  else if (!(strcmp(method, "POST") == 0 && r->body))
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  const char *why = NULL;
  for (size_t i = 0; i <= r->nheaders && !why; i++) {
    /* the last one: no 100-continue round trip */
    struct curl_slist *l = curl_slist_append(c->req_headers, i < r->nheaders ? r->headers[i] : "Expect:");
    if (l) c->req_headers = l;
    else why = "out of memory for the request headers";
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->req_headers);
  int rc = 0;
  if (!why && r->idle_timeout_ms > 0) {
    c->idle_ms = r->idle_timeout_ms;
    uv_timer_t *t = util_xmalloc(sizeof *t);
    t->data = c;
    rc = uv_timer_init(h->loop, t);
    if (rc == 0) c->idle = t; /* closed by http_release from here on */
    else free(t);
    if (rc == 0) rc = touch_idle(c);
    if (rc != 0) why = uv_strerror(rc);
  }
  if (!why && curl_multi_add_handle(h->multi, e) != CURLM_OK) why = "libcurl refused it";
  if (why) {
    util_seterr(err, errlen, "cannot start the request: %s", why);
    c->on_event = NULL;
    http_release(c);
    return NULL;
  }
  c->in_multi = 1;
  return c;
}

static void free_handle(uv_handle_t *hd) { free(hd); }

void http_release(http_call *c) {
  if (!c) return;
  unqueue(c);
  if (c->in_multi) {
    curl_multi_remove_handle(c->h->multi, c->easy);
  }
  if (c->idle) {
    c->idle->data = NULL;
    uv_close((uv_handle_t *)c->idle, free_handle);
  }
  curl_easy_cleanup(c->easy);
  curl_slist_free_all(c->req_headers);
  for (size_t i = 0; i < c->nh; i++) {
    free(c->hnames[i]);
    free(c->hvalues[i]);
  }
  free(c->hnames);
  free(c->hvalues);
  free(c->body_copy);
  ubuf_free(&c->body);
  free(c);
}

int http_headers_done(const http_call *c) { return c->headers_done; }
long http_status(const http_call *c) { return c->status; }

size_t http_header_count(const http_call *c) { return c->nh; }

void http_header_at(const http_call *c, size_t i, const char **name, const char **value) {
  *name = c->hnames[i];
  *value = c->hvalues[i];
}

const char *http_take(http_call *c, size_t *len) {
  *len = c->body.n;
  c->body.n = 0;
  return c->body.p;
}

void http_resume(http_call *c) {
  if (!c->paused || c->done || c->body.n > c->window / 2) return;
  c->paused = 0;
  int rc = touch_idle(c);
  if (rc != 0) {
    char msg[96];
    snprintf(msg, sizeof msg, "cannot restart the idle timer: %s", uv_strerror(rc));
    finish(c, HTTP_ETRANSFER, msg);
    return;
  }
  /* may call write_cb before it returns: what the caller took is already copied */
  curl_easy_pause(c->easy, CURLPAUSE_CONT);
}

size_t http_buffered(const http_call *c) { return c->body.n; }
int http_done(const http_call *c) { return c->done; }

int http_error(const http_call *c, const char **message) {
  if (message) *message = c->errmsg;
  return c->err;
}

