/* script_file: a workflow script read from disk, and the Lua library's place. */
#include "script_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Scripts are regular files: opened without blocking, so a FIFO in their place
 * is refused instead of hanging the read, and a directory is named as one. */
char *engine_read_script(const char *path, size_t *len, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return NULL;
  }
  if (!S_ISREG(sb.st_mode)) {
    util_seterr(err, errlen, "workflow script %s is %s, not a file", path, util_file_kind(sb.st_mode));
    close(fd);
    return NULL;
  }
  ubuf b = {0};
  int e = util_read_fd(fd, 0, &b);
  close(fd);
  if (e) {
    util_seterr(err, errlen, "cannot read workflow script %s: %s", path, strerror(e));
    ubuf_free(&b);
    return NULL;
  }
  ubuf_add(&b, "", 1); /* NUL-terminated for the callers that print it */
  *len = b.n - 1;
  return b.p;
}
