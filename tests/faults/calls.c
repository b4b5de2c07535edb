#include "calls.h"

float input_of(int r, size_t i) {
  return (float)((i % 251) + (size_t)r * 1000);
}

const char* const coll_names[COLL_COUNT] = {
    "allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall",       "reduce",
    "gather",    "scatter",   "barrier",   "allgatherv",     "reduce_scatterv"};

/* The blocks of the v-collectives: count elements on even ranks, count + 1
 * on odd ones; off[r] is where rank r's block starts. */
static void v_blocks(size_t count, int size, size_t* counts, size_t* off) {
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = count + (size_t)(r % 2);
    off[r] = at;
    at += counts[r];
  }
}

chorus_result_t make_call(chorus_comm_t comm, int size, const struct call* c, int64_t timeout_ms,
                          enum form form) {
  size_t counts[MAX_RANKS], off[MAX_RANKS];
  v_blocks(c->count, size, counts, off);
  const void* s = c->send;
  void* r = c->recv;
  const size_t n = c->count;
  if (form == BLOCKING) {
    switch (c->coll) {
      case ALLREDUCE:
        return chorus_allreduce(comm, s, r, n, c->dtype, c->op, timeout_ms);
      case BROADCAST:
        return chorus_broadcast(comm, r, n, c->dtype, 0, timeout_ms);
      case ALLGATHER:
        return chorus_allgather(comm, s, r, n, c->dtype, timeout_ms);
      case REDUCE_SCATTER:
        return chorus_reduce_scatter(comm, s, r, n, c->dtype, c->op, timeout_ms);
      case ALLTOALL:
        return chorus_alltoall(comm, s, r, n, c->dtype, timeout_ms);
      case REDUCE:
        return chorus_reduce(comm, s, r, n, c->dtype, c->op, 0, timeout_ms);
      case GATHER:
        return chorus_gather(comm, s, r, n, c->dtype, 0, timeout_ms);
      case SCATTER:
        return chorus_scatter(comm, s, r, n, c->dtype, 0, timeout_ms);
      case BARRIER:
        return chorus_barrier(comm, timeout_ms);
      case ALLGATHERV:
        return chorus_allgatherv(comm, s, r, counts, c->dtype, timeout_ms);
      case REDUCE_SCATTERV:
        return chorus_reduce_scatterv(comm, s, r, counts, c->dtype, c->op, timeout_ms);
      default:
        return CHORUS_ERR_INVALID_ARGUMENT;
    }
  }
  chorus_request_t request = NULL;
  chorus_result_t rc = CHORUS_ERR_INVALID_ARGUMENT;
  switch (form == FUSED ? COLL_COUNT : c->coll) {
    case ALLREDUCE:
      rc = chorus_iallreduce(comm, s, r, n, c->dtype, c->op, &request);
      break;
    case BROADCAST:
      rc = chorus_ibroadcast(comm, r, n, c->dtype, 0, &request);
      break;
    case ALLGATHER:
      rc = chorus_iallgather(comm, s, r, n, c->dtype, &request);
      break;
    case REDUCE_SCATTER:
      rc = chorus_ireduce_scatter(comm, s, r, n, c->dtype, c->op, &request);
      break;
    case ALLTOALL:
      rc = chorus_ialltoall(comm, s, r, n, c->dtype, &request);
      break;
    case REDUCE:
      rc = chorus_ireduce(comm, s, r, n, c->dtype, c->op, 0, &request);
      break;
    case GATHER:
      rc = chorus_igather(comm, s, r, n, c->dtype, 0, &request);
      break;
    case SCATTER:
      rc = chorus_iscatter(comm, s, r, n, c->dtype, 0, &request);
      break;
    case BARRIER:
      rc = chorus_ibarrier(comm, &request);
      break;
    case ALLGATHERV:
      rc = chorus_iallgatherv(comm, s, r, counts, c->dtype, &request);
      break;
    case REDUCE_SCATTERV:
      rc = chorus_ireduce_scatterv(comm, s, r, counts, c->dtype, c->op, &request);
      break;
    default:
      rc = chorus_fused_allreduce(comm, "grad", s, r, n, c->dtype, c->op, &request);
      break;
  }
  if (rc != CHORUS_SUCCESS) return rc;
  rc = chorus_wait(&request, timeout_ms);
  /* A wait that timed out leaves the operation running (and the request
   * valid): the operation's own deadline ends it. */
  for (int i = 0; i < 3 && rc == CHORUS_ERR_TIMEOUT && request != NULL; ++i)
    rc = chorus_wait(&request, 0);
  return rc;
}

/* Element i of the sum over every rank's input. */
static double sum_of(int size, size_t i) {
  double sum = 0;
  for (int r = 0; r < size; ++r) sum += input_of(r, i);
  return sum;
}

size_t wrong_result(enum coll coll, const float* recv, size_t count, int rank, int size) {
  size_t counts[MAX_RANKS], off[MAX_RANKS];
  v_blocks(count, size, counts, off);
  size_t wrong = 0;
  switch (coll) {
    case ALLREDUCE:
    case REDUCE:
      if (coll == REDUCE && rank != 0) break;
      for (size_t i = 0; i < count; ++i) wrong += recv[i] != sum_of(size, i);
      break;
    case BROADCAST:
      for (size_t i = 0; i < count; ++i) wrong += recv[i] != input_of(0, i);
      break;
    case ALLGATHER:
    case GATHER:
      if (coll == GATHER && rank != 0) break;
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < count; ++i) wrong += recv[(size_t)r * count + i] != input_of(r, i);
      break;
    case REDUCE_SCATTER:
      for (size_t i = 0; i < count; ++i) wrong += recv[i] != sum_of(size, (size_t)rank * count + i);
      break;
    case ALLTOALL:
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < count; ++i)
          wrong += recv[(size_t)r * count + i] != input_of(r, (size_t)rank * count + i);
      break;
    case SCATTER:
      for (size_t i = 0; i < count; ++i) wrong += recv[i] != input_of(0, (size_t)rank * count + i);
      break;
    case ALLGATHERV:
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < counts[r]; ++i) wrong += recv[off[r] + i] != input_of(r, i);
      break;
    case REDUCE_SCATTERV:
      for (size_t i = 0; i < counts[rank]; ++i) wrong += recv[i] != sum_of(size, off[rank] + i);
      break;
    default:
      break;
  }
  return wrong;
}

void prepare(const struct call* c, int rank, size_t elements) {
  for (size_t i = 0; i < elements; ++i)
    c->recv[i] = c->coll == BROADCAST ? input_of(rank, i) : -1.0f;
}
