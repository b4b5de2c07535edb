/* The stopped-releasing fault: the rooted algorithms over a transport end
 * with a release (the root's, or the ring broadcast's last rank's), a
 * zero-byte message to every other rank, sent only once every rank's part
 * is in. In the calls the suite makes, every frame the releaser sends
 * before it carries data: so the first frame of the call that is a 56-byte
 * header alone (transports/tcp/wire.hpp, FrameHeader) is its first
 * release, and stopping right after it leaves one rank released and the
 * others waiting.
 *
 * The TCP transport writes its frames with sendmsg; this one, defined in
 * the executable, comes first in the lookup of libchorus.so's sendmsg and
 * passes every call on to libc's. */
#ifndef _GNU_SOURCE /* the build may define it for every file */
#define _GNU_SOURCE /* RTLD_NEXT */
#endif
#include "release_stop.h"

#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

enum { FRAME_HEADER_BYTES = 56 };

static int armed; /* __atomic: the transport's progress thread sends too */
static int stopped;

void stop_at_first_release(void) {
  __atomic_store_n(&armed, 1, __ATOMIC_SEQ_CST);
}

int stopped_at_release(void) {
  return __atomic_load_n(&stopped, __ATOMIC_SEQ_CST);
}

typedef ssize_t (*sendmsg_fn)(int, const struct msghdr*, int);

ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  static sendmsg_fn libc_sendmsg;
  sendmsg_fn send_it = __atomic_load_n(&libc_sendmsg, __ATOMIC_ACQUIRE);
  if (!send_it) {
    void* found = dlsym(RTLD_NEXT, "sendmsg");
    memcpy(&send_it, &found, sizeof send_it); /* ISO C has no object-to-function cast */
    __atomic_store_n(&libc_sendmsg, send_it, __ATOMIC_RELEASE);
  }
  const ssize_t sent = send_it(fd, msg, flags);
  if (sent == FRAME_HEADER_BYTES && __atomic_exchange_n(&armed, 0, __ATOMIC_SEQ_CST)) {
    __atomic_store_n(&stopped, 1, __ATOMIC_SEQ_CST);
    raise(SIGSTOP);
  }
  return sent;
}
