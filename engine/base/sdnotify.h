/* sdnotify: systemd's notify protocol (sd_notify(3)), spoken without
 * libsystemd. A service of Type=notify finds the manager's socket in
 * NOTIFY_SOCKET (a path, or an abstract socket when it starts with '@') and
 * sends it one datagram of newline-separated KEY=VALUE assignments:
 * READY=1, RELOADING=1 with MONOTONIC_USEC=, STOPPING=1, STATUS=text,
 * WATCHDOG=1. Outside systemd (no NOTIFY_SOCKET) every call does nothing. */
#ifndef ENGINE_SDNOTIFY_H
#define ENGINE_SDNOTIFY_H

#include <stdint.h>

/* Takes NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment
 * and removes them from it, so that the processes the engine starts do not
 * speak for it. Call once at start-up, before any thread; the first call
 * of sdnotify or sdnotify_watchdog_usec does it otherwise. Returns 1 when
 * there is a socket to notify. */
int sdnotify_init(void);

/* Sends state ("READY=1\nSTATUS=serving"): 1 sent, 0 no socket (not under
 * a service manager, or an address family this does not speak), -1 the
 * send failed (errno). */
int sdnotify(const char *state);

/* The watchdog's period in microseconds when the manager asks for pings
 * (WATCHDOG_USEC, and WATCHDOG_PID absent or this process), else 0. Ping
 * with sdnotify("WATCHDOG=1") about every half of it. */
uint64_t sdnotify_watchdog_usec(void);

/* CLOCK_MONOTONIC in microseconds, for MONOTONIC_USEC= beside RELOADING=1. */
uint64_t sdnotify_monotonic_usec(void);

#endif
