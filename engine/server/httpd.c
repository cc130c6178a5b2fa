/* httpd: the HTTP server (see httpd.h).
 *
 * Why libmicrohttpd: the HTTP parser is the part of a server most exposed to
 * hostile bytes, so it comes from a library with a security team behind it
 * (Debian's libmicrohttpd 0.9.75 is security-supported; libh2o's Debian
 * package, the other library that fits a libuv loop, is a stale 2.2.5).
 * MHD runs in external-epoll mode: its epoll fd sits in one uv_poll_t and
 * MHD_get_timeout() sets one uv_timer_t, so requests are served by the same
 * loop as workflows, activities and timers, with no thread. A response that
 * waits (for the group commit, for the next event of a stream) suspends its
 * connection; the answer resumes it.
 *
 * Limits, each with its status: a body over max_body is 413 (from
 * Content-Length before a byte of it is read, or as soon as it passes the
 * limit as it arrives, and the connection closed), a request
 * line and headers over max_header 431 (414 for a request line alone; we
 * measure them, and MHD answers those that overflow its memory pool), a
 * connection past max_connections 503. A client silent for
 * idle_timeout_s is dropped by MHD; a client that trickles (slowloris: a byte
 * now and then, which resets MHD's idle timer) is cut off when its request
 * has not arrived whole after request_timeout_s. Neither costs the loop
 * more than a read. */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json.h"
#include "util.h"

/* Connections over max_connections get a 503 from us; MHD itself turns away
 * only those past this margin (it closes them without a word). */
#define CONN_MARGIN 64
#define SWEEP_MS 1000

typedef struct conn_rec {
  struct conn_rec *prev, *next;
  struct MHD_Connection *c;
  int fd;
  int64_t receiving_since; /* the connection opened, or its last request ended */
  int handled;             /* its request is with the handler (or streaming): no deadline */
  int cut;                 /* shut down for trickling */
  httpd_req *req;          /* made by on_uri, until on_completed frees it */
} conn_rec;

struct httpd_stream {
  struct httpd_stream *prev, *next;
  httpd_req *r;
  ubuf q;
  size_t off;
  int ended, waiting; /* waiting: suspended in the reader until there is data */
  int aborted;        /* cut off: what is queued is dropped, the connection closed */
  void (*on_close)(void *ud);
  void (*on_drain)(void *ud);
  void *ud;
};

struct httpd_req {
  struct httpd_req *sprev, *snext; /* in httpd.parked while suspended */
  httpd *h;
  struct MHD_Connection *c;
  conn_rec *conn;
  char *method, *path;
  char *authority;  /* of an absolute-form target (RFC 9112 3.2.2), else NULL */
  ubuf body;
  int started;      /* the access handler has seen it */
  size_t max_body;  /* the limit for this request's path */
  int handled;      /* given to the handler */
  int suspended;    /* waiting for httpd_respond */
  int answered;     /* a response is queued (or pending in resp) */
  size_t refused;   /* refused while its body streamed in: bytes of it dropped since */
  struct MHD_Response *resp;
  int status;
  httpd_stream *stream;
};

struct httpd {
  uv_loop_t *loop;
  struct MHD_Daemon *d;
  uv_poll_t poll;
  uv_timer_t timer, sweep;
  int closing, handles;
  int in_run, kicked; /* in MHD_run; a connection was resumed since it began */
  int fresh;          /* a request line arrived in this MHD_run */
  httpd_limits lim;
  httpd_handler handler;
  void *ud;
  char addr[80];
  conn_rec *conns;
  httpd_req *parked; /* suspended until httpd_respond */
  unsigned nconns, nstreams;
  httpd_stream *streams;
  int draining;                /* httpd_drain: no new request */
  void (*drained)(void *ud);   /* told once no request is in flight */
  void *drained_ud;
};

/* ------------------------------------------------------------- limits --- */

static int env_limit(const char *name, uint64_t lo, uint64_t hi, uint64_t *v, char *err, size_t errlen) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, 10);
  if (errno || *end || s[0] == '-' || x < lo || x > hi) {
    char shown[48];
    snprintf(shown, sizeof shown, "%.40s", s);
    util_seterr(err, errlen, "%s must be a whole number from %llu to %llu, not '%s'", name, (unsigned long long)lo,
                (unsigned long long)hi, shown);
    return -1;
  }
  *v = x;
  return 0;
}

int httpd_limits_default(httpd_limits *l, char *err, size_t errlen) {
  uint64_t body = 1 << 20, hook = 25 << 20, header = 16 << 10, conns = 1024, idle = 30, req = 30;
  if (env_limit("ENGINE_HTTP_MAX_BODY_BYTES", 1024, (uint64_t)1 << 30, &body, err, errlen) ||
      env_limit("ENGINE_HTTP_MAX_HOOK_BODY_BYTES", 1024, (uint64_t)1 << 30, &hook, err, errlen) ||
      env_limit("ENGINE_HTTP_MAX_HEADER_BYTES", 1024, 1 << 20, &header, err, errlen) ||
      env_limit("ENGINE_HTTP_MAX_CONNECTIONS", 1, 65536, &conns, err, errlen) ||
      env_limit("ENGINE_HTTP_IDLE_TIMEOUT_S", 1, 86400, &idle, err, errlen) ||
      env_limit("ENGINE_HTTP_REQUEST_TIMEOUT_S", 1, 86400, &req, err, errlen))
    return -1;
  *l = (httpd_limits){(size_t)body, (size_t)hook, (size_t)header, (unsigned)conns, (unsigned)idle, (unsigned)req};
  return 0;
}

/* ---------------------------------------------------------- the loop --- */

static void run_mhd(httpd *h);

static void on_timer(uv_timer_t *t) { run_mhd(t->data); }

static void run_mhd(httpd *h) {
  if (h->closing) return;
  h->in_run = 1;
  h->kicked = h->fresh = 0;
  MHD_run(h->d);
  h->in_run = 0;
  MHD_UNSIGNED_LONG_LONG ms;
  /* a request MHD refuses while it parses the request line (more query
   * parameters than the connection's memory holds) is closed only in the
   * next MHD_run, which MHD_get_timeout does not ask for: without a run
   * right after each new request line the client would wait for the sweep */
  if (h->kicked || h->fresh)
    uv_timer_start(&h->timer, on_timer, 0, 0);
  else if (MHD_get_timeout(h->d, &ms) == MHD_YES)
    uv_timer_start(&h->timer, on_timer, ms > 3600000 ? 3600000 : (uint64_t)ms, 0);
  else
    uv_timer_stop(&h->timer);
}

static void on_poll(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  run_mhd(p->data);
}

/* With an external event loop MHD acts on a resume only in its next
 * MHD_run, and libmicrohttpd 0.9.75 does not wake the loop for it: without
 * this, an answer after the commit or a stream's new bytes would wait for
 * the next network event or the sweep, up to a second. */
static void resume(httpd *h, struct MHD_Connection *c) {
  MHD_resume_connection(c);
  h->kicked = 1;
  if (!h->in_run && !h->closing) uv_timer_start(&h->timer, on_timer, 0, 0);
}

/* A request that trickles in is cut off at its deadline: shutting the socket
 * down makes MHD see the end of it and close the connection as usual. */
static void on_sweep(uv_timer_t *t) {
  httpd *h = t->data;
  int64_t now = util_mono_ms(), limit = (int64_t)h->lim.request_timeout_s * 1000;
  for (conn_rec *c = h->conns; c; c = c->next) {
    if (c->handled || c->cut || now - c->receiving_since < limit) continue;
    c->cut = 1;
    shutdown(c->fd, SHUT_RDWR);
  }
  run_mhd(h);
}

/* ----------------------------------------------------- MHD callbacks --- */

static void req_free(httpd_req *r);

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  httpd *h = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_rec *r = util_xcalloc(1, sizeof *r);
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    r->c = c;
    r->fd = fd ? fd->connect_fd : -1;
    r->receiving_since = util_mono_ms();
    r->next = h->conns;
    if (h->conns) h->conns->prev = r;
    h->conns = r;
    h->nconns++;
    *socket_context = r;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
    conn_rec *r = *socket_context;
    if (r->req) req_free(r->req); /* never completed (see on_uri) */
    if (r->prev) r->prev->next = r->next;
    else h->conns = r->next;
    if (r->next) r->next->prev = r->prev;
    h->nconns--;
    free(r);
    *socket_context = NULL;
  }
}

/* The request object, made as soon as the request line is read. MHD hands it
 * to on_completed when the request ends, except for one it refuses while it
 * parses that line: its connection's close frees that one. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)uri;
  httpd_req *r = util_xcalloc(1, sizeof *r);
  r->h = cls;
  r->c = c;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  r->conn = ci ? ci->socket_context : NULL;
  if (r->conn) r->conn->req = r;
  r->h->fresh = 1;
  return r;
}

static void stream_unlink(httpd_stream *s) {
  httpd *h = s->r->h;
  if (s->prev) s->prev->next = s->next;
  else h->streams = s->next;
  if (s->next) s->next->prev = s->prev;
  h->nstreams--;
}

/* A request is in flight from its request line until its end. */
static int in_flight(const httpd *h) {
  for (const conn_rec *c = h->conns; c; c = c->next)
    if (c->req || c->handled) return 1;
  return 0;
}

/* While draining: tells once when the last request in flight has ended. */
static void check_drained(httpd *h) {
  if (!h->draining || !h->drained || in_flight(h)) return;
  void (*cb)(void *ud) = h->drained;
  h->drained = NULL;
  cb(h->drained_ud);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)c;
  (void)toe;
  httpd *h = cls;
  httpd_req *r = *con_cls;
  if (!r) return;
  *con_cls = NULL;
  if (r->conn) {
    r->conn->handled = 0;
    r->conn->receiving_since = util_mono_ms();
  }
  req_free(r);
  check_drained(h);
}

/* Frees a request that has ended (its stream ends with it). */
static void req_free(httpd_req *r) {
  if (r->conn && r->conn->req == r) r->conn->req = NULL;
  if (r->stream) {
    httpd_stream *s = r->stream;
    stream_unlink(s);
    if (s->on_close) s->on_close(s->ud);
    ubuf_free(&s->q);
    free(s);
  }
  if (r->resp) MHD_destroy_response(r->resp);
  free(r->method);
  free(r->path);
  free(r->authority);
  ubuf_free(&r->body);
  free(r);
}

/* MHD would percent-decode the path, so that "a%2Fb" became two segments:
 * the router decodes each segment itself. Query values stay encoded too. */
static size_t unescape_none(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return strlen(s);
}

/* The API's error body: {"error":{"status":N,"message":"..."}} */
static char *error_body(int status, const char *msg) {
  char *q = json_quote(msg), *body = util_fmt("{\"error\":{\"status\":%d,\"message\":%s}}\n", status, q);
  free(q);
  return body;
}

static struct MHD_Response *error_response(int status, const char *msg) {
  char *body = error_body(status, msg);
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  MHD_add_response_header(resp, "Content-Type", "application/json");
  return resp;
}

static enum MHD_Result queue_error(httpd_req *r, int status, const char *msg) {
  struct MHD_Response *resp = error_response(status, msg);
  MHD_add_response_header(resp, "Connection", "close");
  if (status == 503) MHD_add_response_header(resp, "Retry-After", "1"); /* as the API's own 503s */
  enum MHD_Result rc = MHD_queue_response(r->c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  r->answered = 1;
  return rc;
}

/* What of a body refused midway is still read (and dropped) before the
 * connection closes: a client that is still sending when we close gets a
 * reset, and may lose our answer with it (curl reports "send failure"); one
 * that reads as it sends (curl does) sees the refusal and stops within this. */
#define LINGER_BYTES (256u << 10)

/* A refusal while the body streams in (a chunked body's size shows only as
 * it comes): libmicrohttpd 0.9.75 takes a response only before the body or
 * after its end, and reading a body we will not keep to its end would let a
 * client make us read without bound. So the answer is written to the socket
 * here, in one send of a fixed head (the request is HTTP/1.x; nothing else
 * was sent on it since its head), and the connection is closed after at
 * most LINGER_BYTES more. */
static void refuse_midway(httpd_req *r, int status, const char *msg) {
  r->answered = 1;
  r->refused = 1;
  if (!r->conn || r->conn->fd < 0) return;
  char *body = error_body(status, msg), *all = util_fmt("HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: "
                                                        "application/json\r\nContent-Length: %zu\r\n\r\n%s",
                                                        status, MHD_get_reason_phrase_for((unsigned)status),
                                                        strlen(body), body);
  ssize_t n = send(r->conn->fd, all, strlen(all), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n; /* a client that reads nothing misses it: the close still ends it */
  shutdown(r->conn->fd, SHUT_WR);
  free(body);
  free(all);
}

static enum MHD_Result add_size(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4; /* "k: v\r\n", "k=v&" */
  return MHD_YES;
}

/* The size of the request line and of the headers, from what MHD parsed.
 * MHD itself refuses only what overflows the connection's memory pool,
 * which is larger than max_header (it holds the read buffer too). */
static void request_size(struct MHD_Connection *c, const char *method, const char *url, size_t *line,
                         size_t *head) {
  *line = strlen(method) + strlen(url) + 12; /* " ", "?", " HTTP/1.1\r\n" */
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_size, line);
  MHD_get_connection_values(c, MHD_HEADER_KIND, add_size, head);
}

/* What tells where a request's body ends, and whom it is for. */
typedef struct framing {
  int lengths, differ, chunked, hosts;
  const char *length;
} framing;

static enum MHD_Result add_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  framing *f = cls;
  if (!value) value = "";
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
    if (f->lengths++ == 0) f->length = value;
    else if (strcmp(f->length, value) != 0) f->differ = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->chunked = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
    f->hosts++;
  }
  return MHD_YES;
}

/* A request whose body length two readers could see differently (two
 * Content-Length values, Content-Length with Transfer-Encoding) is how
 * requests are smuggled past a proxy in front; MHD would pick one and go on
 * reading the connection. RFC 9112 6.3: refuse it, and close. Two Host
 * headers likewise (RFC 9112 3.2). NULL, or why it is refused. */
static const char *ill_formed(struct MHD_Connection *c, const char *version) {
  framing f = {0, 0, 0, 0, NULL};
  MHD_get_connection_values(c, MHD_HEADER_KIND, add_framing, &f);
  if (f.differ) return "the request is ambiguous: two different Content-Length headers";
  if (f.lengths && f.chunked) return "the request is ambiguous: both Content-Length and Transfer-Encoding";
  if (f.hosts > 1) return "the request is ambiguous: more than one Host header";
  /* RFC 9112 3.2: HTTP/1.1 names its host; the tokenless mode's guard
   * against DNS rebinding reads it, so a request without one must not pass */
  if (!f.hosts && strcmp(version, MHD_HTTP_VERSION_1_0) != 0) return "the request has no Host header (HTTP/1.1 requires one)";
  return NULL;
}

/* An absolute-form target ("http://host:port/path", what forward proxies
 * and curl -x send): RFC 9112 3.2.2 has a server take it, route by its path
 * and read its authority in place of Host. 0 when url is not one. */
static int split_absolute(httpd_req *r, const char *url) {
  size_t scheme = strncasecmp(url, "http://", 7) == 0 ? 7 : strncasecmp(url, "https://", 8) == 0 ? 8 : 0;
  if (!scheme) return 0;
  const char *auth = url + scheme, *slash = strchr(auth, '/');
  size_t n = slash ? (size_t)(slash - auth) : strlen(auth);
  r->authority = util_xmalloc(n + 1);
  memcpy(r->authority, auth, n);
  r->authority[n] = 0;
  r->path = util_strdup(slash ? slash : "/");
  return 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  httpd *h = cls;
  httpd_req *r = *con_cls;
  if (!r) return MHD_NO; /* no request object: cannot happen with the URI callback */
  if (!r->started) {
    r->started = 1;
    r->method = util_strdup(method);
    if (!split_absolute(r, url)) r->path = util_strdup(url);
    const char *why = ill_formed(c, version);
    if (why) return queue_error(r, 400, why);
    size_t line = 0, head = 0;
    request_size(c, method, url, &line, &head);
    if (line > h->lim.max_header || line + head > h->lim.max_header) {
      char msg[160];
      snprintf(msg, sizeof msg, "the request %s about %zu bytes, more than the limit of %zu bytes",
               line > h->lim.max_header ? "line is" : "line and headers are",
               line > h->lim.max_header ? line : line + head,
               h->lim.max_header);
      return queue_error(r, line > h->lim.max_header ? 414 : 431, msg);
    }
    if (h->draining) return queue_error(r, 503, "the server is stopping");
    if (h->nconns > h->lim.max_connections) {
      char msg[96];
      snprintf(msg, sizeof msg, "too many connections (the limit is %u); retry later", h->lim.max_connections);
      return queue_error(r, 503, msg);
    }
    /* webhook senders post big payloads (GitHub up to 25 MB): their own limit */
    r->max_body = strncmp(r->path, "/hooks/", 7) == 0 ? h->lim.max_hook_body : h->lim.max_body;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > r->max_body) {
      char msg[128];
      snprintf(msg, sizeof msg, "the body is %.20s bytes, more than the limit of %zu bytes", cl, r->max_body);
      return queue_error(r, 413, msg);
    }
    return MHD_YES;
  }
  if (r->refused) { /* dropped; at the body's end or past the linger MHD_NO closes the connection */
    int more = *upload_size && (r->refused += *upload_size) <= LINGER_BYTES;
    *upload_size = 0;
    return more ? MHD_YES : MHD_NO;
  }
  if (*upload_size) {
    if (r->body.n + *upload_size > r->max_body) {
      char msg[96];
      snprintf(msg, sizeof msg, "the body is more than the limit of %zu bytes", r->max_body);
      ubuf_free(&r->body);
      refuse_midway(r, 413, msg);
      *upload_size = 0;
      return MHD_YES;
    }
    ubuf_add(&r->body, upload, *upload_size);
    *upload_size = 0;
    return MHD_YES;
  }
  if (r->resp) { /* answered while suspended */
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return rc;
  }
  if (r->handled) return MHD_YES; /* resumed without an answer (cannot happen) */
  r->handled = 1;
  if (r->conn) r->conn->handled = 1;
  ubuf_add(&r->body, "", 1); /* NUL-terminated for the handler */
  r->body.n--;
  h->handler(h->ud, r);
  if (r->resp) {
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)r->status, r->resp);
    MHD_destroy_response(r->resp);
    r->resp = NULL;
    return rc;
  }
  if (!r->answered) { /* answered later: park the connection */
    r->suspended = 1;
    r->snext = h->parked;
    if (h->parked) h->parked->sprev = r;
    h->parked = r;
    MHD_suspend_connection(c);
  }
  return MHD_YES;
}

/* ------------------------------------------------------------- start --- */

/* "host:port" or "[v6]:port" into host and port. */
static int split_addr(const char *addr, char *host, size_t hn, char *port, size_t pn) {
  const char *colon;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':') return -1;
    snprintf(host, hn, "%.*s", (int)(close - addr - 1), addr + 1);
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon) return -1;
    snprintf(host, hn, "%.*s", (int)(colon - addr), addr);
  }
  snprintf(port, pn, "%s", colon + 1);
  if (!*port || strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535) return -1;
  return 0;
}

static int is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) {
    const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(a)) return 1;
    return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
  }
  return 0;
}

static void format_addr(const struct sockaddr *sa, char *out, size_t n) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, host, sizeof host);
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, n, "%s:%d", host, port);
  } else {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, host, sizeof host);
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    snprintf(out, n, "[%s]:%d", host, port);
  }
}

/* A listening socket on addr (its family picks IPv4 or IPv6), or -1. */
static int listen_on(const char *addr, struct sockaddr_storage *bound, char *err, size_t errlen) {
  char host[256], port[16];
  if (strlen(addr) > 200 || split_addr(addr, host, sizeof host, port, sizeof port) != 0) {
    util_seterr(err, errlen, "--listen %.200s: expected HOST:PORT (127.0.0.1:7420, [::1]:7420; port 0 picks one)",
                addr);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
  if (!*host) hints.ai_flags |= AI_PASSIVE;
  int gai = getaddrinfo(*host ? host : NULL, port, &hints, &ai);
  if (gai != 0) {
    util_seterr(err, errlen, "--listen %s: cannot resolve '%s': %s", addr, host, gai_strerror(gai));
    return -1;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 511) != 0) {
    util_seterr(err, errlen, "--listen %s: %s", addr, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  socklen_t len = sizeof *bound;
  getsockname(fd, (struct sockaddr *)bound, &len);
  return fd;
}

httpd *httpd_start(uv_loop_t *loop, const char *addr, const httpd_limits *lim, httpd_handler handler, void *ud,
                   int *loopback, char *err, size_t errlen) {
  struct sockaddr_storage bound;
  int fd = listen_on(addr, &bound, err, errlen);
  if (fd < 0) return NULL;
  httpd *h = util_xcalloc(1, sizeof *h);
  h->loop = loop;
  h->lim = *lim;
  h->handler = handler;
  h->ud = ud;
  format_addr((struct sockaddr *)&bound, h->addr, sizeof h->addr);
  *loopback = is_loopback((struct sockaddr *)&bound);
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | (bound.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  /* the connection's memory pool holds the request line and headers (and
   * what MHD reads ahead): twice the limit, so that headers over the limit
   * still fit and get our 431 (headers_size); only far past it does MHD
   * refuse them itself (431, or a closed connection) */
  size_t pool = 2 * lim->max_header + 4096;
  h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, fd,
                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)(lim->max_connections + CONN_MARGIN),
                          MHD_OPTION_CONNECTION_TIMEOUT, lim->idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                          pool, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION,
                          on_connection, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_UNESCAPE_CALLBACK,
                          unescape_none, NULL, MHD_OPTION_END);
  const union MHD_DaemonInfo *ep = h->d ? MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
  if (!ep) {
    util_seterr(err, errlen, "--listen %s: libmicrohttpd would not start", addr);
    if (h->d) MHD_stop_daemon(h->d);
    close(fd);
    free(h);
    return NULL;
  }
  int rc = uv_poll_init(loop, &h->poll, ep->epoll_fd);
  if (rc == 0) {
    h->handles++;
    rc = uv_timer_init(loop, &h->timer);
  }
  if (rc == 0) {
    h->handles++;
    rc = uv_timer_init(loop, &h->sweep);
  }
  if (rc == 0) h->handles++;
  h->poll.data = h->timer.data = h->sweep.data = h;
  if (rc == 0) rc = uv_poll_start(&h->poll, UV_READABLE, on_poll);
  if (rc == 0) rc = uv_timer_start(&h->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
  if (rc != 0) {
    util_seterr(err, errlen, "--listen %s: %s", addr, uv_strerror(rc));
    httpd_stop(h);
    return NULL;
  }
  run_mhd(h);
  return h;
}

const char *httpd_address(const httpd *h) { return h->addr; }

void httpd_get_stats(const httpd *h, httpd_stats *out) {
  out->connections = h->nconns;
  out->streams = h->nstreams;
}

static void on_handle_closed(uv_handle_t *hd) {
  httpd *h = hd->data;
  if (--h->handles == 0) free(h);
}

void httpd_stop(httpd *h) {
  if (!h || h->closing) return;
  /* MHD stops only with no connection suspended: end streams, answer the rest */
  while (h->streams) {
    httpd_stream *s = h->streams;
    stream_unlink(s);
    s->r->stream = NULL;
    if (s->on_close) s->on_close(s->ud);
    if (s->waiting) resume(h, s->r->c);
    ubuf_free(&s->q);
    free(s);
  }
  while (h->parked) { /* answers that will not come now */
    static const char msg[] = "{\"error\":{\"status\":503,\"message\":\"the server is stopping\"}}\n";
    httpd_respond(h->parked, 503, "application/json", util_strdup(msg), sizeof msg - 1, NULL);
  }
  h->closing = 1;
  MHD_stop_daemon(h->d); /* closes the listening socket too */
  int n = h->handles;
  if (n == 0) {
    free(h);
    return;
  }
  if (n >= 1) uv_close((uv_handle_t *)&h->poll, on_handle_closed);
  if (n >= 2) uv_close((uv_handle_t *)&h->timer, on_handle_closed);
  if (n >= 3) uv_close((uv_handle_t *)&h->sweep, on_handle_closed);
}

int httpd_drain(httpd *h, void (*drained)(void *ud), void *ud) {
  if (!h || h->closing) return 0;
  if (!h->draining) {
    h->draining = 1;
    /* external polling: the listening socket is ours to close at once */
    MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    for (httpd_stream *s = h->streams; s; s = s->next) httpd_stream_end(s); /* what is queued is still sent */
  }
  if (!in_flight(h)) return 0;
  h->drained = drained;
  h->drained_ud = ud;
  return 1;
}

/* ----------------------------------------------------------- requests --- */

const char *httpd_method(const httpd_req *r) { return r->method; }
const char *httpd_path(const httpd_req *r) { return r->path; }
const char *httpd_header(const httpd_req *r, const char *name) {
  return MHD_lookup_connection_value(r->c, MHD_HEADER_KIND, name);
}
const char *httpd_host(const httpd_req *r) {
  return r->authority ? r->authority : httpd_header(r, MHD_HTTP_HEADER_HOST);
}
typedef struct header_walk {
  int (*cb)(void *ud, const char *name, const char *value);
  void *ud;
} header_walk;

static enum MHD_Result walk_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  header_walk *w = cls;
  return w->cb(w->ud, key, value ? value : "") ? MHD_NO : MHD_YES;
}

void httpd_each_header(const httpd_req *r, int (*cb)(void *ud, const char *name, const char *value), void *ud) {
  header_walk w = {cb, ud};
  MHD_get_connection_values(r->c, MHD_HEADER_KIND, walk_header, &w);
}
const char *httpd_query(const httpd_req *r, const char *name) {
  return MHD_lookup_connection_value(r->c, MHD_GET_ARGUMENT_KIND, name);
}
const char *httpd_body(const httpd_req *r, size_t *len) {
  *len = r->body.n;
  return r->body.p ? r->body.p : "";
}
int httpd_peer_loopback(const httpd_req *r) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return ci && ci->client_addr && is_loopback(ci->client_addr);
}

static void unpark(httpd_req *r) {
  httpd *h = r->h;
  r->suspended = 0;
  if (r->sprev) r->sprev->snext = r->snext;
  else h->parked = r->snext;
  if (r->snext) r->snext->sprev = r->sprev;
  r->sprev = r->snext = NULL;
  resume(h, r->c);
}

static void add_headers(struct MHD_Response *resp, const char *const *headers) {
  int own_cache = 0; /* the web page's files say their own (no-cache with an ETag) */
  for (size_t i = 0; headers && headers[i]; i++) own_cache |= strncasecmp(headers[i], "Cache-Control:", 14) == 0;
  if (!own_cache) MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  for (size_t i = 0; headers && headers[i]; i++) {
    const char *colon = strchr(headers[i], ':');
    if (!colon) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(colon - headers[i]), headers[i]);
    const char *v = colon + 1;
    while (*v == ' ') v++;
    MHD_add_response_header(resp, name, v);
  }
}

void httpd_respond(httpd_req *r, int status, const char *content_type, char *body, size_t len,
                   const char *const *headers) {
  if (r->answered) {
    free(body);
    return;
  }
  r->answered = 1;
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, body ? body : (char *)"",
                                                              body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (content_type) MHD_add_response_header(resp, "Content-Type", content_type);
  add_headers(resp, headers);
  r->resp = resp;
  r->status = status;
  if (r->suspended) unpark(r);
}

/* ------------------------------------------------------------ streams --- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  httpd_stream *s = cls;
  if (s->aborted) return MHD_CONTENT_READER_END_WITH_ERROR;
  if (s->off == s->q.n && s->on_drain && !s->ended) s->on_drain(s->ud); /* the writer's turn to queue more */
  if (s->aborted) return MHD_CONTENT_READER_END_WITH_ERROR;
  size_t avail = s->q.n - s->off;
  if (avail) {
    size_t n = avail < max ? avail : max;
    memcpy(buf, s->q.p + s->off, n);
    s->off += n;
    if (s->off == s->q.n) s->off = s->q.n = 0;
    else if (s->off > (64 << 10) && s->off * 2 > s->q.n) { /* keep the queue from creeping */
      memmove(s->q.p, s->q.p + s->off, s->q.n - s->off);
      s->q.n -= s->off;
      s->off = 0;
    }
    return (ssize_t)n;
  }
  if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
  /* nothing to send: park the connection until a write (no busy loop) */
  s->waiting = 1;
  MHD_suspend_connection(s->r->c);
  return 0;
}

httpd_stream *httpd_stream_open(httpd_req *r, const char *content_type, const char *const *headers,
                                void (*on_close)(void *ud), void *ud) {
  httpd *h = r->h;
  httpd_stream *s = util_xcalloc(1, sizeof *s);
  s->r = r;
  s->on_close = on_close;
  s->ud = ud;
  struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, NULL);
  MHD_add_response_header(resp, "Content-Type", content_type);
  /* the connection ends with the stream: kept alive, it would sit with no
   * idle timeout (cleared below for the stream) for as long as the client likes */
  MHD_add_response_header(resp, "Connection", "close");
  add_headers(resp, headers);
  r->stream = s;
  r->answered = 1;
  r->resp = resp;
  r->status = 200;
  s->next = h->streams;
  if (h->streams) h->streams->prev = s;
  h->streams = s;
  h->nstreams++;
  if (r->suspended) unpark(r);
  /* a stream lives as long as its client: no idle timeout (heartbeats keep
   * it honest), and never the request deadline */
  MHD_set_connection_option(r->c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
  return s;
}

size_t httpd_stream_write(httpd_stream *s, const char *buf, size_t len) {
  if (s->ended) return s->q.n - s->off;
  ubuf_add(&s->q, buf, len);
  if (s->waiting) {
    s->waiting = 0;
    resume(s->r->h, s->r->c);
  }
  return s->q.n - s->off;
}

void httpd_stream_on_drain(httpd_stream *s, void (*on_drain)(void *ud)) { s->on_drain = on_drain; }

size_t httpd_stream_queued(const httpd_stream *s) { return s->q.n - s->off; }

void httpd_stream_abort(httpd_stream *s) {
  if (s->aborted) return;
  s->aborted = s->ended = 1;
  ubuf_free(&s->q);
  s->off = 0;
  /* a client that reads nothing never makes MHD call the reader again: shut
   * the socket down so that MHD sees the end of it and closes the connection */
  if (s->r->conn && s->r->conn->fd >= 0) shutdown(s->r->conn->fd, SHUT_RDWR);
  if (s->waiting) {
    s->waiting = 0;
    resume(s->r->h, s->r->c);
  }
}

void httpd_stream_end(httpd_stream *s) {
  s->ended = 1;
  if (s->waiting) {
    s->waiting = 0;
    resume(s->r->h, s->r->c);
  }
}
