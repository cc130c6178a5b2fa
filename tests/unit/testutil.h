/* Helpers shared by the unit tests: temporary directories and file bytes. */
#ifndef ENGINE_TEST_UTIL_H
#define ENGINE_TEST_UTIL_H

#include <stddef.h>

/* Creates a fresh directory under $TMPDIR (or /tmp); returns a malloc'd path. */
char *tu_mkdtemp(void);
/* Removes a directory tree made by tu_mkdtemp and frees the path. */
void tu_rmtree(char *dir);
/* path = dir + "/" + name, malloc'd. */
char *tu_path(const char *dir, const char *name);
/* Writes len bytes to path (replacing it); returns 0 on success. */
int tu_write_file(const char *path, const void *buf, size_t len);
/* Returns 1 when the file exists. */
int tu_exists(const char *path);

#endif
