/* modules: where a workflow's require()d modules come from. A module is found
 * beside the workflow's script, then in the engine's Lua library; the first
 * time a run requires it, its source is stored by content hash and pinned to
 * the run, so a replay loads the exact code the run started with. */
#ifndef ENGINE_MODULES_H
#define ENGINE_MODULES_H

#include <stddef.h>

#include "store.h"

#define MODULES_READ_PINS 2

typedef struct modhost {
  store *st;
  const char *wf_id;
  int64_t run;
  const char *script_dir;
  const char *lua_dir;
  int pin; /* 0: a check against the code on disk, nothing read from or written to the store;
            * MODULES_READ_PINS: the run's pinned code where it has some, the disk's
            * elsewhere, nothing written (a fork's check: ops/fork.c) */
} modhost;

/* The source of module name for m (malloc'd, *len bytes, *chunkname malloc'd
 * for error messages), or NULL with err: not found, not a regular file, or
 * pinned code missing. Fits wfvm_host.load_module with ud = the modhost. */
char *modules_load(void *m, const char *name, size_t *len, char **chunkname, char *err, size_t errlen);

#endif
