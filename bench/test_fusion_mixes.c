/* bench-fusion-mixes: the tensor mixes of fusion_mixes.h, checked in C (the
 * header checks the same totals at compile time in C++): tensor counts,
 * parameter totals, the first and last tensors of the gradient order, and
 * the lookup. Exit status 0 when all hold, 1 otherwise. */
#include <stdio.h>

#include "fusion_mixes.h"

static int failures;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "test_fusion_mixes: FAILED: %s\n", what);
    ++failures;
  }
}

static size_t sum_of(const chorus_bench_mix* m) {
  size_t t, total = 0;
  for (t = 0; t < m->count; ++t) total += m->elems[t];
  return total;
}

int main(void) {
  const chorus_bench_mix* r = chorus_bench_find_mix("resnet50");
  const chorus_bench_mix* b = chorus_bench_find_mix("bert-base");
  size_t i, t;

  expect(r != NULL, "resnet50 is found");
  expect(b != NULL, "bert-base is found");
  expect(chorus_bench_find_mix("resnet") == NULL, "a prefix of a name is not found");
  expect(chorus_bench_find_mix("") == NULL, "the empty name is not found");
  expect(chorus_bench_find_mix(NULL) == NULL, "NULL is not found");
  if (!r || !b) return 1;

  /* torchvision.models.resnet50(): 161 parameter tensors, 25,557,032 parameters. */
  expect(r->count == 161, "resnet50 has 161 tensors");
  expect(sum_of(r) == 25557032, "resnet50 sums to 25,557,032 elements");
  expect(r->total_elems == 25557032, "resnet50's total_elems is 25,557,032");
  /* Gradient order: fc.bias, fc.weight first; bn1.bias, bn1.weight, conv1.weight last. */
  expect(r->elems[0] == 1000 && r->elems[1] == 1000 * 2048, "resnet50 starts with fc");
  expect(r->elems[158] == 64 && r->elems[159] == 64 && r->elems[160] == 64 * 3 * 7 * 7,
         "resnet50 ends with bn1 and conv1 (64x3x7x7)");

  /* BertModel (bert-base-uncased): 199 tensors, 109,482,240 parameters. */
  expect(b->count == 199, "bert-base has 199 tensors");
  expect(sum_of(b) == 109482240, "bert-base sums to 109,482,240 elements");
  expect(b->total_elems == 109482240, "bert-base's total_elems is 109,482,240");
  expect(b->elems[0] == 768 && b->elems[1] == 768 * 768, "bert-base starts with the pooler");
  expect(b->elems[198] == 30522 * 768, "bert-base ends with the word embeddings");

  for (i = 0; i < CHORUS_BENCH_MIX_COUNT; ++i) {
    const chorus_bench_mix* m = &chorus_bench_mixes[i];
    expect(chorus_bench_find_mix(m->name) == m, "every listed mix is found by its name");
    expect(sum_of(m) == m->total_elems, "every mix's total_elems is the sum of its tensors");
    for (t = 0; t < m->count; ++t) expect(m->elems[t] > 0, "no tensor is empty");
  }
  if (!failures) printf("test_fusion_mixes: %zu mixes OK\n", (size_t)CHORUS_BENCH_MIX_COUNT);
  return failures ? 1 : 0;
}
