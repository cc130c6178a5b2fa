/* api_client: the CLI's side of the HTTP API (api_client.h). */
#include "api_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "json.h"
#include "util.h"

/* A reply body past this is refused (a server gone wrong, not a page). */
#define MAX_BODY ((size_t)1 << 30)
enum { CONNECT_TIMEOUT_S = 10, CALL_TIMEOUT_S = 120, STALL_S = 60, DEFAULT_RETRIES = 6 };
/* A stream open this long counts as a fresh start: its retries begin again. */
enum { STREAM_STEADY_MS = 5000 };

struct api_client {
  char *url; /* without a trailing slash */
  struct curl_slist *auth; /* "Authorization: Bearer ..." or NULL */
};

/* --------------------------------------------------------------- setup --- */

api_client *api_client_new(const char *url, const char *token, char *err, size_t errlen) {
  if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0) {
    util_seterr(err, errlen, "--server %s: the URL must start with http:// or https://", url);
    return NULL;
  }
  CURLU *u = curl_url();
  char *host = NULL, *user = NULL, *query = NULL, *frag = NULL;
  int bad = !u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host;
  if (!bad) {
    curl_url_get(u, CURLUPART_USER, &user, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0);
  }
  if (bad) util_seterr(err, errlen, "--server %s is not a valid URL", url);
  else if (user) util_seterr(err, errlen, "--server: a URL with user:password@ is refused; pass the token in ENGINE_TOKEN or --token");
  else if (query || frag) util_seterr(err, errlen, "--server %s: the URL must not have a ?query or #fragment", url);
  curl_free(host);
  curl_free(user);
  curl_free(query);
  curl_free(frag);
  curl_url_cleanup(u);
  if (bad || user || query || frag) return NULL;
  if (token) {
    /* a bearer token is printable ASCII; anything else could split the header */
    for (const char *p = token; *p; p++)
      if (*p <= 0x20 || *p >= 0x7f) {
        util_seterr(err, errlen, "the token (ENGINE_TOKEN or --token) holds a space, a control character or a byte "
                                 "that is not ASCII: no token has those");
        return NULL;
      }
    if (!*token) token = NULL;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    util_seterr(err, errlen, "cannot initialise libcurl");
    return NULL;
  }
  api_client *c = util_xcalloc(1, sizeof *c);
  c->url = util_strdup(url);
  size_t n = strlen(c->url);
  while (n > 0 && c->url[n - 1] == '/') c->url[--n] = 0;
  if (token) {
    char *h = util_fmt("Authorization: Bearer %s", token);
    c->auth = curl_slist_append(NULL, h);
    memset(h, 0, strlen(h));
    free(h);
  }
  return c;
}

void api_client_free(api_client *c) {
  if (!c) return;
  if (c->auth) {
    /* the header holds the secret: wipe it before it goes back to malloc */
    for (struct curl_slist *s = c->auth; s; s = s->next) memset(s->data, 0, strlen(s->data));
    curl_slist_free_all(c->auth);
  }
  free(c->url);
  free(c);
  curl_global_cleanup();
}

const char *api_client_url(const api_client *c) { return c->url; }

char *api_client_escape(const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  char *out = util_xmalloc(strlen(s) * 3 + 1), *o = out;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p)) {
      *o++ = (char)*p;
    } else {
      *o++ = '%';
      *o++ = hex[*p >> 4];
      *o++ = hex[*p & 15];
    }
  }
  *o = 0;
  return out;
}

/* The headers of every request: the token, what is sent and expected. */
static struct curl_slist *headers_for(const api_client *c, const char *accept, int json_body, const char *last_id,
                                      const char *const *extra) {
  struct curl_slist *h = NULL;
  for (const char *const *x = extra; x && *x; x++) h = curl_slist_append(h, *x);
  for (struct curl_slist *s = c->auth; s; s = s->next) h = curl_slist_append(h, s->data);
  char *a = util_fmt("Accept: %s", accept);
  h = curl_slist_append(h, a);
  free(a);
  if (json_body) h = curl_slist_append(h, "Content-Type: application/json");
  h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
  if (last_id && *last_id) {
    char *l = util_fmt("Last-Event-ID: %s", last_id);
    h = curl_slist_append(h, l);
    free(l);
  }
  return h;
}

static void common_options(CURL *e, const char *url, struct curl_slist *h, char *errbuf) {
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, (long)CONNECT_TIMEOUT_S);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_USERAGENT, "engine-cli");
  errbuf[0] = 0;
}

/* ------------------------------------------------------------ answers --- */

static size_t collect(char *ptr, size_t size, size_t nmemb, void *ud) {
  ubuf *b = ud;
  size_t n = size * nmemb;
  if (b->n + n > MAX_BODY || ubuf_try_add(b, ptr, n) != 0) return 0;
  return n;
}

/* r->message for a status >= 400: the server's {"error":{"message":...}},
 * else a line saying the answer was not the engine's. */
static void error_message(const api_client *c, api_reply *r) {
  const char *err;
  size_t en;
  char *msg = NULL;
  if (r->body && json_get(r->body, r->len, "error", &err, &en) == 1) msg = json_get_string(err, en, "message");
  if (r->status >= 500)
    snprintf(r->message, sizeof r->message, "the server at %s failed (HTTP %ld): %s", c->url, r->status,
             msg ? msg : "no message (a proxy in front of it?)");
  else if (msg)
    snprintf(r->message, sizeof r->message, "%s", msg);
  else
    snprintf(r->message, sizeof r->message, "the server at %s answered HTTP %ld without the engine's error JSON (is it "
             "the engine's API?)", c->url, r->status);
  free(msg);
}

static void no_answer(const api_client *c, api_reply *r, CURLcode cc, const char *errbuf) {
  r->status = 0;
  snprintf(r->message, sizeof r->message, "cannot reach the server at %s: %s", c->url,
           *errbuf ? errbuf : curl_easy_strerror(cc));
}

int api_client_call(api_client *c, const char *method, const char *path, const char *body, api_reply *r) {
  return api_client_call_h(c, method, path, body, NULL, r);
}

int api_client_call_h(api_client *c, const char *method, const char *path, const char *body, const char *const *headers,
                      api_reply *r) {
  memset(r, 0, sizeof *r);
  CURL *e = curl_easy_init();
  if (!e) {
    snprintf(r->message, sizeof r->message, "cannot start a request: out of memory");
    return -1;
  }
  char errbuf[CURL_ERROR_SIZE], *url = util_fmt("%s%s", c->url, path);
  struct curl_slist *h = headers_for(c, "application/json", body != NULL, NULL, headers);
  ubuf b = {0};
  common_options(e, url, h, errbuf);
  curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)CALL_TIMEOUT_S);
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  if (strcmp(method, "POST") == 0) {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body : "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? strlen(body) : 0));
  }
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
  CURLcode cc = curl_easy_perform(e);
  ubuf_add(&b, "", 1);
  r->body = b.p;
  r->len = b.n - 1;
  int rc = -1;
  if (cc != CURLE_OK) {
    no_answer(c, r, cc, errbuf);
  } else {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
    if (r->status >= 200 && r->status < 300) rc = 0;
    else error_message(c, r);
  }
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  free(url);
  return rc;
}

void api_reply_free(api_reply *r) {
  free(r->body);
  r->body = NULL;
}

/* ----------------------------------------------------------- SSE parser --- */

void sse_init(sse_parser *p, sse_fn fn, void *ud) {
  memset(p, 0, sizeof *p);
  p->fn = fn;
  p->ud = ud;
  p->retry_ms = -1;
  p->max = json_max_payload() * 6 + 65536; /* a payload with every byte escaped, and its frame */
}

void sse_reset(sse_parser *p) {
  p->line.n = p->data.n = p->type.n = 0;
  p->cr = p->started = 0;
}

void sse_free(sse_parser *p) {
  ubuf_free(&p->line);
  ubuf_free(&p->data);
  ubuf_free(&p->type);
  free(p->last_id);
  p->last_id = NULL;
}

/* A blank line: the frame so far goes to the callback (when it has data). */
static int dispatch(sse_parser *p) {
  int rc = 0;
  if (p->data.n > 0) {
    p->data.n--; /* the LF after the last data line */
    ubuf_add(&p->data, "", 1);
    ubuf_add(&p->type, "", 1);
    sse_event ev = {p->type.n > 1 ? p->type.p : "message", p->data.p, p->data.n - 1, p->last_id ? p->last_id : ""};
    int v = p->fn(p->ud, &ev);
    rc = v > 0 ? v : 0;
  }
  p->data.n = p->type.n = 0;
  return rc;
}

static int process_line(sse_parser *p) {
  const char *s = p->line.p ? p->line.p : "";
  size_t n = p->line.n;
  if (n == 0) return dispatch(p);
  if (s[0] == ':') return 0; /* a comment: the server's heartbeat */
  const char *colon = memchr(s, ':', n);
  size_t fl = colon ? (size_t)(colon - s) : n;
  const char *v = colon ? colon + 1 : s + n;
  size_t vn = (size_t)(s + n - v);
  if (vn && *v == ' ') v++, vn--;
  if (fl == 5 && memcmp(s, "event", 5) == 0) {
    p->type.n = 0;
    ubuf_add(&p->type, v, vn);
  } else if (fl == 4 && memcmp(s, "data", 4) == 0) {
    ubuf_add(&p->data, v, vn);
    ubuf_add(&p->data, "\n", 1);
  } else if (fl == 2 && memcmp(s, "id", 2) == 0) {
    if (!memchr(v, 0, vn)) {
      free(p->last_id);
      p->last_id = util_xmalloc(vn + 1);
      memcpy(p->last_id, v, vn);
      p->last_id[vn] = 0;
    }
  } else if (fl == 5 && memcmp(s, "retry", 5) == 0) {
    long ms = 0;
    size_t i = 0;
    for (; i < vn && v[i] >= '0' && v[i] <= '9' && ms < 100000000; i++) ms = ms * 10 + (v[i] - '0');
    if (vn && i == vn) p->retry_ms = ms;
  }
  return 0; /* any other field is ignored, as the format says */
}

int sse_feed(sse_parser *p, const char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = buf[i];
    if (!p->started) {
      /* a UTF-8 BOM may open the stream: three bytes, possibly split */
      static const char bom[] = "\xef\xbb\xbf";
      if (p->line.n < 3 && c == bom[p->line.n]) {
        ubuf_add(&p->line, &c, 1);
        if (p->line.n == 3) p->line.n = 0, p->started = 1;
        continue;
      }
      p->started = 1; /* not a BOM: what was held is text */
    }
    if (p->cr && c == '\n') { /* the LF of a CRLF */
      p->cr = 0;
      continue;
    }
    p->cr = c == '\r';
    if (c == '\r' || c == '\n') {
      int rc = process_line(p);
      p->line.n = 0;
      if (rc) return rc;
      continue;
    }
    if (p->line.n + p->data.n >= p->max) return -1;
    ubuf_add(&p->line, &c, 1);
  }
  return 0;
}

/* ------------------------------------------------------------ streaming --- */

typedef struct conn {
  CURL *e;
  sse_parser *p;
  long status;
  int checked, is_stream;
  int stopped; /* 1: on_event, 2: on_idle, -1: a frame too long */
  ubuf body;   /* the answer when it is not a stream (an error) */
} conn;

static size_t on_stream_bytes(char *ptr, size_t size, size_t nmemb, void *ud) {
  conn *k = ud;
  size_t n = size * nmemb;
  if (!k->checked) {
    char *ct = NULL;
    k->checked = 1;
    curl_easy_getinfo(k->e, CURLINFO_RESPONSE_CODE, &k->status);
    curl_easy_getinfo(k->e, CURLINFO_CONTENT_TYPE, &ct);
    k->is_stream = k->status == 200 && ct && strncasecmp(ct, "text/event-stream", 17) == 0;
  }
  if (!k->is_stream) return collect(ptr, size, nmemb, &k->body);
  int rc = sse_feed(k->p, ptr, n);
  if (rc) {
    k->stopped = rc > 0 ? 1 : -1;
    return 0; /* ends the transfer */
  }
  return n;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

enum { CONN_DROPPED = 0, CONN_FATAL = -1, CONN_RETRY = -2 };

/* One connection of a stream until it ends: 1 or 2 when a callback stopped
 * it, CONN_DROPPED when an open stream ended, CONN_RETRY when no stream
 * opened but trying again may help (no answer, a 5xx), CONN_FATAL when it
 * cannot (a 4xx, not an event stream); r->message says why. */
static int stream_once(api_client *c, const char *url, const api_stream *o, sse_parser *p, api_reply *r) {
  CURLM *m = curl_multi_init();
  CURL *e = curl_easy_init();
  if (!m || !e) {
    if (m) curl_multi_cleanup(m);
    if (e) curl_easy_cleanup(e);
    snprintf(r->message, sizeof r->message, "cannot start a request: out of memory");
    return CONN_FATAL;
  }
  char errbuf[CURL_ERROR_SIZE];
  struct curl_slist *h = headers_for(c, "text/event-stream", 0, p->last_id, NULL);
  h = curl_slist_append(h, "Cache-Control: no-cache");
  conn k = {e, p, 0, 0, 0, 0, {0}};
  common_options(e, url, h, errbuf);
  /* a stream that says nothing for this long (not even a heartbeat) is dead */
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)STALL_S);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_stream_bytes);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &k);
  curl_multi_add_handle(m, e);
  int running = 1;
  int64_t next_idle = util_mono_ms() + 1000;
  while (running && !k.stopped) {
    if (curl_multi_perform(m, &running) != CURLM_OK || k.stopped || !running) break;
    curl_multi_poll(m, NULL, 0, 1000, NULL);
    if (o->on_idle && util_mono_ms() >= next_idle) {
      next_idle = util_mono_ms() + 1000;
      if (o->on_idle(o->ud) > 0) k.stopped = 2;
    }
  }
  CURLcode cc = CURLE_OK;
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(m, &left)))
    if (msg->msg == CURLMSG_DONE) cc = msg->data.result;
  if (!k.checked) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &k.status);
  curl_multi_remove_handle(m, e);
  curl_easy_cleanup(e);
  curl_multi_cleanup(m);
  curl_slist_free_all(h);
  ubuf_add(&k.body, "", 1);
  free(r->body);
  r->body = k.body.p;
  r->len = k.body.n - 1;
  r->status = k.status;
  int rc;
  if (k.stopped == 1 || k.stopped == 2) {
    rc = k.stopped;
  } else if (k.stopped < 0) {
    snprintf(r->message, sizeof r->message, "a frame of the event stream from %s is longer than %zu bytes", c->url,
             p->max);
    rc = CONN_FATAL;
  } else if (k.is_stream) {
    snprintf(r->message, sizeof r->message, "the event stream from %s ended: %s", c->url,
             cc == CURLE_OK ? "the server closed it" : *errbuf ? errbuf : curl_easy_strerror(cc));
    rc = CONN_DROPPED;
  } else if (k.status == 0 || cc != CURLE_OK) {
    no_answer(c, r, cc, errbuf);
    rc = CONN_RETRY;
  } else if (k.status == 200) {
    snprintf(r->message, sizeof r->message, "the server at %s answered without an event stream (is it the engine's "
             "API?)", c->url);
    rc = CONN_FATAL;
  } else {
    error_message(c, r);
    rc = k.status >= 500 ? CONN_RETRY : CONN_FATAL;
  }
  return rc;
}

int api_client_stream(api_client *c, const char *path, const api_stream *o, api_reply *r) {
  memset(r, 0, sizeof *r);
  sse_parser p;
  sse_init(&p, o->on_event, o->ud);
  if (o->last_id && *o->last_id) p.last_id = util_strdup(o->last_id);
  char *url = util_fmt("%s%s", c->url, path);
  int retries = o->retries > 0 ? o->retries : DEFAULT_RETRIES, attempt = 0, ever_open = 0, rc;
  for (;;) {
    sse_reset(&p);
    int64_t t0 = util_mono_ms();
    rc = stream_once(c, url, o, &p, r);
    if (rc > 0 || rc == CONN_FATAL) break;
    if (rc == CONN_DROPPED) {
      ever_open = 1;
      if (util_mono_ms() - t0 >= STREAM_STEADY_MS) attempt = 0;
    } else if (!ever_open) {
      break; /* the first request failed: say so at once */
    }
    if (attempt >= retries) {
      char why[sizeof r->message];
      snprintf(why, sizeof why, "%s", r->message);
      snprintf(r->message, sizeof r->message, "lost the event stream from %.200s and could not resume it (%d attempts): %.800s",
               c->url, attempt, why);
      rc = CONN_FATAL;
      break;
    }
    long pause = 250L << attempt;
    sleep_ms(pause > 8000 ? 8000 : pause);
    attempt++;
  }
  sse_free(&p);
  free(url);
  if (rc > 0) {
    r->status = 200;
    r->message[0] = 0;
    return rc;
  }
  return -1;
}
