/* main: the `engine` binary. Everything lives in cli.c and the core library. */
#include <signal.h>

#include "cli.h"

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN); /* `engine events | head` must not kill a half-written line */
  return cli_main(argc, argv);
}
