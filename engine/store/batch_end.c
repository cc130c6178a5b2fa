/* batch_end: what a store keeps of its batches beyond the backend's own
 * state, told when a batch ends (store_batch_ended, called by the backends
 * at their commit and rollback): the chain heads a batch moved (chain.c),
 * and the scripts' code it put. Code rows are never deleted, so code this
 * store has committed is not put again (a statement per start on
 * PostgreSQL); code of a batch that was rolled back is forgotten with it.
 * It calls no backend, so the backends and store.c do not loop. */
#include "backend.h"

void store_batch_ended(store *s, int committed) {
  if (committed) {
    chain_committed(s);
    for (size_t i = 0; i < s->code_open.cap; i++)
      if (STRMAP_LIVE(&s->code_open, i)) strmap_put(&s->code_known, s->code_open.keys[i], (void *)1);
  } else {
    chain_rolled_back(s);
  }
  strmap_free(&s->code_open);
  strmap_init(&s->code_open);
}

int code_cache_has(store *s, const char *hash) {
  return strmap_get(&s->code_known, hash) || strmap_get(&s->code_open, hash);
}

void code_cache_put(store *s, const char *hash) { strmap_put(&s->code_open, hash, (void *)1); }

void code_cache_free(store *s) {
  strmap_free(&s->code_known);
  strmap_free(&s->code_open);
}
