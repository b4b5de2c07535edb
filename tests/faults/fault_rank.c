/* One rank of a fault-suite job, a plain C program against <chorus.h> run by
 * chorusrun, as a user's program would be.
 *
 *   fault_rank FAULT VICTIM COUNT FORM [COLLECTIVE]
 *
 * Every rank initialises, takes part in one checked warm-up call and a
 * barrier, and then at once makes the call under test (a fault may overtake
 * a peer still finishing the barrier, which must then finish it all the
 * same): COLLECTIVE (allreduce unless given; also broadcast, allgather,
 * reduce_scatter, alltoall, reduce, gather, scatter, barrier, allgatherv,
 * reduce_scatterv; the rooted ones with root 0) of COUNT floats per block
 * (sum), unless the fault says otherwise. FORM is "blocking", "nonblocking"
 * (the i-form + wait) or "fused" (an allreduce given to the fusion engine as
 * the tensor "grad" + wait). Rank VICTIM (the faulty one) does instead:
 *
 *   none         the same call (a control: every rank must succeed)
 *   killed       SIGKILLs itself
 *   killed-after makes the call, and SIGKILLs itself the moment it returns
 *                (its peers may still be finishing it: they must finish it
 *                too, since the victim did); each survivor then makes one
 *                more call and prints "after RANK CODE", which must fail
 *   killed-during  makes the call, and dies (SIGALRM, whose default action
 *                ends the process) FAULT_KILL_US microseconds after it began
 *                (rN: a random delay below N; default r3000): in the middle of the
 *                call, or just after it. Every survivor must reach the same
 *                verdict, success or PEER_FAILURE (CHORUS_AGREE=1; without
 *                the verdict round they may not: docs/architecture.md)
 *   disconnected  makes the call, and FAULT_KILL_US microseconds after it
 *                began (as killed-during) shuts down its connections to its
 *                peers, alive: as a network that drops (resets) them. Every
 *                rank, the victim too, must reach the same verdict, success
 *                or PEER_FAILURE (CHORUS_AGREE=1)
 *   exited       exits (_exit, status 0) without destroying its communicator
 *   destroyed    destroys its communicator
 *   aborted      calls chorus_comm_abort
 *   stalled      sleeps for twice CHORUS_TIMEOUT, then makes the call
 *   early-timeout  makes the call at once with a 300 ms deadline, while the
 *                others make it 1 s later with the default deadline (always
 *                blocking: a non-blocking call's deadline is CHORUS_TIMEOUT,
 *                and a wait that times out leaves the call running)
 *   deadline-during  makes the call at once with a 300 ms deadline, while
 *                each other rank makes it FAULT_KILL_US microseconds (default
 *                a random delay below 3000) before that deadline passes:
 *                it passes at a random moment of their call. Every rank must
 *                reach the same verdict, success or TIMEOUT
 *   stopped      stops (SIGSTOP, every thread) just before its call, and a
 *                child process it forked continues it (SIGCONT) three
 *                deadlines later: the others' deadline passes while it
 *                cannot answer them, and it finds their input there when it
 *                resumes. Every rank must reach the same verdict, TIMEOUT
 *                (success where the others need nothing from it)
 *   stopped-during  as stopped, but stops FAULT_KILL_US microseconds after
 *                its call began (as killed-during): in the middle of the
 *                call, or just after it
 *   stopped-releasing  (the releaser of reduce, gather, scatter or
 *                broadcast over TCP: the root, or the ring broadcast's last
 *                rank) makes the call, and stops as stopped does right
 *                after its first release has gone out
 *                (release_stop.c): one rank released, the others waiting
 *                for theirs. Every rank must finish the call; the victim
 *                prints "release-stop RANK 1" if the stop came (0 if not)
 *   kind         calls broadcast (root 0) instead (allreduce instead of a
 *                broadcast)
 *   count        passes COUNT + 1 elements per block
 *   dtype        passes int32 (the same size as float32)
 *   op           passes max instead of sum
 *   root         (every rank) a broadcast whose root is the caller itself
 *   bad-argument passes a null buffer (the receive buffer of a broadcast
 *                or scatter, else the send buffer: a local argument error)
 *   allgather-in-place  (every rank) an allgather with sendbuf == recvbuf
 *   wrong-token  before the call, connects to the job's store and to its own
 *                listening port as a stranger with another job's token
 *                (prints "refused store|hello RANK 0|1"); the job goes on
 *   malformed-frame  writes 56 bytes that are no frame header into each of
 *                its connections to its peers, then makes the call 200 ms later
 *   truncated    writes the first 20 bytes of a frame header into each of
 *                its connections to its peers and shuts them down, then makes
 *                the call 200 ms later
 *   launcher-killed  sleeps like stalled while the others make the call; the
 *                suite SIGKILLs chorusrun (and with it the job's store) then
 *
 * FAULT_GRACE_MS (default 200) is how long a victim whose fault fails every
 * call in flight (killed, exited, aborted, malformed-frame, truncated,
 * bad-argument) waits after the barrier before committing it; 0 lets the
 * fault overtake peers still finishing the barrier (docs/architecture.md,
 * "One verdict per call", open).
 *
 * The connections are found as the process's connected IPv4 TCP sockets but
 * the one to the store (CHORUS_STORE_ADDR): with the tcp and shm transports
 * those are exactly the connections to its peers (sockets.c). Every rank
 * first prints "pid RANK PID".
 *
 * Each rank prints, on stdout, at the moment it learns the call's outcome:
 *   verdict RANK CODE T_MS :: MESSAGE
 * where T_MS is CLOCK_REALTIME in ms, and the victim prints "fault RANK T_MS"
 * when it commits its fault (the stalled and early-timeout faults print when
 * the others start their call instead). A successful call's result is checked
 * in full against the inputs (calls.c); a wrong result prints "WRONG". The
 * rank then destroys its communicator and exits 0. SIGTERM is ignored so
 * that chorusrun's stop cannot cut a rank short before it reports
 * (chorusrun escalates to SIGKILL).
 */
#define _POSIX_C_SOURCE 200809L
#include <chorus.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calls.h"
#include "release_stop.h"
#include "sockets.h"

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

/* disconnected: the connections the alarm shuts down, and whether it did. */
static int cut_fds[64];
static int cut_count;
static volatile sig_atomic_t cut_done;

static void cut_connections(int sig) {
  (void)sig;
  for (int i = 0; i < cut_count; ++i) shutdown(cut_fds[i], SHUT_RDWR);
  cut_done = 1;
}

/* FAULT_KILL_US: N microseconds, or rN: a random delay below N (default r3000). */
static long fault_delay_us(void) {
  const char* given = getenv("FAULT_KILL_US");
  srand((unsigned)(now_ms() ^ (long long)getpid()));
  if (given && given[0] != 'r') return atol(given);
  const long below = given && atol(given + 1) > 0 ? atol(given + 1) : 3000;
  return rand() % below;
}

/* SIGALRM fault_delay_us() from now. */
static void alarm_soon(void) {
  const long delay_us = fault_delay_us();
  struct itimerval at = {{0, 0}, {delay_us / 1000000, delay_us % 1000000 + 1}};
  setitimer(ITIMER_REAL, &at, NULL);
}

static double timeout_s(void) {
  const char* t = getenv("CHORUS_TIMEOUT");
  return t ? atof(t) : 60.0;
}

/* stopped, stopped-during: SIGSTOP stops every thread of the process; a
 * child process continues it after_ms later (it only sleeps, signals and
 * exits: a fork of a threaded process). */
static void stop_self(int sig) {
  (void)sig;
  raise(SIGSTOP);
}

static pid_t fork_continuer(long after_ms) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    struct timespec wait = {after_ms / 1000, (after_ms % 1000) * 1000000L};
    nanosleep(&wait, NULL);
    kill(parent, SIGCONT);
    _exit(0);
  }
  return child;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: %s FAULT VICTIM COUNT blocking|nonblocking|fused [COLLECTIVE]\n",
            argv[0]);
    return 2;
  }
  const char* fault = argv[1];
  const int victim = atoi(argv[2]);
  const size_t count = (size_t)strtoull(argv[3], NULL, 10);
  const enum form form = strcmp(argv[4], "nonblocking") == 0 ? NONBLOCKING
                         : strcmp(argv[4], "fused") == 0     ? FUSED
                                                             : BLOCKING;
  enum coll coll = ALLREDUCE;
  if (argc == 6) {
    for (coll = 0; coll < COLL_COUNT && strcmp(argv[5], coll_names[coll]) != 0; ++coll) {
    }
    if (coll == COLL_COUNT || (form == FUSED && coll != ALLREDUCE)) {
      fprintf(stderr, "%s: no collective %s (in that form)\n", argv[0], argv[5]);
      return 2;
    }
  }
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
  if (size > MAX_RANKS) return 2;
  const int two_victims = strcmp(fault, "killed-during-two") == 0;
  const int faulty = rank == victim || (two_victims && rank == victim - 1);
  printf("pid %d %lld\n", rank, (long long)getpid());
  fflush(stdout);

  /* Room for every collective's buffers, also with count + 1 elements. */
  const size_t elements = (count + 2) * (size_t)size;
  float* send = malloc(elements * sizeof(float));
  float* recv = malloc(elements * sizeof(float));
  if (!send || !recv) return 1;
  for (size_t i = 0; i < elements; ++i) send[i] = input_of(rank, i);
  const struct call agreed = {coll, send, recv, count, CHORUS_FLOAT32, CHORUS_SUM};
  struct call call = agreed; /* the call under test, as this rank makes it */

  /* Warm-up: connections made, algorithms chosen, the same sizes as the call. */
  prepare(&agreed, rank, elements);
  rc = make_call(comm, size, &agreed, 0, form);
  if (rc != CHORUS_SUCCESS || wrong_result(coll, recv, count, rank, size) != 0) {
    printf("rank %d: warm-up failed: %d %s\n", rank, (int)rc, chorus_comm_last_error(comm));
    return 1;
  }
  rc = chorus_barrier(comm, 0);
  if (rc != CHORUS_SUCCESS) {
    printf("rank %d: barrier failed: %d %s\n", rank, (int)rc, chorus_comm_last_error(comm));
    return 1;
  }

  int checked = 1;      /* the result of a successful call is checked */
  pid_t continuer = -1; /* the stopped faults: the process that continues it */
  /* A rank that dies (or whose connections its peers drop: a corrupt
   * stream, or that aborts: an abort fails the calls in flight on every
   * rank) cannot tell the others which calls it finished: a peer still
   * finishing the barrier would fail it (while the others succeeded),
   * which is not the fault under test. The dying rank gives them time, and
   * so does a rank about to refuse a bad argument: its refusal fails the
   * communicator, and with it the calls in flight on every rank. */
  const int fails_all = strcmp(fault, "killed") == 0 || strcmp(fault, "exited") == 0 ||
                        strcmp(fault, "aborted") == 0 || strcmp(fault, "malformed-frame") == 0 ||
                        strcmp(fault, "truncated") == 0 || strcmp(fault, "bad-argument") == 0;
  if (fails_all && faulty)
    sleep_ms(getenv("FAULT_GRACE_MS") ? atol(getenv("FAULT_GRACE_MS")) : 200);
  prepare(&agreed, rank, elements);
  if (strcmp(fault, "killed") == 0 && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    raise(SIGKILL);
  } else if (strcmp(fault, "killed-during") == 0 || two_victims) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms());
      alarm_soon();
      rc = make_call(comm, size, &call, 0, form);
      for (;;) pause(); /* the call ended first: the alarm still comes */
    }
    rc = make_call(comm, size, &call, 0, form);
  } else if (strcmp(fault, "disconnected") == 0) {
    if (faulty) {
      cut_count = peer_sockets(cut_fds, 64);
      struct sigaction cut;
      memset(&cut, 0, sizeof cut);
      cut.sa_handler = cut_connections;
      cut.sa_flags = SA_RESTART;
      sigaction(SIGALRM, &cut, NULL);
      say("fault %d %lld\n", rank, now_ms());
      alarm_soon();
    }
    rc = make_call(comm, size, &call, 0, form);
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
  } else if (strcmp(fault, "wrong-token") == 0) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms());
      intrude(rank, size);
    }
    rc = make_call(comm, size, &call, 0, form);
  } else if (strcmp(fault, "malformed-frame") == 0 || strcmp(fault, "truncated") == 0) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms());
      corrupt_connections(strcmp(fault, "truncated") == 0);
      /* As a dying rank: a peer that finds the corruption while the last
       * message of the call is on its way to this rank would fail a call
       * this rank completes (docs/architecture.md, "One verdict per call",
       * open). Waiting measures the fault itself. */
      sleep_ms(200);
    }
    rc = make_call(comm, size, &call, 0, form);
  } else if (strcmp(fault, "launcher-killed") == 0 || strcmp(fault, "stalled") == 0) {
    if (faulty)
      sleep_ms((long)(2000 * timeout_s()));
    else
      say("fault %d %lld\n", victim, now_ms());
    rc = make_call(comm, size, &call, 0, form);
  } else if (strcmp(fault, "early-timeout") == 0) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms() + 300);
      rc = make_call(comm, size, &call, 300, BLOCKING);
    } else {
      sleep_ms(1000);
      rc = make_call(comm, size, &call, 0, BLOCKING);
    }
  } else if (strcmp(fault, "deadline-during") == 0) {
    if (faulty) {
      say("fault %d %lld\n", rank, now_ms() + 300);
      rc = make_call(comm, size, &call, 300, BLOCKING);
    } else {
      const long lead_us = fault_delay_us();
      struct timespec until = {0, (300000 - (lead_us < 300000 ? lead_us : 0)) * 1000L};
      nanosleep(&until, NULL);
      rc = make_call(comm, size, &call, 0, BLOCKING);
    }
  } else if (strncmp(fault, "stopped", strlen("stopped")) == 0) {
    if (faulty) {
      continuer = fork_continuer((long)(3000 * timeout_s()));
      if (continuer < 0) return 1;
      say("fault %d %lld\n", rank, now_ms());
      if (strcmp(fault, "stopped") == 0) {
        raise(SIGSTOP);
      } else if (strcmp(fault, "stopped-releasing") == 0) {
        stop_at_first_release();
      } else {
        struct sigaction stop;
        memset(&stop, 0, sizeof stop);
        stop.sa_handler = stop_self;
        stop.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &stop, NULL);
        alarm_soon();
      }
    }
    rc = make_call(comm, size, &call, 0, form);
  } else if (strcmp(fault, "root") == 0) {
    checked = 0;
    if (faulty) say("fault %d %lld\n", rank, now_ms());
    rc = chorus_broadcast(comm, recv, count, CHORUS_FLOAT32, rank, 0);
  } else if (strcmp(fault, "allgather-in-place") == 0) {
    checked = 0;
    if (faulty) say("fault %d %lld\n", rank, now_ms());
    rc = chorus_allgather(comm, recv, recv, count, CHORUS_FLOAT32, 0);
  } else {
    /* none, killed-after, or a fault in the victim's own call. */
    if (faulty) {
      if (strcmp(fault, "kind") == 0) {
        call.coll = coll == BROADCAST ? ALLREDUCE : BROADCAST;
      } else if (strcmp(fault, "count") == 0) {
        call.count = count + 1;
      } else if (strcmp(fault, "dtype") == 0) {
        call.dtype = CHORUS_INT32; /* the same size as float32 */
      } else if (strcmp(fault, "op") == 0) {
        call.op = CHORUS_MAX;
      } else if (strcmp(fault, "bad-argument") == 0) {
        /* The buffer the collective reads or writes on this rank. */
        if (coll == SCATTER || coll == BROADCAST)
          call.recv = NULL;
        else
          call.send = NULL;
      }
      if (strcmp(fault, "none") != 0 && strcmp(fault, "killed-after") != 0)
        say("fault %d %lld\n", rank, now_ms());
    }
    rc = make_call(comm, size, &call, 0, form);
  }
  verdict(comm, rank, rc);
  if (continuer > 0) waitpid(continuer, NULL, 0); /* the stop comes and goes first */
  if (faulty && strcmp(fault, "stopped-releasing") == 0) {
    printf("release-stop %d %d\n", rank, stopped_at_release());
    fflush(stdout);
  }
  if (faulty && strcmp(fault, "disconnected") == 0) {
    /* The call ended first: the cut still comes (on whichever thread takes
     * the signal, so not a pause() here). */
    for (int waited = 0; !cut_done && waited < 5000; ++waited) sleep_ms(1); /* bounded */
    sleep_ms(500); /* alive while the peers ask whether it is */
  }
  const int dies_after = strcmp(fault, "killed-after") == 0;
  if (dies_after && faulty) {
    say("fault %d %lld\n", rank, now_ms());
    raise(SIGKILL);
  }
  if (rc == CHORUS_SUCCESS && checked && wrong_result(coll, recv, count, rank, size) != 0)
    printf("rank %d: WRONG result\n", rank);
  if (dies_after) {
    rc = make_call(comm, size, &agreed, 0, form);
    printf("after %d %d\n", rank, (int)rc);
  }
  fflush(stdout);
  chorus_comm_destroy(comm);
  free(send);
  free(recv);
  return 0;
}
