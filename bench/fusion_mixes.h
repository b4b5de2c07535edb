/* Named tensor-size mixes for the tensor-fusion benchmarks (chorus-bench fusion
 * and mpi_allreduce_bench fusion): the float32 element count of every
 * trainable parameter tensor of a real model, in the order backpropagation
 * hands the gradients over (the reverse of the model's parameter order, as
 * PyTorch DDP buckets them). Plain C, usable from C11 and C++20.
 *
 *   const chorus_bench_mix* m = chorus_bench_find_mix("resnet50");
 *   for (size_t t = 0; t < m->count; ++t) use(m->elems[t]);  (elements, not bytes)
 *
 * resnet50: torchvision.models.resnet50() (1000 classes): conv weights,
 *   batch-norm weight and bias, fc weight and bias; 161 tensors, 25,557,032
 *   parameters (102,228,128 bytes as float32). torchvision registers each
 *   Bottleneck's modules in forward order (conv1 bn1 conv2 bn2 conv3 bn3, then
 *   downsample, which forward() also runs after bn3), so the list is
 *   reversed(list(model.parameters())).
 * bert-base: Hugging Face BertModel for bert-base-uncased (vocabulary 30522,
 *   hidden 768, 12 layers, intermediate 3072, 512 positions, 2 token types,
 *   with the pooler, without a task head); 199 tensors, 109,482,240
 *   parameters (437,928,960 bytes), reversed(list(model.parameters())).
 *
 * The totals are checked at compile time in C++ (static_assert below) and by
 * the bench-fusion-mixes test (bench/test_fusion_mixes.c) in C. */
#ifndef CHORUS_BENCH_FUSION_MIXES_H
#define CHORUS_BENCH_FUSION_MIXES_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  const char* name;
  size_t count;        /* number of tensors */
  const size_t* elems; /* element count of each tensor, in gradient order */
  size_t total_elems;  /* sum of elems (the checks below keep it honest) */
} chorus_bench_mix;

/* constexpr in C++, so the totals below are checked at compile time. */
#ifdef __cplusplus
#define CHORUS_BENCH_MIX_CONST constexpr
#else
#define CHORUS_BENCH_MIX_CONST const
#endif

/* resnet50, gradient order: element count, then the parameter and its shape. */
static CHORUS_BENCH_MIX_CONST size_t chorus_bench_resnet50_elems[] = {
    1000,    /* fc.bias */
    2048000, /* fc.weight 1000x2048 */
    2048,    /* layer4.2.bn3.bias */
    2048,    /* layer4.2.bn3.weight */
    1048576, /* layer4.2.conv3.weight 2048x512x1x1 */
    512,     /* layer4.2.bn2.bias */
    512,     /* layer4.2.bn2.weight */
    2359296, /* layer4.2.conv2.weight 512x512x3x3 */
    512,     /* layer4.2.bn1.bias */
    512,     /* layer4.2.bn1.weight */
    1048576, /* layer4.2.conv1.weight 512x2048x1x1 */
    2048,    /* layer4.1.bn3.bias */
    2048,    /* layer4.1.bn3.weight */
    1048576, /* layer4.1.conv3.weight 2048x512x1x1 */
    512,     /* layer4.1.bn2.bias */
    512,     /* layer4.1.bn2.weight */
    2359296, /* layer4.1.conv2.weight 512x512x3x3 */
    512,     /* layer4.1.bn1.bias */
    512,     /* layer4.1.bn1.weight */
    1048576, /* layer4.1.conv1.weight 512x2048x1x1 */
    2048,    /* layer4.0.downsample.1.bias */
    2048,    /* layer4.0.downsample.1.weight */
    2097152, /* layer4.0.downsample.0.weight 2048x1024x1x1 */
    2048,    /* layer4.0.bn3.bias */
    2048,    /* layer4.0.bn3.weight */
    1048576, /* layer4.0.conv3.weight 2048x512x1x1 */
    512,     /* layer4.0.bn2.bias */
    512,     /* layer4.0.bn2.weight */
    2359296, /* layer4.0.conv2.weight 512x512x3x3 */
    512,     /* layer4.0.bn1.bias */
    512,     /* layer4.0.bn1.weight */
    524288,  /* layer4.0.conv1.weight 512x1024x1x1 */
    1024,    /* layer3.5.bn3.bias */
    1024,    /* layer3.5.bn3.weight */
    262144,  /* layer3.5.conv3.weight 1024x256x1x1 */
    256,     /* layer3.5.bn2.bias */
    256,     /* layer3.5.bn2.weight */
    589824,  /* layer3.5.conv2.weight 256x256x3x3 */
    256,     /* layer3.5.bn1.bias */
    256,     /* layer3.5.bn1.weight */
    262144,  /* layer3.5.conv1.weight 256x1024x1x1 */
    1024,    /* layer3.4.bn3.bias */
    1024,    /* layer3.4.bn3.weight */
    262144,  /* layer3.4.conv3.weight 1024x256x1x1 */
    256,     /* layer3.4.bn2.bias */
    256,     /* layer3.4.bn2.weight */
    589824,  /* layer3.4.conv2.weight 256x256x3x3 */
    256,     /* layer3.4.bn1.bias */
    256,     /* layer3.4.bn1.weight */
    262144,  /* layer3.4.conv1.weight 256x1024x1x1 */
    1024,    /* layer3.3.bn3.bias */
    1024,    /* layer3.3.bn3.weight */
    262144,  /* layer3.3.conv3.weight 1024x256x1x1 */
    256,     /* layer3.3.bn2.bias */
    256,     /* layer3.3.bn2.weight */
    589824,  /* layer3.3.conv2.weight 256x256x3x3 */
    256,     /* layer3.3.bn1.bias */
    256,     /* layer3.3.bn1.weight */
    262144,  /* layer3.3.conv1.weight 256x1024x1x1 */
    1024,    /* layer3.2.bn3.bias */
    1024,    /* layer3.2.bn3.weight */
    262144,  /* layer3.2.conv3.weight 1024x256x1x1 */
    256,     /* layer3.2.bn2.bias */
    256,     /* layer3.2.bn2.weight */
    589824,  /* layer3.2.conv2.weight 256x256x3x3 */
    256,     /* layer3.2.bn1.bias */
    256,     /* layer3.2.bn1.weight */
    262144,  /* layer3.2.conv1.weight 256x1024x1x1 */
    1024,    /* layer3.1.bn3.bias */
    1024,    /* layer3.1.bn3.weight */
    262144,  /* layer3.1.conv3.weight 1024x256x1x1 */
    256,     /* layer3.1.bn2.bias */
    256,     /* layer3.1.bn2.weight */
    589824,  /* layer3.1.conv2.weight 256x256x3x3 */
    256,     /* layer3.1.bn1.bias */
    256,     /* layer3.1.bn1.weight */
    262144,  /* layer3.1.conv1.weight 256x1024x1x1 */
    1024,    /* layer3.0.downsample.1.bias */
    1024,    /* layer3.0.downsample.1.weight */
    524288,  /* layer3.0.downsample.0.weight 1024x512x1x1 */
    1024,    /* layer3.0.bn3.bias */
    1024,    /* layer3.0.bn3.weight */
    262144,  /* layer3.0.conv3.weight 1024x256x1x1 */
    256,     /* layer3.0.bn2.bias */
    256,     /* layer3.0.bn2.weight */
    589824,  /* layer3.0.conv2.weight 256x256x3x3 */
    256,     /* layer3.0.bn1.bias */
    256,     /* layer3.0.bn1.weight */
    131072,  /* layer3.0.conv1.weight 256x512x1x1 */
    512,     /* layer2.3.bn3.bias */
    512,     /* layer2.3.bn3.weight */
    65536,   /* layer2.3.conv3.weight 512x128x1x1 */
    128,     /* layer2.3.bn2.bias */
    128,     /* layer2.3.bn2.weight */
    147456,  /* layer2.3.conv2.weight 128x128x3x3 */
    128,     /* layer2.3.bn1.bias */
    128,     /* layer2.3.bn1.weight */
    65536,   /* layer2.3.conv1.weight 128x512x1x1 */
    512,     /* layer2.2.bn3.bias */
    512,     /* layer2.2.bn3.weight */
    65536,   /* layer2.2.conv3.weight 512x128x1x1 */
    128,     /* layer2.2.bn2.bias */
    128,     /* layer2.2.bn2.weight */
    147456,  /* layer2.2.conv2.weight 128x128x3x3 */
    128,     /* layer2.2.bn1.bias */
    128,     /* layer2.2.bn1.weight */
    65536,   /* layer2.2.conv1.weight 128x512x1x1 */
    512,     /* layer2.1.bn3.bias */
    512,     /* layer2.1.bn3.weight */
    65536,   /* layer2.1.conv3.weight 512x128x1x1 */
    128,     /* layer2.1.bn2.bias */
    128,     /* layer2.1.bn2.weight */
    147456,  /* layer2.1.conv2.weight 128x128x3x3 */
    128,     /* layer2.1.bn1.bias */
    128,     /* layer2.1.bn1.weight */
    65536,   /* layer2.1.conv1.weight 128x512x1x1 */
    512,     /* layer2.0.downsample.1.bias */
    512,     /* layer2.0.downsample.1.weight */
    131072,  /* layer2.0.downsample.0.weight 512x256x1x1 */
    512,     /* layer2.0.bn3.bias */
    512,     /* layer2.0.bn3.weight */
    65536,   /* layer2.0.conv3.weight 512x128x1x1 */
    128,     /* layer2.0.bn2.bias */
    128,     /* layer2.0.bn2.weight */
    147456,  /* layer2.0.conv2.weight 128x128x3x3 */
    128,     /* layer2.0.bn1.bias */
    128,     /* layer2.0.bn1.weight */
    32768,   /* layer2.0.conv1.weight 128x256x1x1 */
    256,     /* layer1.2.bn3.bias */
    256,     /* layer1.2.bn3.weight */
    16384,   /* layer1.2.conv3.weight 256x64x1x1 */
    64,      /* layer1.2.bn2.bias */
    64,      /* layer1.2.bn2.weight */
    36864,   /* layer1.2.conv2.weight 64x64x3x3 */
    64,      /* layer1.2.bn1.bias */
    64,      /* layer1.2.bn1.weight */
    16384,   /* layer1.2.conv1.weight 64x256x1x1 */
    256,     /* layer1.1.bn3.bias */
    256,     /* layer1.1.bn3.weight */
    16384,   /* layer1.1.conv3.weight 256x64x1x1 */
    64,      /* layer1.1.bn2.bias */
    64,      /* layer1.1.bn2.weight */
    36864,   /* layer1.1.conv2.weight 64x64x3x3 */
    64,      /* layer1.1.bn1.bias */
    64,      /* layer1.1.bn1.weight */
    16384,   /* layer1.1.conv1.weight 64x256x1x1 */
    256,     /* layer1.0.downsample.1.bias */
    256,     /* layer1.0.downsample.1.weight */
    16384,   /* layer1.0.downsample.0.weight 256x64x1x1 */
    256,     /* layer1.0.bn3.bias */
    256,     /* layer1.0.bn3.weight */
    16384,   /* layer1.0.conv3.weight 256x64x1x1 */
    64,      /* layer1.0.bn2.bias */
    64,      /* layer1.0.bn2.weight */
    36864,   /* layer1.0.conv2.weight 64x64x3x3 */
    64,      /* layer1.0.bn1.bias */
    64,      /* layer1.0.bn1.weight */
    4096,    /* layer1.0.conv1.weight 64x64x1x1 */
    64,      /* bn1.bias */
    64,      /* bn1.weight */
    9408,    /* conv1.weight 64x3x7x7 */
};

/* bert-base, gradient order: element count, then the parameter and its shape. */
static CHORUS_BENCH_MIX_CONST size_t chorus_bench_bert_base_elems[] = {
    768,      /* pooler.dense.bias */
    589824,   /* pooler.dense.weight */
    768,      /* encoder.layer.11.output.LayerNorm.bias */
    768,      /* encoder.layer.11.output.LayerNorm.weight */
    768,      /* encoder.layer.11.output.dense.bias */
    2359296,  /* encoder.layer.11.output.dense.weight */
    3072,     /* encoder.layer.11.intermediate.dense.bias */
    2359296,  /* encoder.layer.11.intermediate.dense.weight */
    768,      /* encoder.layer.11.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.11.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.11.attention.output.dense.bias */
    589824,   /* encoder.layer.11.attention.output.dense.weight */
    768,      /* encoder.layer.11.attention.self.value.bias */
    589824,   /* encoder.layer.11.attention.self.value.weight */
    768,      /* encoder.layer.11.attention.self.key.bias */
    589824,   /* encoder.layer.11.attention.self.key.weight */
    768,      /* encoder.layer.11.attention.self.query.bias */
    589824,   /* encoder.layer.11.attention.self.query.weight */
    768,      /* encoder.layer.10.output.LayerNorm.bias */
    768,      /* encoder.layer.10.output.LayerNorm.weight */
    768,      /* encoder.layer.10.output.dense.bias */
    2359296,  /* encoder.layer.10.output.dense.weight */
    3072,     /* encoder.layer.10.intermediate.dense.bias */
    2359296,  /* encoder.layer.10.intermediate.dense.weight */
    768,      /* encoder.layer.10.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.10.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.10.attention.output.dense.bias */
    589824,   /* encoder.layer.10.attention.output.dense.weight */
    768,      /* encoder.layer.10.attention.self.value.bias */
    589824,   /* encoder.layer.10.attention.self.value.weight */
    768,      /* encoder.layer.10.attention.self.key.bias */
    589824,   /* encoder.layer.10.attention.self.key.weight */
    768,      /* encoder.layer.10.attention.self.query.bias */
    589824,   /* encoder.layer.10.attention.self.query.weight */
    768,      /* encoder.layer.9.output.LayerNorm.bias */
    768,      /* encoder.layer.9.output.LayerNorm.weight */
    768,      /* encoder.layer.9.output.dense.bias */
    2359296,  /* encoder.layer.9.output.dense.weight */
    3072,     /* encoder.layer.9.intermediate.dense.bias */
    2359296,  /* encoder.layer.9.intermediate.dense.weight */
    768,      /* encoder.layer.9.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.9.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.9.attention.output.dense.bias */
    589824,   /* encoder.layer.9.attention.output.dense.weight */
    768,      /* encoder.layer.9.attention.self.value.bias */
    589824,   /* encoder.layer.9.attention.self.value.weight */
    768,      /* encoder.layer.9.attention.self.key.bias */
    589824,   /* encoder.layer.9.attention.self.key.weight */
    768,      /* encoder.layer.9.attention.self.query.bias */
    589824,   /* encoder.layer.9.attention.self.query.weight */
    768,      /* encoder.layer.8.output.LayerNorm.bias */
    768,      /* encoder.layer.8.output.LayerNorm.weight */
    768,      /* encoder.layer.8.output.dense.bias */
    2359296,  /* encoder.layer.8.output.dense.weight */
    3072,     /* encoder.layer.8.intermediate.dense.bias */
    2359296,  /* encoder.layer.8.intermediate.dense.weight */
    768,      /* encoder.layer.8.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.8.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.8.attention.output.dense.bias */
    589824,   /* encoder.layer.8.attention.output.dense.weight */
    768,      /* encoder.layer.8.attention.self.value.bias */
    589824,   /* encoder.layer.8.attention.self.value.weight */
    768,      /* encoder.layer.8.attention.self.key.bias */
    589824,   /* encoder.layer.8.attention.self.key.weight */
    768,      /* encoder.layer.8.attention.self.query.bias */
    589824,   /* encoder.layer.8.attention.self.query.weight */
    768,      /* encoder.layer.7.output.LayerNorm.bias */
    768,      /* encoder.layer.7.output.LayerNorm.weight */
    768,      /* encoder.layer.7.output.dense.bias */
    2359296,  /* encoder.layer.7.output.dense.weight */
    3072,     /* encoder.layer.7.intermediate.dense.bias */
    2359296,  /* encoder.layer.7.intermediate.dense.weight */
    768,      /* encoder.layer.7.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.7.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.7.attention.output.dense.bias */
    589824,   /* encoder.layer.7.attention.output.dense.weight */
    768,      /* encoder.layer.7.attention.self.value.bias */
    589824,   /* encoder.layer.7.attention.self.value.weight */
    768,      /* encoder.layer.7.attention.self.key.bias */
    589824,   /* encoder.layer.7.attention.self.key.weight */
    768,      /* encoder.layer.7.attention.self.query.bias */
    589824,   /* encoder.layer.7.attention.self.query.weight */
    768,      /* encoder.layer.6.output.LayerNorm.bias */
    768,      /* encoder.layer.6.output.LayerNorm.weight */
    768,      /* encoder.layer.6.output.dense.bias */
    2359296,  /* encoder.layer.6.output.dense.weight */
    3072,     /* encoder.layer.6.intermediate.dense.bias */
    2359296,  /* encoder.layer.6.intermediate.dense.weight */
    768,      /* encoder.layer.6.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.6.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.6.attention.output.dense.bias */
    589824,   /* encoder.layer.6.attention.output.dense.weight */
    768,      /* encoder.layer.6.attention.self.value.bias */
    589824,   /* encoder.layer.6.attention.self.value.weight */
    768,      /* encoder.layer.6.attention.self.key.bias */
    589824,   /* encoder.layer.6.attention.self.key.weight */
    768,      /* encoder.layer.6.attention.self.query.bias */
    589824,   /* encoder.layer.6.attention.self.query.weight */
    768,      /* encoder.layer.5.output.LayerNorm.bias */
    768,      /* encoder.layer.5.output.LayerNorm.weight */
    768,      /* encoder.layer.5.output.dense.bias */
    2359296,  /* encoder.layer.5.output.dense.weight */
    3072,     /* encoder.layer.5.intermediate.dense.bias */
    2359296,  /* encoder.layer.5.intermediate.dense.weight */
    768,      /* encoder.layer.5.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.5.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.5.attention.output.dense.bias */
    589824,   /* encoder.layer.5.attention.output.dense.weight */
    768,      /* encoder.layer.5.attention.self.value.bias */
    589824,   /* encoder.layer.5.attention.self.value.weight */
    768,      /* encoder.layer.5.attention.self.key.bias */
    589824,   /* encoder.layer.5.attention.self.key.weight */
    768,      /* encoder.layer.5.attention.self.query.bias */
    589824,   /* encoder.layer.5.attention.self.query.weight */
    768,      /* encoder.layer.4.output.LayerNorm.bias */
    768,      /* encoder.layer.4.output.LayerNorm.weight */
    768,      /* encoder.layer.4.output.dense.bias */
    2359296,  /* encoder.layer.4.output.dense.weight */
    3072,     /* encoder.layer.4.intermediate.dense.bias */
    2359296,  /* encoder.layer.4.intermediate.dense.weight */
    768,      /* encoder.layer.4.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.4.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.4.attention.output.dense.bias */
    589824,   /* encoder.layer.4.attention.output.dense.weight */
    768,      /* encoder.layer.4.attention.self.value.bias */
    589824,   /* encoder.layer.4.attention.self.value.weight */
    768,      /* encoder.layer.4.attention.self.key.bias */
    589824,   /* encoder.layer.4.attention.self.key.weight */
    768,      /* encoder.layer.4.attention.self.query.bias */
    589824,   /* encoder.layer.4.attention.self.query.weight */
    768,      /* encoder.layer.3.output.LayerNorm.bias */
    768,      /* encoder.layer.3.output.LayerNorm.weight */
    768,      /* encoder.layer.3.output.dense.bias */
    2359296,  /* encoder.layer.3.output.dense.weight */
    3072,     /* encoder.layer.3.intermediate.dense.bias */
    2359296,  /* encoder.layer.3.intermediate.dense.weight */
    768,      /* encoder.layer.3.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.3.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.3.attention.output.dense.bias */
    589824,   /* encoder.layer.3.attention.output.dense.weight */
    768,      /* encoder.layer.3.attention.self.value.bias */
    589824,   /* encoder.layer.3.attention.self.value.weight */
    768,      /* encoder.layer.3.attention.self.key.bias */
    589824,   /* encoder.layer.3.attention.self.key.weight */
    768,      /* encoder.layer.3.attention.self.query.bias */
    589824,   /* encoder.layer.3.attention.self.query.weight */
    768,      /* encoder.layer.2.output.LayerNorm.bias */
    768,      /* encoder.layer.2.output.LayerNorm.weight */
    768,      /* encoder.layer.2.output.dense.bias */
    2359296,  /* encoder.layer.2.output.dense.weight */
    3072,     /* encoder.layer.2.intermediate.dense.bias */
    2359296,  /* encoder.layer.2.intermediate.dense.weight */
    768,      /* encoder.layer.2.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.2.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.2.attention.output.dense.bias */
    589824,   /* encoder.layer.2.attention.output.dense.weight */
    768,      /* encoder.layer.2.attention.self.value.bias */
    589824,   /* encoder.layer.2.attention.self.value.weight */
    768,      /* encoder.layer.2.attention.self.key.bias */
    589824,   /* encoder.layer.2.attention.self.key.weight */
    768,      /* encoder.layer.2.attention.self.query.bias */
    589824,   /* encoder.layer.2.attention.self.query.weight */
    768,      /* encoder.layer.1.output.LayerNorm.bias */
    768,      /* encoder.layer.1.output.LayerNorm.weight */
    768,      /* encoder.layer.1.output.dense.bias */
    2359296,  /* encoder.layer.1.output.dense.weight */
    3072,     /* encoder.layer.1.intermediate.dense.bias */
    2359296,  /* encoder.layer.1.intermediate.dense.weight */
    768,      /* encoder.layer.1.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.1.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.1.attention.output.dense.bias */
    589824,   /* encoder.layer.1.attention.output.dense.weight */
    768,      /* encoder.layer.1.attention.self.value.bias */
    589824,   /* encoder.layer.1.attention.self.value.weight */
    768,      /* encoder.layer.1.attention.self.key.bias */
    589824,   /* encoder.layer.1.attention.self.key.weight */
    768,      /* encoder.layer.1.attention.self.query.bias */
    589824,   /* encoder.layer.1.attention.self.query.weight */
    768,      /* encoder.layer.0.output.LayerNorm.bias */
    768,      /* encoder.layer.0.output.LayerNorm.weight */
    768,      /* encoder.layer.0.output.dense.bias */
    2359296,  /* encoder.layer.0.output.dense.weight */
    3072,     /* encoder.layer.0.intermediate.dense.bias */
    2359296,  /* encoder.layer.0.intermediate.dense.weight */
    768,      /* encoder.layer.0.attention.output.LayerNorm.bias */
    768,      /* encoder.layer.0.attention.output.LayerNorm.weight */
    768,      /* encoder.layer.0.attention.output.dense.bias */
    589824,   /* encoder.layer.0.attention.output.dense.weight */
    768,      /* encoder.layer.0.attention.self.value.bias */
    589824,   /* encoder.layer.0.attention.self.value.weight */
    768,      /* encoder.layer.0.attention.self.key.bias */
    589824,   /* encoder.layer.0.attention.self.key.weight */
    768,      /* encoder.layer.0.attention.self.query.bias */
    589824,   /* encoder.layer.0.attention.self.query.weight */
    768,      /* embeddings.LayerNorm.bias */
    768,      /* embeddings.LayerNorm.weight */
    1536,     /* embeddings.token_type_embeddings.weight */
    393216,   /* embeddings.position_embeddings.weight */
    23440896, /* embeddings.word_embeddings.weight */
};

#define CHORUS_BENCH_RESNET50_TENSORS 161
#define CHORUS_BENCH_RESNET50_ELEMS 25557032
#define CHORUS_BENCH_BERT_BASE_TENSORS 199
#define CHORUS_BENCH_BERT_BASE_ELEMS 109482240

#define CHORUS_BENCH_COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))
#ifdef __cplusplus
static_assert(CHORUS_BENCH_COUNT_OF(chorus_bench_resnet50_elems) == CHORUS_BENCH_RESNET50_TENSORS,
              "resnet50: 161 tensors");
static_assert(CHORUS_BENCH_COUNT_OF(chorus_bench_bert_base_elems) == CHORUS_BENCH_BERT_BASE_TENSORS,
              "bert-base: 199 tensors");
constexpr size_t chorus_bench_sum_elems(const size_t* elems, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += elems[i];
  return total;
}
static_assert(chorus_bench_sum_elems(chorus_bench_resnet50_elems, CHORUS_BENCH_RESNET50_TENSORS) ==
                  CHORUS_BENCH_RESNET50_ELEMS,
              "resnet50: 25,557,032 parameters");
static_assert(chorus_bench_sum_elems(chorus_bench_bert_base_elems,
                                     CHORUS_BENCH_BERT_BASE_TENSORS) ==
                  CHORUS_BENCH_BERT_BASE_ELEMS,
              "bert-base: 109,482,240 parameters");
#else
_Static_assert(CHORUS_BENCH_COUNT_OF(chorus_bench_resnet50_elems) == CHORUS_BENCH_RESNET50_TENSORS,
               "resnet50: 161 tensors");
_Static_assert(CHORUS_BENCH_COUNT_OF(chorus_bench_bert_base_elems) ==
                   CHORUS_BENCH_BERT_BASE_TENSORS,
               "bert-base: 199 tensors");
#endif

/* Every mix, for listing them (usage messages) and looking them up. */
static const chorus_bench_mix chorus_bench_mixes[] = {
    {"resnet50", CHORUS_BENCH_RESNET50_TENSORS, chorus_bench_resnet50_elems,
     CHORUS_BENCH_RESNET50_ELEMS},
    {"bert-base", CHORUS_BENCH_BERT_BASE_TENSORS, chorus_bench_bert_base_elems,
     CHORUS_BENCH_BERT_BASE_ELEMS},
};
#define CHORUS_BENCH_MIX_COUNT CHORUS_BENCH_COUNT_OF(chorus_bench_mixes)

/* The mix called `name`, or NULL. */
static inline const chorus_bench_mix* chorus_bench_find_mix(const char* name) {
  size_t i;
  if (!name) return NULL;
  for (i = 0; i < CHORUS_BENCH_MIX_COUNT; ++i)
    if (!strcmp(chorus_bench_mixes[i].name, name)) return &chorus_bench_mixes[i];
  return NULL;
}

/* Writes " NAME (N tensors)" for every mix (for usage and error messages). */
static inline void chorus_bench_print_mixes(FILE* out) {
  size_t i;
  for (i = 0; i < CHORUS_BENCH_MIX_COUNT; ++i)
    fprintf(out, " %s (%zu tensors)", chorus_bench_mixes[i].name, chorus_bench_mixes[i].count);
}

#endif /* CHORUS_BENCH_FUSION_MIXES_H */
