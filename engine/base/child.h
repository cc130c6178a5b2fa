/* child: the one way the engine starts a child process.
 *
 * A child starts with only the descriptors it is given (0-2, and optionally
 * fd 3 holding data such as a seccomp program): everything else the engine
 * holds -- the Docker socket, model API connections, the database -- is closed
 * in the child before exec (close_range via posix_spawn), whether or not it
 * was opened close-on-exec. Signal dispositions and the mask are reset, so a
 * child never inherits the engine's ignored SIGPIPE. */
#ifndef ENGINE_CHILD_H
#define ENGINE_CHILD_H

#include <lua.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct child_opts {
  char *const *argv;  /* argv[0] without a '/' is looked up in envp's PATH */
  char *const *envp;  /* NULL: the engine's own environment */
  const char *cwd;    /* NULL: the engine's */
  int fd[3];          /* the child's 0, 1, 2: a descriptor of ours, or -1 for /dev/null */
  const char *fd3;    /* when set, fd3_len bytes readable on the child's fd 3 */
  size_t fd3_len;
  int new_session;    /* setsid: a session and process group of its own */
} child_opts;

/* Starts the child; 0 and *pid, or an errno value. */
int child_spawn(const child_opts *o, pid_t *pid);

/* Marks every descriptor above 2 close-on-exec: those the engine inherited
 * from its parent, and those a library opened without O_CLOEXEC (libcurl's
 * wake-up socketpair). Always safe: child_spawn passes what a child needs by
 * dup2, which makes a new descriptor without the flag. */
void child_cloexec_all(void);

/* Replaces os.execute and io.popen of a Lua state with versions built on
 * child_spawn, and makes io.open/io.lines/io.tmpfile files close-on-exec. */
void child_harden_lua(lua_State *L);

#endif
