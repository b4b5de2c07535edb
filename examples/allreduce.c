/* A plain C program using Chorus: every rank fills a vector with values that
 * depend on its rank and the index, all-reduces it (sum), and checks every
 * element against the closed-form answer.
 *
 *   chorusrun -np 4 ./allreduce [count]
 */
#include <chorus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
  chorus_comm_t comm = NULL;
  chorus_result_t rc = chorus_init_from_env(&comm);
  if (rc != CHORUS_SUCCESS) {
    fprintf(stderr, "chorus_init_from_env: %s: %s\n", chorus_result_string(rc),
            chorus_comm_last_error(NULL));
    return 1;
  }
  int rank = 0, size = 0;
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);

  /* Integers below 2^24 are exact in float32, so the check can be exact. */
  float* data = malloc(count * sizeof(float));
  if (count > 0 && !data) return 1;
  for (size_t i = 0; i < count; ++i) data[i] = (float)((i % 1000) + (size_t)rank * 1000);

  rc = chorus_allreduce(comm, data, data, count, CHORUS_FLOAT32, CHORUS_SUM, 0);
  if (rc != CHORUS_SUCCESS) {
    fprintf(stderr, "rank %d: chorus_allreduce: %s: %s\n", rank, chorus_result_string(rc),
            chorus_comm_last_error(comm));
    return 2;
  }
  size_t wrong = 0;
  double ranks_sum = (double)size * (size - 1) / 2.0 * 1000.0;
  for (size_t i = 0; i < count; ++i) {
    double expected = (double)(i % 1000) * size + ranks_sum;
    if ((double)data[i] != expected) ++wrong;
  }
  printf("rank %d of %d: allreduce of %zu floats: %zu wrong\n", rank, size, count, wrong);
  free(data);
  rc = chorus_comm_destroy(comm);
  if (rc != CHORUS_SUCCESS) {
    fprintf(stderr, "rank %d: chorus_comm_destroy: %s\n", rank, chorus_result_string(rc));
    return 3;
  }
  return wrong == 0 ? 0 : 4;
}
