/* httpd: the engine's HTTP server on its libuv loop (see httpd.c for why
 * libmicrohttpd). It owns the connection limits and hands each complete
 * request (headers and a bounded body) to one handler, which answers at once
 * or later (httpd_respond), or turns the response into a stream of bytes
 * (httpd_stream_*) for Server-Sent Events. Everything runs on the loop's
 * thread. */
#ifndef ENGINE_HTTPD_H
#define ENGINE_HTTPD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct httpd httpd;
typedef struct httpd_req httpd_req;
typedef struct httpd_stream httpd_stream;

typedef struct httpd_limits {
  size_t max_body;            /* 413 beyond it (default 1 MiB) */
  size_t max_hook_body;       /* the same for /hooks/... (default 25 MiB, GitHub's cap on a payload) */
  size_t max_header;          /* request line and headers, 431 beyond it (default 16 KiB) */
  unsigned max_connections;   /* 503 beyond it (default 1024) */
  unsigned idle_timeout_s;    /* a connection silent this long is closed (default 30) */
  unsigned request_timeout_s; /* a request must arrive whole within this (default 30): slow clients */
} httpd_limits;

/* The defaults, overridden by ENGINE_HTTP_MAX_BODY_BYTES, ..._MAX_HOOK_BODY_BYTES, ..._MAX_HEADER_BYTES,
 * ..._MAX_CONNECTIONS, ..._IDLE_TIMEOUT_S, ..._REQUEST_TIMEOUT_S. Returns 0,
 * or -1 with err naming a variable whose value is not a number in range. */
int httpd_limits_default(httpd_limits *l, char *err, size_t errlen);

typedef void (*httpd_handler)(void *ud, httpd_req *r);

/* Listens on addr ("127.0.0.1:7420", "[::1]:0", "0.0.0.0:7420"; port 0
 * picks one). *loopback tells whether addr is a loopback address; the caller
 * decides what that allows. NULL with err when addr is bad or taken. */
httpd *httpd_start(uv_loop_t *loop, const char *addr, const httpd_limits *lim, httpd_handler handler, void *ud,
                   int *loopback, char *err, size_t errlen);
/* The address really bound, "127.0.0.1:41234". */
const char *httpd_address(const httpd *h);
/* Ends every stream and closes the server; run the loop afterwards. */
void httpd_stop(httpd *h);
/* The start of a graceful stop: the listening socket closes (a new
 * connection is refused), a new request on an open connection gets 503
 * and the connection closes, streams end, and the requests in flight go on
 * to their answers. Returns 0 when none is in flight, else 1, and
 * drained(ud) runs on the loop once the last one has been answered. */
int httpd_drain(httpd *h, void (*drained)(void *ud), void *ud);

typedef struct httpd_stats {
  unsigned connections, streams;
} httpd_stats;
void httpd_get_stats(const httpd *h, httpd_stats *out);

/* ---- a request (valid until it is answered) ---- */
const char *httpd_method(const httpd_req *r);
/* The path as sent (still percent-encoded; without the query); of an
 * absolute-form target ("http://host/path") its path. */
const char *httpd_path(const httpd_req *r);
/* A request header (case-insensitive name), or NULL. */
const char *httpd_header(const httpd_req *r, const char *name);
/* Whom the request is for: an absolute-form target's authority, else Host
 * (NULL only for HTTP/1.0 without one: HTTP/1.1 without Host is refused). */
const char *httpd_host(const httpd_req *r);
/* A query parameter, still percent-encoded, or NULL. */
const char *httpd_query(const httpd_req *r, const char *name);
const char *httpd_body(const httpd_req *r, size_t *len);
/* Calls cb for each request header in the order received (names as sent);
 * stops when cb returns nonzero. */
void httpd_each_header(const httpd_req *r, int (*cb)(void *ud, const char *name, const char *value), void *ud);
/* Whether the peer is on a loopback address. */
int httpd_peer_loopback(const httpd_req *r);

/* Answers r with status, content type and body (taken: freed by httpd), plus
 * extra "Name: value" headers (NULL-terminated list, may be NULL). Call it
 * once, from the handler or any time later on the loop's thread. */
void httpd_respond(httpd_req *r, int status, const char *content_type, char *body, size_t len,
                   const char *const *headers);

/* ---- streams: a 200 response whose body is written as it comes ---- */
/* Turns r into a stream; on_close(ud) runs once when the client goes or the
 * stream ends, after which the stream must not be used. */
httpd_stream *httpd_stream_open(httpd_req *r, const char *content_type, const char *const *headers,
                                void (*on_close)(void *ud), void *ud);
/* Queues bytes; returns the bytes queued and not yet sent. */
size_t httpd_stream_write(httpd_stream *s, const char *buf, size_t len);
/* The bytes queued and not yet sent. */
size_t httpd_stream_queued(const httpd_stream *s);
/* on_drain(ud) runs (on the loop's thread) whenever the client has taken
 * everything queued: a writer can queue a large backlog a part at a time. */
void httpd_stream_on_drain(httpd_stream *s, void (*on_drain)(void *ud));
/* Sends what is queued, then ends the response (on_close follows). */
void httpd_stream_end(httpd_stream *s);
/* Drops what is queued and closes the connection now (on_close follows):
 * for a client too slow to be waited for. */
void httpd_stream_abort(httpd_stream *s);

#endif
