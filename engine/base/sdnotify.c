/* sdnotify: see sdnotify.h. Written from the protocol's documentation
 * (sd_notify(3), systemd.service(5)); no code of libsystemd. */
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int taken;               /* the environment was read */
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
static uint64_t watchdog_usec;

/* A whole decimal number, or 0. */
static uint64_t parse_u64(const char *s) {
  if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 19) return 0;
  return strtoull(s, NULL, 10);
}

int sdnotify_init(void) {
  if (taken) return *sock_path != 0;
  taken = 1;
  const char *s = getenv("NOTIFY_SOCKET");
  /* a path or an abstract name; anything else (vsock:, too long) is not spoken here */
  if (s && (*s == '/' || *s == '@') && strlen(s) < sizeof sock_path - 1) strcpy(sock_path, s);
  uint64_t usec = parse_u64(getenv("WATCHDOG_USEC"));
  const char *pid = getenv("WATCHDOG_PID");
  if (pid && *pid && parse_u64(pid) != (uint64_t)getpid()) usec = 0; /* the pings are another process's */
  watchdog_usec = usec;
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  return *sock_path != 0;
}

int sdnotify(const char *state) {
  if (!sdnotify_init()) return 0;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  size_t n = strlen(sock_path);
  memcpy(sa.sun_path, sock_path, n);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = 0; /* abstract: the name is exactly its n bytes */
  else len++;                                    /* a path: with its NUL */
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ssize_t sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
  int saved = errno;
  close(fd);
  errno = saved;
  return sent == (ssize_t)strlen(state) ? 1 : -1;
}

uint64_t sdnotify_watchdog_usec(void) {
  sdnotify_init();
  return watchdog_usec;
}

uint64_t sdnotify_monotonic_usec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
