/* The call under test of a fault-suite rank (fault_rank.c): any collective
 * of <chorus.h>, blocking, non-blocking or (allreduce) fused, and a check of
 * its result against every rank's input, computed here independently of the
 * library. */
#ifndef CHORUS_TESTS_FAULTS_CALLS_H
#define CHORUS_TESTS_FAULTS_CALLS_H

#include <chorus.h>
#include <stddef.h>
#include <stdint.h>

enum form { BLOCKING, NONBLOCKING, FUSED };

/* The collectives a job can make its call under test; the rooted ones use
 * root 0. */
enum coll {
  ALLREDUCE,
  BROADCAST,
  ALLGATHER,
  REDUCE_SCATTER,
  ALLTOALL,
  REDUCE,
  GATHER,
  SCATTER,
  BARRIER,
  ALLGATHERV,
  REDUCE_SCATTERV,
  COLL_COUNT
};
extern const char* const coll_names[COLL_COUNT];

#define MAX_RANKS 64

/* Element i of rank r's input; sums over up to MAX_RANKS ranks are exact in
 * float32. */
float input_of(int r, size_t i);

/* What a call needs besides its collective: buffers, count, dtype, op. */
struct call {
  enum coll coll;
  const float* send;
  float* recv;
  size_t count; /* per block */
  chorus_dtype_t dtype;
  chorus_op_t op;
};

/* The call in one of three forms: blocking, non-blocking + wait, or (an
 * allreduce only) a tensor named "grad" given to the fusion engine + wait. */
chorus_result_t make_call(chorus_comm_t comm, int size, const struct call* c, int64_t timeout_ms,
                          enum form form);

/* Fills recv (elements floats) before a call: the root's input for a
 * broadcast (every rank's, only the root's is kept), a value no result has
 * for the others. */
void prepare(const struct call* c, int rank, size_t elements);

/* How many elements of this rank's result of a successful call of count
 * elements per block are wrong, against the inputs (input_of) every rank
 * passed. */
size_t wrong_result(enum coll coll, const float* recv, size_t count, int rank, int size);

#endif
