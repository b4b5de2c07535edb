/* A fault-suite rank's own sockets (fault_rank.c): its connections to its
 * peers, found as the process's connected IPv4 TCP sockets but the one to
 * the store (CHORUS_STORE_ADDR), which with the tcp and shm transports are
 * exactly those; its listener; and what the wrong-token, malformed-frame
 * and truncated faults write into them. */
#define _POSIX_C_SOURCE 200809L
#include "sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int store_port(void) {
  const char* addr = getenv("CHORUS_STORE_ADDR");
  const char* colon = addr ? strrchr(addr, ':') : NULL;
  return colon ? atoi(colon + 1) : -1;
}

/* The TCP port of socket fd (its own end, or the peer's), -1 if it is not a
 * stream IPv4 socket in that state. */
static int tcp_port(int fd, int peer_end) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return -1;
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return -1;
  struct sockaddr_in a;
  len = sizeof a;
  int rc = peer_end ? getpeername(fd, (struct sockaddr*)&a, &len)
                    : getsockname(fd, (struct sockaddr*)&a, &len);
  if (rc != 0 || a.sin_family != AF_INET) return -1;
  return ntohs(a.sin_port);
}

/* Up to max of this process's connections to its peers (see the top). */
int peer_sockets(int* fds, int max) {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  const int dir_fd = dirfd(dir);
  for (struct dirent* e = readdir(dir); e && n < max; e = readdir(dir)) {
    const int fd = atoi(e->d_name);
    if (e->d_name[0] == '.' || fd == dir_fd) continue;
    const int port = tcp_port(fd, 1);
    if (port > 0 && port != store_port()) fds[n++] = fd;
  }
  closedir(dir);
  return n;
}

/* This process's listening TCP port (its transport's), or -1. */
static int own_listener(void) {
  int port = -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  for (struct dirent* e = readdir(dir); e && port < 0; e = readdir(dir)) {
    const int fd = atoi(e->d_name);
    int listening = 0;
    socklen_t len = sizeof listening;
    if (e->d_name[0] == '.' || fd == dirfd(dir)) continue;
    const int own = tcp_port(fd, 0);
    if (own > 0 && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening)
      port = own;
  }
  closedir(dir);
  return port;
}

static void put_u32(unsigned char* at, uint32_t v) {
  memcpy(at, &v, sizeof v);
}

/* Connects to 127.0.0.1:port, sends what, and reports whether the other end
 * closed the connection (after any reply) within 3 s: a refused stranger. */
static int refused_as_stranger(int port, const unsigned char* what, size_t size) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct timeval tv = {3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int refused = 0;
  if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0 && write(fd, what, size) == (ssize_t)size) {
    unsigned char buf[256];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
    }
    refused = n == 0; /* EOF: closed on us (a timeout is -1) */
  }
  close(fd);
  return refused;
}

/* The store's AUTH frame and the transport's Hello, with another job's token. */
void intrude(int rank, int size) {
  const char token[] = "another-jobs-token";
  unsigned char auth[32 + sizeof token - 1];
  memset(auth, 0, sizeof auth);
  put_u32(auth, 0x54534843u);           /* "CHST" */
  auth[4] = 1;                          /* version */
  auth[6] = 1;                          /* op: AUTH */
  put_u32(auth + 16, sizeof token - 1); /* value_len */
  memcpy(auth + 32, token, sizeof token - 1);
  printf("refused store %d %d\n", rank, refused_as_stranger(store_port(), auth, sizeof auth));
  unsigned char hello[88];
  memset(hello, 0, sizeof hello);
  put_u32(hello, 0x48524843u); /* "CHRH" */
  hello[4] = 1;                /* version */
  const int32_t from = (rank + 1) % size, to = rank, world = size;
  memcpy(hello + 8, &from, 4);
  memcpy(hello + 12, &to, 4);
  memcpy(hello + 16, &world, 4);
  memcpy(hello + 24, token, sizeof token - 1);
  printf("refused hello %d %d\n", rank, refused_as_stranger(own_listener(), hello, sizeof hello));
  fflush(stdout);
}

void corrupt_connections(int truncate) {
  int fds[64];
  const int n = peer_sockets(fds, 64);
  unsigned char bytes[56];
  memset(bytes, 0xab, sizeof bytes);
  if (truncate) put_u32(bytes, 0x53524843u); /* "CHRS": a real frame's start */
  for (int i = 0; i < n; ++i) {
    if (write(fds[i], bytes, truncate ? 20 : sizeof bytes) < 0) perror("write");
    if (truncate) shutdown(fds[i], SHUT_RDWR);
  }
}
