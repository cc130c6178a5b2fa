#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *tu_mkdtemp(void) {
  const char *base = getenv("TMPDIR");
  char *tmpl = NULL;
  if (asprintf(&tmpl, "%s/engine-unit.XXXXXX", base && *base ? base : "/tmp") < 0) return NULL;
  if (!mkdtemp(tmpl)) {
    free(tmpl);
    return NULL;
  }
  return tmpl;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void tu_rmtree(char *dir) {
  if (!dir) return;
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  free(dir);
}

char *tu_path(const char *dir, const char *name) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", dir, name) < 0) return NULL;
  return p;
}

int tu_write_file(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(buf, 1, len, f);
  return (fclose(f) == 0 && w == len) ? 0 : -1;
}

int tu_exists(const char *path) { return access(path, F_OK) == 0; }
