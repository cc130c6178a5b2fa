/* uvloop: closing a loop and freeing its handles. */
#include "uvloop.h"

#include <stdlib.h>

void uvloop_free_handle(uv_handle_t *h) { free(h); }

static void walk_close(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Handles may be embedded in their owners: close them all, then drain the
 * loop; a pending uv_stop makes the first uv_run return at once, hence the
 * repetition. */
void uvloop_drain(uv_loop_t *loop) {
  uv_walk(loop, walk_close, NULL);
  do {
    uv_run(loop, UV_RUN_NOWAIT);
  } while (uv_loop_close(loop) == UV_EBUSY);
}
