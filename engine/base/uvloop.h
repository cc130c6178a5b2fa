/* uvloop: small helpers for a libuv loop that every layer may use. */
#ifndef ENGINE_UVLOOP_H
#define ENGINE_UVLOOP_H

#include <uv.h>

/* A uv_close callback for a handle allocated on its own (malloc'd). */
void uvloop_free_handle(uv_handle_t *h);
/* Closes every handle of loop and runs it until it can be closed. */
void uvloop_drain(uv_loop_t *loop);

#endif
