/* http: asynchronous HTTP client. libcurl's multi interface driven by the
 * libuv loop (curl_multi_socket_action with a uv_poll per socket and one uv
 * timer), so thousands of requests in flight cost no threads.
 *
 * Pull model: the caller is told (on_event) that something happened -- headers
 * arrived, body bytes were buffered, the transfer ended -- and reads the state
 * with the accessors. on_event is never called from inside a curl callback, so
 * it may start or cancel other requests. */
#ifndef ENGINE_HTTP_H
#define ENGINE_HTTP_H

#include <stddef.h>
#include <uv.h>

typedef struct http_ctx http_ctx;
typedef struct http_call http_call;

typedef struct http_req {
  const char *method;      /* default GET, or POST when a body is given */
  const char *url;
  const char *unix_socket; /* talk HTTP over this unix socket (the Docker engine) */
  const char *const *headers; /* "Name: value" lines */
  size_t nheaders;
  const char *body;
  size_t body_len;
  long connect_timeout_ms; /* 0: 10 s */
  long timeout_ms;         /* 0: none */
  long idle_timeout_ms;    /* no byte received for this long: abort; 0: none */
  size_t max_bytes;        /* response body cap; 0: 64 MiB */
  size_t window;           /* unread body bytes held at most (more pauses the transfer until
                              http_resume); 0: no bound, for calls read only at the end */
} http_req;

enum http_err {
  HTTP_OK = 0,
  HTTP_ECONNECT,  /* could not connect / resolve / TLS */
  HTTP_ETIMEOUT,  /* total or connect timeout */
  HTTP_EIDLE,     /* idle timeout */
  HTTP_ETOOLARGE, /* body over max_bytes */
  HTTP_ETRANSFER, /* connection broke mid-response */
  HTTP_ECANCEL
};

/* NULL with err set when libcurl or a libuv handle cannot be started. */
http_ctx *http_new(uv_loop_t *loop, char *err, size_t errlen);
/* Cancels every transfer still running (without events) and frees the context
 * once its handles are closed (run the loop afterwards). */
void http_free(http_ctx *h);

/* Starts a request. on_event(ud) fires whenever its state changes. The call
 * stays valid until http_release() (after done, or to cancel). */
http_call *http_start(http_ctx *h, const http_req *req, void (*on_event)(void *ud), void *ud, char *err,
                      size_t errlen);
/* Stops the transfer if running (no more events) and frees the call. */
void http_release(http_call *c);

int http_headers_done(const http_call *c);
long http_status(const http_call *c);
size_t http_header_count(const http_call *c);
void http_header_at(const http_call *c, size_t i, const char **name, const char **value);
/* Body bytes buffered since the last take; the caller must copy them before
 * the next event or http_resume(). */
const char *http_take(http_call *c, size_t *len);
/* After a take: a transfer paused for a full window goes on. Call it outside
 * curl callbacks (on_event is); it may buffer more bytes before it returns.
 * Holding the window bounds what a stream costs when its reader is slow. */
void http_resume(http_call *c);
size_t http_buffered(const http_call *c);
/* 1 when the transfer ended; then http_error() tells how. */
int http_done(const http_call *c);
int http_error(const http_call *c, const char **message);

#endif
