/* main: the `engine` binary. Everything lives in cli.c and the core library. */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "child.h"
#include "cli.h"

int main(int argc, char **argv) {
  /* 0-2 always open: a descriptor the engine opens later must never land on
   * them, where a child would inherit it as its stdin, stdout or stderr */
  for (int fd = 0; fd < 3; fd++)
    if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd) return 2;
  child_cloexec_all(); /* what our parent left open is not for our children */
  signal(SIGPIPE, SIG_IGN); /* `engine events | head` must not kill a half-written line */
  return cli_main(argc, argv);
}
