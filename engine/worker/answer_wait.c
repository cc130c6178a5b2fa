/* answer_wait: the answer of a store's request on its way (a commit of
 * store_commit_start, a dispatch's read), heard on the loop. The store's
 * socket is polled (writable too while the request is not all sent), what
 * arrives is read without waiting (store_commit_poll), and done is called
 * once with the answer. The worker's commit, the start lane's commits and
 * the dispatch's reads wait this one way. */
#include "worker.h"

#include <stdlib.h>

struct answer_wait {
  uv_poll_t poll; /* first: the handle's memory is the whole */
  store *st;
  void (*done)(void *ud, int rc);
  void *ud;
};

static void on_io(uv_poll_t *h, int status, int events);

static void arm(answer_wait *w) {
  int writable;
  store_commit_socket(w->st, &writable);
  uv_poll_start(&w->poll, UV_READABLE | (writable ? UV_WRITABLE : 0), on_io);
}

static void on_io(uv_poll_t *h, int status, int events) {
  (void)events;
  answer_wait *w = (answer_wait *)h;
  int rc = status < 0 ? store_commit_wait(w->st) : store_commit_poll(w->st);
  if (rc == STORE_PENDING) {
    arm(w);
    return;
  }
  void (*done)(void *, int) = w->done;
  void *ud = w->ud;
  answer_wait_end(w); /* before done: it may send the next request */
  done(ud, rc);
}

answer_wait *answer_wait_start(uv_loop_t *loop, store *st, void (*done)(void *ud, int rc), void *ud) {
  int writable, fd = store_commit_socket(st, &writable);
  answer_wait *w = util_xcalloc(1, sizeof *w);
  if (fd < 0 || uv_poll_init_socket(loop, &w->poll, fd) != 0) {
    free(w);
    return NULL;
  }
  w->st = st;
  w->done = done;
  w->ud = ud;
  arm(w);
  return w;
}

void answer_wait_end(answer_wait *w) {
  if (w) uv_close((uv_handle_t *)&w->poll, uvloop_free_handle);
}
