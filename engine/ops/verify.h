/* verify: what `engine verify` checks of a workflow, with only the database
 * and the artifacts' files: its two hash chains through every run
 * (store_verify_chains), and that each artifact its session saved
 * (artifact.saved: {path, sha256, size, stored}) is still stored with the
 * content its hash names. */
#ifndef ENGINE_VERIFY_H
#define ENGINE_VERIFY_H

#include <stdint.h>

#include "store.h"

typedef struct verify_row {
  int ok;
  int64_t events;    /* history and domain events whose link was checked */
  int64_t unchained; /* events older than the chain (before the upgrade): not checked */
  int artifacts;     /* artifacts whose content hash was checked */
  char problem[700]; /* when not ok: the first problem found, naming its seq or file */
} verify_row;

/* Checks workflow id: 1 with *out (ok, or its problem), 0 no such workflow,
 * -1 when the database could not be read (err). The artifacts are checked
 * only when the chains are whole (their list is in the domain events). */
int verify_workflow(store *st, const char *id, verify_row *out, char *err, size_t errlen);

#endif
