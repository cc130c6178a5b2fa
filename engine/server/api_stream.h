/* api_stream: the HTTP API's live event streams (see api_stream.c). */
#ifndef ENGINE_API_STREAM_H
#define ENGINE_API_STREAM_H

#include <stdint.h>
#include <uv.h>

#include "httpd.h"
#include "store.h"

typedef struct streams streams;

/* The streams read committed events from rd (a read-only connection the
 * caller keeps open); heartbeats every ENGINE_SSE_HEARTBEAT_MS (15 s). */
streams *streams_new(uv_loop_t *loop, store *rd);
/* Before the streams' httpd is stopped (it ends the streams); frees once the
 * heartbeat timer is closed (run the loop). */
void streams_free(streams *s);

/* Turns r into an event stream of session (NULL: every session) from after
 * (a seq, or a feed position); finished: the workflow's terminal status when
 * it has ended (the backlog, then the end), else NULL. */
void streams_open(streams *s, httpd_req *r, const char *session, int64_t after, const char *finished);
/* After each commit: its events to the subscribers, then the end of the
 * streams of sessions that finished in it. */
void streams_committed(streams *s);
/* Session id reached terminal status (told before its commit's events). */
void streams_finished(streams *s, const char *id, const char *status);
/* An ephemeral event of a running activity of workflow wf_id (agent.delta). */
void streams_live(streams *s, const char *wf_id, const char *type, const char *json);

#endif
