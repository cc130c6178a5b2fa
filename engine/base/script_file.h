/* script_file: reading a workflow script from disk. */
#ifndef ENGINE_SCRIPT_FILE_H
#define ENGINE_SCRIPT_FILE_H

#include <stddef.h>

/* Reads a workflow script: a regular file only (a FIFO, a device or a
 * directory is refused by name, never read). Returns the malloc'd source
 * (NUL-terminated, *len without it), or NULL with err. */
char *engine_read_script(const char *path, size_t *len, char *err, size_t errlen);

#endif
