/* api_client: the HTTP API of `engine serve --listen` seen from the CLI
 * (`engine --server URL COMMAND`): blocking requests with libcurl's easy
 * interface, and a Server-Sent Events stream that reconnects with
 * Last-Event-ID after a dropped connection. Nothing here prints: failures
 * come back as one line of text. The token goes only into the Authorization
 * header, never into a message. */
#ifndef ENGINE_API_CLIENT_H
#define ENGINE_API_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct api_client api_client;

/* A client of the API at url (http:// or https://, a path prefix allowed:
 * https://host/engine), sending token (NULL: none) as a bearer token. NULL
 * with err when the URL or the token is not usable. */
api_client *api_client_new(const char *url, const char *token, char *err, size_t errlen);
void api_client_free(api_client *c);
/* The URL as given, without a trailing slash: what messages name. */
const char *api_client_url(const api_client *c);

/* s percent-encoded for a path segment or a query value (malloc'd). */
char *api_client_escape(const char *s);

typedef struct api_reply {
  long status;        /* the HTTP status; 0 when no answer came */
  char *body;         /* NUL-terminated (also after an error) */
  size_t len;
  char message[1200]; /* after a failure: the server's error message, or why there was no answer */
} api_reply;

/* METHOD path (from the base URL on, query included) with body (NULL: none;
 * sent as JSON). 0 for a 2xx answer; -1 otherwise, with r->status and
 * r->message: the server's own message for a 4xx, "cannot reach the server
 * at URL: ..." when no answer came, "the server at URL failed (HTTP N): ..."
 * for a 5xx. api_reply_free after either. */
int api_client_call(api_client *c, const char *method, const char *path, const char *body, api_reply *r);
/* The same with more request headers ("Name: value", NULL-terminated; NULL:
 * none), e.g. a start's traceparent. */
int api_client_call_h(api_client *c, const char *method, const char *path, const char *body, const char *const *headers,
                      api_reply *r);
void api_reply_free(api_reply *r);

/* ---- Server-Sent Events ---- */

typedef struct sse_event {
  const char *type; /* the frame's event: field, "message" when it had none */
  const char *data; /* its data: lines joined with \n */
  size_t len;
  const char *id; /* the last event id the stream set so far ("" for none) */
} sse_event;

/* Called for each complete frame; a positive return stops the stream. */
typedef int (*sse_fn)(void *ud, const sse_event *e);

/* The parser of the text/event-stream format (the HTML standard's rules):
 * lines end in LF, CR or CRLF (split anywhere between chunks), "field:
 * value" with one leading space dropped, data lines joined, a blank line
 * ends a frame (one without data is none), ':' starts a comment, an initial
 * BOM is dropped, id with a NUL is ignored, retry takes digits only. */
typedef struct sse_parser {
  sse_fn fn;
  void *ud;
  ubuf line, data, type;
  char *last_id;
  long retry_ms; /* the server's retry: value, -1 until one came */
  int cr;        /* the last byte was a CR: an LF right after it ends nothing */
  int started;   /* past the first bytes (where a BOM may be) */
  size_t max;    /* the longest frame accepted */
} sse_parser;

void sse_init(sse_parser *p, sse_fn fn, void *ud);
/* Feeds n bytes; returns 0, the callback's positive value (it stopped the
 * stream), or -1 when a frame is longer than p->max. */
int sse_feed(sse_parser *p, const char *buf, size_t n);
/* Forgets a partly received frame (a new connection starts afresh); keeps
 * the last event id and the retry value. */
void sse_reset(sse_parser *p);
void sse_free(sse_parser *p);

typedef struct api_stream {
  sse_fn on_event; /* each frame; a positive return ends api_client_stream with 1 */
  int (*on_idle)(void *ud); /* about once a second; a positive return ends it with 2 (NULL: none) */
  void *ud;
  const char *last_id; /* resume after this event id (NULL: from the start of what path asks) */
  int retries;         /* reconnections tried after a drop before giving up (0: the default, 6) */
} api_stream;

/* Streams GET path with Accept: text/event-stream. A connection that drops
 * (or a 5xx, or no answer) after the stream was open is tried again with
 * Last-Event-ID and a growing pause (0.25 s doubling up to 8 s); a stream
 * that stayed open for a while counts as a fresh start. Returns 1 or 2 when a
 * callback stopped it, -1 with r filled: the first request failed (as
 * api_client_call says), a 4xx on a reconnection, or every retry failed. */
int api_client_stream(api_client *c, const char *path, const api_stream *o, api_reply *r);

#endif
