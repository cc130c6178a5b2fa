/* modules: finding a workflow's modules on disk and pinning them (modules.h). */
#include "modules.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "script_file.h"
#include "util.h"

/* Finds a module's source on disk: beside the script, then in the Lua
 * library. Returns NULL with err empty when no place has it; a place that
 * has something else than a file (a FIFO that would hang the read, a
 * directory) is an error naming it, not a miss. */
static char *find_module(const char *script_dir, const char *lua_dir, const char *name, size_t *len, char **path,
                         char *err, size_t errlen) {
  char rel[512];
  snprintf(rel, sizeof rel, "%s", name);
  for (char *p = rel; *p; p++)
    if (*p == '.') *p = '/';
  const char *dirs[] = {script_dir, script_dir, lua_dir, lua_dir};
  const char *fmts[] = {"%s/%s.lua", "%s/%s/init.lua", "%s/%s.lua", "%s/%s/init.lua"};
  *err = 0;
  for (int i = 0; i < 4; i++) {
    if (!dirs[i]) continue;
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, fmts[i], dirs[i], rel);
    struct stat sb;
    if (stat(buf, &sb) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) continue;
      util_seterr(err, errlen, "cannot read %s: %s", buf, strerror(errno));
      return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
      util_seterr(err, errlen, "%s is %s, not a file", buf, util_file_kind(sb.st_mode));
      return NULL;
    }
    char *src = engine_read_script(buf, len, err, errlen); /* non-blocking: a FIFO swapped in is refused too */
    if (!src) return NULL;
    *path = util_strdup(buf);
    return src;
  }
  return NULL;
}

/* A run's modules are pinned by content hash the first time it requires them. */
char *modules_load(void *ud, const char *name, size_t *len, char **chunkname, char *err, size_t errlen) {
  modhost *m = ud;
  if (m->pin) {
    char *hash = store_module_get(m->st, m->wf_id, m->run, name);
    if (hash) {
      char *src = store_code_get(m->st, hash, len);
      *chunkname = util_fmt("@%s.lua", name);
      free(hash);
      if (src) return src;
      util_seterr(err, errlen, "pinned code for module is missing from the store");
      return NULL;
    }
  }
  char *path = NULL;
  char *src = find_module(m->script_dir, m->lua_dir, name, len, &path, err, errlen);
  if (!src) {
    if (!*err)
      util_seterr(err, errlen, "module not found beside the workflow (%s) or in %s", m->script_dir, m->lua_dir);
    return NULL;
  }
  if (m->pin == 1) {
    char hash[65];
    util_sha256_hex(src, *len, hash);
    if (store_code_put(m->st, hash, name, src, *len) != STORE_OK ||
        store_module_pin(m->st, m->wf_id, m->run, name, hash) != STORE_OK) {
      util_seterr(err, errlen, "cannot pin module: %s", store_errmsg(m->st));
      free(src);
      free(path);
      return NULL;
    }
  }
  *chunkname = util_fmt("@%s", path);
  free(path);
  return src;
}
