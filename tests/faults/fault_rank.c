/* One rank of a fault-suite job, a plain C program against <chorus.h> run by
 * chorusrun, as a user's program would be.
 *
 *   fault_rank FAULT VICTIM COUNT FORM
 *
 * Every rank initialises, takes part in one checked warm-up allreduce and a
 * barrier, and then at once makes the call under test (a fault may overtake a
 * peer still finishing the barrier, which must then finish it all the same), an allreduce of COUNT
 * floats (sum) unless the fault says otherwise; FORM is "blocking" or "nonblocking" (iallreduce +
 * wait). Rank VICTIM (the faulty one) does instead:
 *
 *   none         the same call (a control: every rank must succeed)
 *   killed       SIGKILLs itself
 *   exited       exits (_exit, status 0) without destroying its communicator
 *   destroyed    destroys its communicator
 *   aborted      calls chorus_comm_abort
 *   stalled      sleeps for twice CHORUS_TIMEOUT, then makes the call
 *   early-timeout  makes the call at once with a 300 ms deadline, while the
 *                others make it 1 s later with the default deadline (always
 *                blocking: a non-blocking call's deadline is CHORUS_TIMEOUT,
 *                and a wait that times out leaves the call running)
 *   kind         calls broadcast (root 0) instead of allreduce
 *   count        passes COUNT + 1 elements
 *   dtype        passes int32 (the same size as float32)
 *   op           passes max instead of sum
 *   root         (every rank) a broadcast whose root is the caller itself
 *   bad-argument passes a null send buffer (a local argument error)
 *   allgather-in-place  (every rank) an allgather with sendbuf == recvbuf
 *
 * Each rank prints, on stdout, at the moment it learns the call's outcome:
 *   verdict RANK CODE T_MS :: MESSAGE
 * where T_MS is CLOCK_REALTIME in ms, and the victim prints "fault RANK T_MS"
 * when it commits its fault (the stalled and early-timeout faults print when
 * the others start their call instead). A successful call's result is checked
 * in full; a wrong result prints "WRONG". The rank then destroys its
 * communicator and exits 0. SIGTERM is ignored so that chorusrun's stop
 * cannot cut a rank short before it reports (chorusrun escalates to SIGKILL).
 */
#define _POSIX_C_SOURCE 200809L
#include <chorus.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void say(const char* format, int rank, long long t) {
  printf(format, rank, t);
  fflush(stdout);
}

static int verdict(chorus_comm_t comm, int rank, chorus_result_t rc) {
  printf("verdict %d %d %lld :: %s\n", rank, (int)rc, now_ms(),
         rc == CHORUS_SUCCESS ? "" : chorus_comm_last_error(comm));
  fflush(stdout);
  return rc == CHORUS_SUCCESS;
}

/* Element i of rank r's input; the sum over ranks is exact in float32. */
static float input_of(int r, size_t i) {
  return (float)((i % 251) + (size_t)r * 1000);
}

static size_t wrong_sum(const float* data, size_t count, int size) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += input_of(r, i);
    if ((double)data[i] != expected) ++wrong;
  }
  return wrong;
}

static chorus_result_t allreduce(chorus_comm_t comm, const void* send, void* recv, size_t count,
                                 chorus_dtype_t dtype, chorus_op_t op, int64_t timeout_ms,
                                 int nonblocking) {
  if (!nonblocking) return chorus_allreduce(comm, send, recv, count, dtype, op, timeout_ms);
  chorus_request_t request = NULL;
  chorus_result_t rc = chorus_iallreduce(comm, send, recv, count, dtype, op, &request);
  if (rc != CHORUS_SUCCESS) return rc;
  rc = chorus_wait(&request, timeout_ms);
  /* A wait that timed out leaves the operation running (and the request
   * valid): the operation's own deadline ends it. */
  for (int i = 0; i < 3 && rc == CHORUS_ERR_TIMEOUT && request != NULL; ++i)
    rc = chorus_wait(&request, 0);
  return rc;
}

static double timeout_s(void) {
  const char* t = getenv("CHORUS_TIMEOUT");
  return t ? atof(t) : 60.0;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s FAULT VICTIM COUNT blocking|nonblocking\n", argv[0]);
    return 2;
  }
  const char* fault = argv[1];
  const int victim = atoi(argv[2]);
  const size_t count = (size_t)strtoull(argv[3], NULL, 10);
  const int nonblocking = strcmp(argv[4], "nonblocking") == 0;
  signal(SIGTERM, SIG_IGN);

  chorus_comm_t comm = NULL;
  chorus_result_t rc = chorus_init_from_env(&comm);
  if (rc != CHORUS_SUCCESS) {
    fprintf(stderr, "init: %s: %s\n", chorus_result_string(rc), chorus_comm_last_error(NULL));
    return 1;
  }
  int rank = 0, size = 0;
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);
  const int faulty = rank == victim;

  float* send = malloc((count + 1) * size * sizeof(float));
  float* recv = malloc((count + 1) * size * sizeof(float));
  if (!send || !recv) return 1;
  for (size_t i = 0; i < (count + 1) * size; ++i) send[i] = input_of(rank, i);

  /* Warm-up: connections made, algorithms chosen, the same sizes as the call. */
  rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 0, nonblocking);
  if (rc != CHORUS_SUCCESS || wrong_sum(recv, count, size) != 0) {
    printf("rank %d: warm-up failed: %d %s\n", rank, (int)rc, chorus_comm_last_error(comm));
    return 1;
  }
  rc = chorus_barrier(comm, 0);
  if (rc != CHORUS_SUCCESS) return 1;

  int checked_sum = 1; /* the call is an allreduce whose result is checked */
  /* A rank that dies cannot tell the others which calls it finished: a peer
   * still finishing the barrier would fail it (while the others succeeded),
   * which is not the fault under test. The dying rank gives them time. */
  const int dies = strcmp(fault, "killed") == 0 || strcmp(fault, "exited") == 0;
  if (dies && faulty) sleep_ms(200);
  if (strcmp(fault, "killed") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    raise(SIGKILL);
  } else if (strcmp(fault, "exited") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    _exit(0); /* as a process that ends without cleaning up: no atexit work */
  } else if (strcmp(fault, "destroyed") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    chorus_comm_destroy(comm);
    free(send);
    free(recv);
    return 0;
  } else if (strcmp(fault, "aborted") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    chorus_comm_abort(comm, "the fault suite's victim aborts");
    chorus_comm_destroy(comm);
    free(send);
    free(recv);
    return 0;
  } else if (strcmp(fault, "stalled") == 0) {
    if (faulty)
      sleep_ms((long)(2000 * timeout_s()));
    else
      say("fault %d %lld\n", victim, now_ms());
    rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 0, nonblocking);
  } else if (strcmp(fault, "early-timeout") == 0) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms() + 300);
      rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 300, 0);
    } else {
      sleep_ms(1000);
      rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 0, 0);
    }
  } else if (strcmp(fault, "kind") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    rc = chorus_broadcast(comm, recv, count, CHORUS_FLOAT32, 0, 0);
  } else if (strcmp(fault, "count") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    rc = allreduce(comm, send, recv, count + 1, CHORUS_FLOAT32, CHORUS_SUM, 0, nonblocking);
  } else if (strcmp(fault, "dtype") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    rc = allreduce(comm, send, recv, count, CHORUS_INT32, CHORUS_SUM, 0, nonblocking);
  } else if (strcmp(fault, "op") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_MAX, 0, nonblocking);
  } else if (strcmp(fault, "bad-argument") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    rc = allreduce(comm, NULL, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 0, nonblocking);
  } else if (strcmp(fault, "root") == 0) {
    checked_sum = 0;
    if (faulty) say("fault %d %lld\n", rank, now_ms());
    rc = chorus_broadcast(comm, recv, count, CHORUS_FLOAT32, rank, 0);
  } else if (strcmp(fault, "allgather-in-place") == 0) {
    checked_sum = 0;
    if (faulty) say("fault %d %lld\n", rank, now_ms());
    rc = chorus_allgather(comm, recv, recv, count, CHORUS_FLOAT32, 0);
  } else {
    rc = allreduce(comm, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM, 0, nonblocking);
  }
  verdict(comm, rank, rc);
  if (rc == CHORUS_SUCCESS && checked_sum && wrong_sum(recv, count, size) != 0)
    printf("rank %d: WRONG result\n", rank);
  fflush(stdout);
  chorus_comm_destroy(comm);
  free(send);
  free(recv);
  return 0;
}
