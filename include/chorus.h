/*
 * Chorus: collective communication for data-parallel training. C API.
 *
 * Every function returns a chorus_result_t (CHORUS_SUCCESS == 0) unless it is a
 * plain query. Every call with a deadline takes timeout_ms: 0 means "use
 * CHORUS_TIMEOUT", a negative value is rejected (no wait is ever unbounded).
 * After an error, chorus_comm_last_error(comm) describes it in words.
 *
 * One verdict per call: a collective (or message) that fails on one rank fails
 * on every rank taking part, with the same result code and the first failing
 * rank's message (marked "reported by rank N" where it was passed on), and the
 * communicator is then unusable everywhere. A peer that died, left (destroyed
 * its communicator), aborted, disagreed about the call or passed a bad
 * argument ends the others' wait at once, not at the deadline. That includes
 * CHORUS_ERR_INVALID_ARGUMENT: the peers may already wait in the call that the
 * refusing rank will never make, so a refused call fails the communicator.
 * Errors found before a communicator is known (a NULL handle or out-pointer)
 * concern nobody else and are only returned.
 */
#ifndef CHORUS_H
#define CHORUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHORUS_VERSION_MAJOR 0
#define CHORUS_VERSION_MINOR 1
#define CHORUS_VERSION_PATCH 0
#define CHORUS_VERSION \
  (CHORUS_VERSION_MAJOR * 10000 + CHORUS_VERSION_MINOR * 100 + CHORUS_VERSION_PATCH)

#if defined(__GNUC__)
#define CHORUS_API __attribute__((visibility("default")))
#else
#define CHORUS_API
#endif

typedef enum {
  CHORUS_SUCCESS = 0,
  CHORUS_ERR_INVALID_ARGUMENT = 1, /* null buffer, bad dtype/op/root, overlap */
  CHORUS_ERR_INVALID_USAGE = 2,    /* call on a destroyed/aborted communicator */
  CHORUS_ERR_TIMEOUT = 3,          /* a deadline expired */
  CHORUS_ERR_PEER_FAILURE = 4,     /* a peer rank died or closed its connection */
  CHORUS_ERR_MISMATCH = 5,         /* ranks issued different collectives/counts */
  CHORUS_ERR_IO = 6,               /* a system or network error */
  CHORUS_ERR_BOOTSTRAP = 7,        /* could not find or reach the store / peers */
  CHORUS_ERR_UNSUPPORTED = 8,      /* not available in this build or setting */
  CHORUS_ERR_ABORTED = 9,          /* the communicator was aborted */
  CHORUS_ERR_INTERNAL = 10,        /* an invariant of Chorus was violated (a bug) */
  CHORUS_ERR_NO_MEMORY = 11,       /* allocation failed */
  CHORUS_RESULT_COUNT_ = 12,
  CHORUS_RESULT_MAX_ENUM_ = 0x7fffffff /* makes every int a valid value (C++ callers) */
} chorus_result_t;

typedef enum {
  CHORUS_FLOAT32 = 0,
  CHORUS_FLOAT64 = 1,
  CHORUS_FLOAT16 = 2,
  CHORUS_BFLOAT16 = 3,
  CHORUS_INT8 = 4,
  CHORUS_UINT8 = 5,
  CHORUS_INT32 = 6,
  CHORUS_UINT32 = 7,
  CHORUS_INT64 = 8,
  CHORUS_UINT64 = 9,
  CHORUS_DTYPE_COUNT_ = 10,
  CHORUS_DTYPE_MAX_ENUM_ = 0x7fffffff /* a bad value from C is refused, not undefined */
} chorus_dtype_t;

typedef enum {
  CHORUS_SUM = 0,
  CHORUS_PROD = 1,
  CHORUS_MIN = 2,
  CHORUS_MAX = 3,
  CHORUS_AVG = 4,
  CHORUS_OP_COUNT_ = 5,
  CHORUS_OP_MAX_ENUM_ = 0x7fffffff
} chorus_op_t;

typedef struct chorus_comm* chorus_comm_t;
typedef struct chorus_request* chorus_request_t;

/* Explicit initialisation. Start with CHORUS_INIT_CONFIG_INITIALIZER. */
typedef struct {
  size_t size;            /* sizeof(chorus_init_config_t) */
  uint32_t version;       /* CHORUS_VERSION the caller was built with */
  int rank;               /* this process's rank, 0 <= rank < world_size */
  int world_size;         /* number of ranks */
  const char* store_addr; /* "host:port" of the rendezvous store */
  const char* job_token;  /* shared secret; NULL or "" disables the check */
  const char* transport;  /* NULL: CHORUS_TRANSPORT / automatic; or "tcp" */
} chorus_init_config_t;

#define CHORUS_INIT_CONFIG_INITIALIZER \
  { sizeof(chorus_init_config_t), CHORUS_VERSION, -1, 0, NULL, NULL, NULL }

CHORUS_API int chorus_version(void);
CHORUS_API const char* chorus_result_string(chorus_result_t result);

/* Reads CHORUS_* (set by chorusrun) or Open MPI / Slurm / torchrun / TF_CONFIG. */
CHORUS_API chorus_result_t chorus_init_from_env(chorus_comm_t* comm);
CHORUS_API chorus_result_t chorus_init(const chorus_init_config_t* config, chorus_comm_t* comm);
/* A rendezvous store supplied by the caller (a framework's own key-value
 * store, e.g. PyTorch's c10d::Store of a process group): chorus_init_with_store
 * meets the peers through it instead of opening a store at store_addr. Keys
 * are NUL-terminated strings; values are binary (value, length). Every
 * callback returns CHORUS_SUCCESS or an error code; may be called from any
 * thread, also after chorus_init_with_store has returned (communicators made
 * by chorus_comm_split keep using the store), until release is called.
 *   set:  stores value under key, replacing any earlier value.
 *   wait: returns once every one of the count keys exists; CHORUS_ERR_TIMEOUT
 *         when timeout_ms (always > 0) passes first.
 *   get:  the value of a key that exists (wait has seen it): calls
 *         deliver(sink, value, length) once before returning CHORUS_SUCCESS.
 *   add:  atomically adds delta to the decimal integer at key (0 when absent)
 *         and sets *result to the new value.
 *   last_error (may be NULL): words for the calling thread's last failed
 *         callback, quoted in Chorus's error message.
 *   release (may be NULL): called once, when no communicator uses the store
 *         any more (also when chorus_init_with_store fails). */
typedef struct {
  size_t size;   /* sizeof(chorus_store_ops_t) */
  void* context; /* passed to every callback */
  chorus_result_t (*set)(void* context, const char* key, const void* value, size_t length);
  chorus_result_t (*wait)(void* context, const char* const* keys, size_t count, int64_t timeout_ms);
  chorus_result_t (*get)(void* context, const char* key,
                         void (*deliver)(void* sink, const void* value, size_t length), void* sink);
  chorus_result_t (*add)(void* context, const char* key, int64_t delta, int64_t* result);
  const char* (*last_error)(void* context);
  void (*release)(void* context);
} chorus_store_ops_t;

/* As chorus_init, over the caller's store: config gives rank, world_size,
 * job_token and transport; config->store_addr is optional and only says which
 * network the peers share ("host:port" of any address they all reach, e.g. the
 * framework's store): this rank listens on its local address on the route
 * there (CHORUS_TCP_BIND_ADDR overrides; neither set: 127.0.0.1, one host
 * only). Every rank's communicators over one store must be made in the same
 * order. store is copied; its release is called even when this fails. */
CHORUS_API chorus_result_t chorus_init_with_store(const chorus_init_config_t* config,
                                                  const chorus_store_ops_t* store,
                                                  chorus_comm_t* comm);
/* Collective: waits (bounded by CHORUS_TIMEOUT) for outstanding work, says goodbye
 * to peers, frees everything. comm may be NULL. */
CHORUS_API chorus_result_t chorus_comm_destroy(chorus_comm_t comm);
/* Fails all outstanding and future operations on comm, locally and at peers. */
CHORUS_API chorus_result_t chorus_comm_abort(chorus_comm_t comm, const char* reason);
/* As chorus_comm_abort, with the result code (not CHORUS_SUCCESS) that the
 * operations fail with here and at every peer: for a framework that refuses a
 * call on one rank (its own argument checks) and must not leave the others
 * waiting in it. Afterwards chorus_comm_last_error(comm) holds the message. */
CHORUS_API chorus_result_t chorus_comm_fail(chorus_comm_t comm, chorus_result_t code,
                                            const char* reason);
CHORUS_API chorus_result_t chorus_comm_rank(chorus_comm_t comm, int* rank);
CHORUS_API chorus_result_t chorus_comm_size(chorus_comm_t comm, int* size);
/* The message of the last error of a call on comm made by this thread ("" if
 * none, or if the last call on comm from this thread succeeded): kept per
 * communicator and thread, so a call on another communicator leaves it as it
 * is. Valid until the next call on comm from this thread. comm may be NULL
 * (errors of chorus_init and of calls given no communicator). The errors of
 * chorus_wait / chorus_test are the request's communicator's. */
CHORUS_API const char* chorus_comm_last_error(chorus_comm_t comm);

/* Blocking collectives. In place (no separate input), per collective:
 *   allreduce: sendbuf == recvbuf
 *   reduce_scatter: recvbuf == sendbuf + rank * recvcount (this rank's block
 *     of the input receives the result)
 *   broadcast: one buffer
 *   allgather: sendbuf == recvbuf + rank * sendcount (this rank's block of
 *     recvbuf already holds its input); sendbuf == recvbuf is in place only
 *     on rank 0 and an overlap (CHORUS_ERR_INVALID_ARGUMENT) on the others
 *   reduce, gather, scatter, allgatherv, reduce_scatterv: as stated at each.
 * Any other overlap of the buffers is refused (CHORUS_ERR_INVALID_ARGUMENT). */
CHORUS_API chorus_result_t chorus_allreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                            int64_t timeout_ms);
/* Allreduce with options. Start the options with
 * CHORUS_ALLREDUCE_OPTIONS_INITIALIZER; options NULL: the defaults.
 *
 * wire_dtype: compression on the wire for a float32 allreduce (as Horovod's
 * fp16 compression and DDP's bf16/fp16 hooks, inside the runtime, for every
 * algorithm and transport). CHORUS_BFLOAT16 / CHORUS_FLOAT16: the data
 * travels as that type (half the bytes), every reduction step computes in
 * float32 and rounds to the wire type, and the result is converted back to
 * float32 (avg divides in float32); every rank's result is bit-identical to
 * every other's. Error: with values of one sign, relative to the exact
 * result, at most (1 + u)^n - 1 (n ranks; u = 2^-8 for bfloat16, 2^-11 for
 * float16; ~n * u), from one rounding of each input and of each of the
 * n - 1 partial sums; float16 also needs every input and partial sum within
 * its normal range (2^-14 to 65504 in magnitude).
 * CHORUS_FLOAT32: not compressed. CHORUS_WIRE_DTYPE_DEFAULT: as the
 * CHORUS_WIRE_DTYPE variable says (none, bf16, f16; which other dtypes and
 * collectives ignore). An explicit CHORUS_BFLOAT16 / CHORUS_FLOAT16 with a
 * dtype other than CHORUS_FLOAT32 is refused (CHORUS_ERR_INVALID_ARGUMENT).
 * Ranks must agree: a rank that compresses and one that does not fail with
 * CHORUS_ERR_MISMATCH. With one rank nothing travels and nothing is rounded. */
#define CHORUS_WIRE_DTYPE_DEFAULT ((chorus_dtype_t)CHORUS_DTYPE_COUNT_)
typedef struct {
  size_t size;               /* sizeof(chorus_allreduce_options_t) */
  chorus_dtype_t wire_dtype; /* CHORUS_WIRE_DTYPE_DEFAULT, CHORUS_FLOAT32, CHORUS_BFLOAT16,
                                CHORUS_FLOAT16 */
} chorus_allreduce_options_t;

#define CHORUS_ALLREDUCE_OPTIONS_INITIALIZER \
  { sizeof(chorus_allreduce_options_t), CHORUS_WIRE_DTYPE_DEFAULT }

CHORUS_API chorus_result_t chorus_allreduce_ex(chorus_comm_t comm, const void* sendbuf,
                                               void* recvbuf, size_t count, chorus_dtype_t dtype,
                                               chorus_op_t op,
                                               const chorus_allreduce_options_t* options,
                                               int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_broadcast(chorus_comm_t comm, void* buf, size_t count,
                                            chorus_dtype_t dtype, int root, int64_t timeout_ms);
/* recvbuf holds world_size * sendcount elements. */
CHORUS_API chorus_result_t chorus_allgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t sendcount, chorus_dtype_t dtype,
                                            int64_t timeout_ms);
/* sendbuf holds world_size * recvcount elements. */
CHORUS_API chorus_result_t chorus_reduce_scatter(chorus_comm_t comm, const void* sendbuf,
                                                 void* recvbuf, size_t recvcount,
                                                 chorus_dtype_t dtype, chorus_op_t op,
                                                 int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_barrier(chorus_comm_t comm, int64_t timeout_ms);
/* recvbuf (count elements) at root = the reduction of every rank's sendbuf;
 * recvbuf is ignored (may be NULL) elsewhere. At the root, sendbuf == recvbuf
 * is in place. */
CHORUS_API chorus_result_t chorus_reduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                         size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                         int root, int64_t timeout_ms);
/* root's recvbuf (world_size * sendcount elements) = every rank's sendbuf in
 * rank order; recvbuf is ignored elsewhere. In place at the root: sendbuf ==
 * recvbuf + root * sendcount. */
CHORUS_API chorus_result_t chorus_gather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                         size_t sendcount, chorus_dtype_t dtype, int root,
                                         int64_t timeout_ms);
/* Block r of root's sendbuf (world_size * recvcount elements) goes to rank r's
 * recvbuf; sendbuf is ignored elsewhere. In place at the root: recvbuf ==
 * sendbuf + root * recvcount. */
CHORUS_API chorus_result_t chorus_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                          size_t recvcount, chorus_dtype_t dtype, int root,
                                          int64_t timeout_ms);
/* Block j (count elements) of every rank's sendbuf goes to rank j, landing at
 * block (sender) of its recvbuf; both buffers hold world_size * count elements
 * and must not overlap. */
CHORUS_API chorus_result_t chorus_alltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                           size_t count, chorus_dtype_t dtype, int64_t timeout_ms);
/* Variable counts (every rank passes the same recvcounts, world_size entries):
 * allgatherv sends recvcounts[rank] elements and receives every rank's block
 * back to back in rank order (in place: sendbuf == recvbuf + the sum of the
 * counts before this rank's); reduce_scatterv reduces a sendbuf of sum(counts)
 * elements and keeps this rank's block (in place: recvbuf == sendbuf + that
 * offset). */
CHORUS_API chorus_result_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                             const size_t* recvcounts, chorus_dtype_t dtype,
                                             int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_reduce_scatterv(chorus_comm_t comm, const void* sendbuf,
                                                  void* recvbuf, const size_t* recvcounts,
                                                  chorus_dtype_t dtype, chorus_op_t op,
                                                  int64_t timeout_ms);

/* Non-blocking forms: the operation runs in order with the communicator's other
 * collectives; buffers must stay valid until the request completes. The deadline
 * is given to chorus_wait / counted from the call by CHORUS_TIMEOUT. */
CHORUS_API chorus_result_t chorus_iallreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                             size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                             chorus_request_t* request);
/* chorus_allreduce_ex's non-blocking form; the conversions run inside the
 * operation. options is read during the call only. */
CHORUS_API chorus_result_t chorus_iallreduce_ex(chorus_comm_t comm, const void* sendbuf,
                                                void* recvbuf, size_t count, chorus_dtype_t dtype,
                                                chorus_op_t op,
                                                const chorus_allreduce_options_t* options,
                                                chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ibroadcast(chorus_comm_t comm, void* buf, size_t count,
                                             chorus_dtype_t dtype, int root,
                                             chorus_request_t* request);
CHORUS_API chorus_result_t chorus_iallgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                             size_t sendcount, chorus_dtype_t dtype,
                                             chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ireduce_scatter(chorus_comm_t comm, const void* sendbuf,
                                                  void* recvbuf, size_t recvcount,
                                                  chorus_dtype_t dtype, chorus_op_t op,
                                                  chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ibarrier(chorus_comm_t comm, chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ireduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                          size_t count, chorus_dtype_t dtype, chorus_op_t op,
                                          int root, chorus_request_t* request);
CHORUS_API chorus_result_t chorus_igather(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                          size_t sendcount, chorus_dtype_t dtype, int root,
                                          chorus_request_t* request);
CHORUS_API chorus_result_t chorus_iscatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                           size_t recvcount, chorus_dtype_t dtype, int root,
                                           chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ialltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf,
                                            size_t count, chorus_dtype_t dtype,
                                            chorus_request_t* request);
/* recvcounts is copied: it need not outlive the call. */
CHORUS_API chorus_result_t chorus_iallgatherv(chorus_comm_t comm, const void* sendbuf,
                                              void* recvbuf, const size_t* recvcounts,
                                              chorus_dtype_t dtype, chorus_request_t* request);
CHORUS_API chorus_result_t chorus_ireduce_scatterv(chorus_comm_t comm, const void* sendbuf,
                                                   void* recvbuf, const size_t* recvcounts,
                                                   chorus_dtype_t dtype, chorus_op_t op,
                                                   chorus_request_t* request);

/* Point-to-point: count elements to / from rank peer of comm with a tag in
 * 0..CHORUS_TAG_MAX. Messages of one (sender, receiver, tag) are received in
 * the order they were sent; sizes must agree exactly (a different count or
 * dtype fails as CHORUS_ERR_MISMATCH). They take no collective sequence
 * number: they interleave freely with collectives. Any failure (a peer that
 * died, a mismatch, a deadline) aborts the communicator, as a collective's
 * does. A rank cannot send to itself. */
#define CHORUS_TAG_MAX 1048575
CHORUS_API chorus_result_t chorus_send(chorus_comm_t comm, const void* buf, size_t count,
                                       chorus_dtype_t dtype, int peer, int tag, int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_recv(chorus_comm_t comm, void* buf, size_t count,
                                       chorus_dtype_t dtype, int peer, int tag, int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_isend(chorus_comm_t comm, const void* buf, size_t count,
                                        chorus_dtype_t dtype, int peer, int tag,
                                        chorus_request_t* request);
CHORUS_API chorus_result_t chorus_irecv(chorus_comm_t comm, void* buf, size_t count,
                                        chorus_dtype_t dtype, int peer, int tag,
                                        chorus_request_t* request);

/* Collective over comm: ranks passing the same color form *newcomm, ranked by
 * (key, rank in comm); a rank passing CHORUS_UNDEFINED gets NULL. The new
 * communicator has its own sequence numbers, contract checks and
 * shared-memory domains, and shares comm's connections (no new rendezvous):
 * destroying comm first is allowed (the connections stay until the last
 * communicator made from them is destroyed); aborting either fails both. */
#define CHORUS_UNDEFINED (-1)
CHORUS_API chorus_result_t chorus_comm_split(chorus_comm_t comm, int color, int key,
                                             chorus_comm_t* newcomm);

/* Tensor fusion (as Horovod's engine and PyTorch DDP's buckets): hands one
 * named tensor to the communicator's fusion engine and returns at once; the
 * request completes once recvbuf holds the allreduce of every rank's sendbuf
 * of that name (in place: sendbuf == recvbuf). Ranks may submit their tensors
 * in any order: a background cycle (CHORUS_FUSION_CYCLE_MS) agrees on the
 * names pending on every rank, packs those of one dtype and op into buffers
 * of up to CHORUS_FUSION_BYTES and runs one allreduce per buffer. Names must
 * be unique among a rank's unfinished fused requests; every rank must submit
 * a name with the same count, dtype and op (else every pending request fails
 * with CHORUS_ERR_MISMATCH naming the tensor and both ranks). A tensor that
 * some ranks submitted and others did not is logged as a warning naming it
 * and the ranks lacking it every CHORUS_FUSION_STALL_S, and the pending
 * requests fail with CHORUS_ERR_TIMEOUT and that text at CHORUS_TIMEOUT.
 * Any failure stops the engine: every pending and later fused request fails
 * with it. The first fused call on a communicator sets the engine up with
 * its own communicator split from comm, in comm's call order as
 * chorus_comm_split would (without waiting for the peers): every rank's first
 * fused call must come at the same place among its collectives on comm.
 * Destroying comm shuts the engine down: tensors ready everywhere finish,
 * the rest fail (CHORUS_ERR_PEER_FAILURE naming the rank) on every rank.
 * CHORUS_TIMELINE=PATH writes each rank's engine activity as a Chrome trace
 * to PATH.rank<N>.json. */
CHORUS_API chorus_result_t chorus_fused_allreduce(chorus_comm_t comm, const char* name,
                                                  const void* sendbuf, void* recvbuf, size_t count,
                                                  chorus_dtype_t dtype, chorus_op_t op,
                                                  chorus_request_t* request);

/* The fusion engine's settings, for chorus_fusion_configure. A zero field
 * (CHORUS_WIRE_DTYPE_DEFAULT for wire_dtype) keeps the CHORUS_* value. */
typedef struct {
  size_t size;               /* sizeof(chorus_fusion_options_t) */
  double cycle_ms;           /* CHORUS_FUSION_CYCLE_MS */
  uint64_t fusion_bytes;     /* CHORUS_FUSION_BYTES */
  uint64_t alone_bytes;      /* CHORUS_FUSION_ALONE */
  double stall_s;            /* CHORUS_FUSION_STALL_S */
  chorus_dtype_t wire_dtype; /* float32 buckets on the wire: CHORUS_FLOAT32 (uncompressed),
                                CHORUS_BFLOAT16, CHORUS_FLOAT16 (CHORUS_WIRE_DTYPE) */
} chorus_fusion_options_t;
#define CHORUS_FUSION_OPTIONS_INITIALIZER \
  { sizeof(chorus_fusion_options_t), 0, 0, 0, 0, CHORUS_WIRE_DTYPE_DEFAULT }
/* Settles comm's fusion engine settings; only before its first fused call
 * (CHORUS_ERR_INVALID_USAGE after). fusion_bytes, alone_bytes and wire_dtype must be the
 * same on every rank (else the buckets' allreduces fail as a mismatch). */
CHORUS_API chorus_result_t chorus_fusion_configure(chorus_comm_t comm,
                                                   const chorus_fusion_options_t* options);

/* The fusion engine's counters (all zero before the first fused call). */
typedef struct {
  size_t size;          /* sizeof(chorus_fusion_stats_t), set by the caller */
  uint64_t cycles;      /* negotiation rounds */
  uint64_t fast_cycles; /* rounds that needed only the known-names fast path */
  uint64_t slow_cycles; /* rounds that exchanged names */
  uint64_t allreduces;  /* collective calls that reduced tensors */
  uint64_t tensors;     /* tensors reduced */
  uint64_t bytes;       /* bytes of the tensors reduced */
} chorus_fusion_stats_t;
CHORUS_API chorus_result_t chorus_fusion_stats(chorus_comm_t comm, chorus_fusion_stats_t* stats);

/* The mirrored strategy: synchronous data parallelism, as TensorFlow's
 * MirroredStrategy / MultiWorkerMirroredStrategy. Every rank holds a replica
 * of every variable and computes gradients on its own slice of the batch;
 * each step the gradients become their mean over the ranks and every rank
 * applies the same optimizer update, so the replicas stay identical:
 *
 *   chorus_mirrored_create(comm, NULL, &m);
 *   chorus_mirrored_add_variable(m, "fc1.weight", w, dw, n, CHORUS_FLOAT32);  ... every variable
 *   chorus_mirrored_broadcast_variables(m, 0);
 *   for each step:
 *     backward pass: chorus_mirrored_gradient_ready(m, "fc1.weight") as each gradient is done
 *     chorus_mirrored_reduce_gradients(m, 0);
 *     chorus_mirrored_apply(m, &optimizer);
 *     chorus_mirrored_end_step(m, 0);
 *
 * Variables must be registered in the same order, with the same names,
 * counts and dtypes, on every rank: the collectives pair them by position.
 * The strategy keeps the pointers: the variables and gradients must stay
 * valid until chorus_mirrored_destroy. The calls marked collective must be
 * made by every rank, at the same place among its collectives on comm.
 * Errors are comm's (chorus_comm_last_error(comm)); a refused argument fails
 * comm on every rank, as every refusal does (see the top of this file).
 * The calls of one strategy are serialised (gradient_ready may come from
 * other threads, e.g. backward hooks). */
typedef struct chorus_mirrored* chorus_mirrored_t;

typedef enum {
  CHORUS_OPTIMIZER_SGD = 0,      /* param -= lr * g */
  CHORUS_OPTIMIZER_MOMENTUM = 1, /* buf = momentum * buf + g; param -= lr * buf (nesterov:
                                    lr * (g + momentum * buf)) */
  CHORUS_OPTIMIZER_ADAM = 2,     /* torch.optim.Adam: bias-corrected moments, epsilon added
                                    after the square root */
  CHORUS_OPTIMIZER_KIND_COUNT_ = 3,
  CHORUS_OPTIMIZER_KIND_MAX_ENUM_ = 0x7fffffff
} chorus_optimizer_kind_t;

/* An optimizer, with PyTorch's torch.optim semantics (SGD, SGD with
 * momentum and dampening 0, Adam without amsgrad); g is the reduced
 * gradient plus weight_decay * param (L2, for every kind). Fields another
 * kind uses are ignored. Refused (CHORUS_ERR_INVALID_ARGUMENT): a negative
 * or non-finite learning_rate, momentum, epsilon or weight_decay, a beta
 * outside [0, 1), nesterov with a momentum of 0. Start it with
 * CHORUS_OPTIMIZER_OPTIONS_INITIALIZER. */
typedef struct {
  size_t size; /* sizeof(chorus_optimizer_options_t) */
  chorus_optimizer_kind_t kind;
  double learning_rate;
  double momentum; /* MOMENTUM: the buffer's decay (0: plain SGD) */
  int nesterov;    /* MOMENTUM: non-zero for Nesterov's look-ahead */
  double beta1;    /* ADAM: decay of the first moment */
  double beta2;    /* ADAM: decay of the second moment */
  double epsilon;  /* ADAM: added to the denominator after the square root */
  double weight_decay;
} chorus_optimizer_options_t;
#define CHORUS_OPTIMIZER_OPTIONS_INITIALIZER \
  { sizeof(chorus_optimizer_options_t), CHORUS_OPTIMIZER_SGD, 0.01, 0.0, 0, 0.9, 0.999, 1e-8, 0.0 }

/* Start with CHORUS_MIRRORED_OPTIONS_INITIALIZER. */
typedef struct {
  size_t size;        /* sizeof(chorus_mirrored_options_t) */
  int root;           /* the rank chorus_mirrored_broadcast_variables sends from */
  int use_fusion;     /* non-zero: gradients go through comm's fusion engine as they are
                         ready (chorus_fused_allreduce); 0: one non-blocking allreduce each,
                         started by chorus_mirrored_reduce_gradients in registration order */
  int check_replicas; /* chorus_mirrored_end_step checks the replicas every this many
                         steps; 0: never; -1: as CHORUS_CHECK_REPLICAS says (default 0) */
} chorus_mirrored_options_t;
#define CHORUS_MIRRORED_OPTIONS_INITIALIZER \
  { sizeof(chorus_mirrored_options_t), 0, 1, -1 }

/* A strategy over comm (options NULL: the defaults); local. Refused: a root
 * outside comm, check_replicas below -1. comm must outlive it. */
CHORUS_API chorus_result_t chorus_mirrored_create(chorus_comm_t comm,
                                                  const chorus_mirrored_options_t* options,
                                                  chorus_mirrored_t* out);
/* Registers a variable of count elements of dtype and its gradient buffer
 * (the same count and dtype; NULL: a variable that is not trained, only
 * broadcast and checked, e.g. a running statistic). Local. Refused: a NULL
 * or empty name, a name already registered, a NULL variable, a count of 0,
 * an unknown dtype, a gradient that is the variable itself. */
CHORUS_API chorus_result_t chorus_mirrored_add_variable(chorus_mirrored_t m, const char* name,
                                                        void* variable, void* gradient,
                                                        size_t count, chorus_dtype_t dtype);
/* Collective: every variable takes the root's values (a broadcast each, in
 * registration order). With use_fusion it also starts comm's fusion engine,
 * so that the first gradient_ready need not come at the same place among
 * comm's calls on every rank. */
CHORUS_API chorus_result_t chorus_mirrored_broadcast_variables(chorus_mirrored_t m,
                                                               int64_t timeout_ms);
/* The gradient of `name` is computed. With use_fusion it is handed to the
 * fusion engine at once (an in-place CHORUS_AVG fused allreduce named
 * "mirrored/<name>"), so that its reduction overlaps the rest of the
 * backward pass; ranks may call it in different orders. Without fusion it
 * is only recorded. Returns at once. Refused: an unknown name, a variable
 * without a gradient, a gradient already handed over this step (a step
 * ends at chorus_mirrored_apply or chorus_mirrored_end_step). Until the
 * reduction is waited for (chorus_mirrored_reduce_gradients) the library
 * writes the gradient. */
CHORUS_API chorus_result_t chorus_mirrored_gradient_ready(chorus_mirrored_t m, const char* name);
/* Collective: hands over every gradient not handed over yet this step and
 * waits until every gradient holds the mean of every rank's (bit-identical
 * on every rank). CHORUS_ERR_TIMEOUT at timeout_ms leaves the reductions
 * running; calling it again waits again. Any other failure is every
 * rank's, as for a fused allreduce or a collective. */
CHORUS_API chorus_result_t chorus_mirrored_reduce_gradients(chorus_mirrored_t m,
                                                            int64_t timeout_ms);
/* Local: one update of every variable that has a gradient, with that
 * (reduced) gradient; the optimizer's state (momentum buffer, Adam's
 * moments and step count) is kept per variable. The kind is fixed by the
 * first call; the other fields may change from step to step (schedules).
 * Refused (nothing is updated): options NULL, of a smaller size or out of
 * range, an unknown or another kind, a variable with a gradient that is not
 * CHORUS_FLOAT32 or CHORUS_FLOAT64; CHORUS_ERR_INVALID_USAGE (comm goes on)
 * when a gradient has not been reduced this step. */
CHORUS_API chorus_result_t chorus_mirrored_apply(chorus_mirrored_t m,
                                                 const chorus_optimizer_options_t* optimizer);
/* Ends a step: counts it, and every check_replicas steps runs
 * chorus_mirrored_check_replicas (then collective: every rank's step count
 * must agree). */
CHORUS_API chorus_result_t chorus_mirrored_end_step(chorus_mirrored_t m, int64_t timeout_ms);
/* Collective: one allgather of an xxHash64 digest of every variable's bytes
 * (and of the registration: names, counts, dtypes, order). If any rank
 * differs from rank 0, every rank returns CHORUS_ERR_MISMATCH with the same
 * message naming the first diverged variable in registration order and the
 * lowest rank that differs: "replicas diverged at step 12: variable
 * 'fc1.weight' on rank 2 differs from rank 0 (digest 0x... vs 0x...)".
 * comm stays usable (chorus_mirrored_broadcast_variables restores the
 * replicas). */
CHORUS_API chorus_result_t chorus_mirrored_check_replicas(chorus_mirrored_t m, int64_t timeout_ms);
/* Waits (bounded by CHORUS_TIMEOUT) for reductions still running, then
 * frees m. m may be NULL. After chorus_comm_destroy(comm) it only frees. */
CHORUS_API chorus_result_t chorus_mirrored_destroy(chorus_mirrored_t m);

/* The parameter-server strategy: asynchronous data parallelism, as
 * TensorFlow's ParameterServerStrategy. The last `servers` ranks of comm are
 * parameter servers (chorusrun --ps K makes them TF_CONFIG's ps tasks); rank
 * 0 is the chief, the others workers. Variables are placed whole on the
 * servers by size; each server keeps its variables' values and optimizer
 * state and applies the updates the workers push:
 *
 *   chorus_ps_create(comm, &options, &ps);                      collective
 *   chorus_ps_add_variable(ps, "fc1.weight", w, dw, n, CHORUS_FLOAT32);  every rank, same order
 *                                         (servers pass NULL data and gradient)
 *   chorus_ps_start(ps, 0);                                     collective
 *   server:  chorus_ps_serve(ps, &optimizer);   until every worker finished or failed
 *   worker:  for each step: chorus_ps_pull(ps, 0); compute dw; chorus_ps_push(ps, 0);
 *            chorus_ps_finish(ps, 0);
 *   chorus_ps_destroy(ps);
 *
 * Modes: ASYNC applies every push at once and pulls return the values as
 * they are; SYNC starts step s once the updates of steps before it are
 * applied and applies the mean of the gradients every live worker pushed
 * for step s (as one process on the concatenated batch); BOUNDED is ASYNC
 * where a worker starts step s only once every live worker has pushed
 * s - max_staleness steps.
 *
 * The strategy has connections of its own (TCP), on which a worker's death
 * fails nothing but that worker's requests: the servers count it out (a SYNC
 * step completes without it), every later reply reports it, the chief logs
 * it and chorus_ps_failed_workers lists it, and training goes on. A server
 * that dies fails the workers' next calls with CHORUS_ERR_PEER_FAILURE
 * naming it ("parameter server 0 (rank 3) failed: ..."). comm itself is
 * used only by chorus_ps_create and chorus_ps_start. Errors are comm's
 * (chorus_comm_last_error(comm)); only the collective calls fail comm on
 * every rank when they refuse an argument. Variables and gradients must
 * stay valid until chorus_ps_destroy. float32 and float64 only; 64 ranks at
 * most. */
typedef struct chorus_ps* chorus_ps_t;

typedef enum {
  CHORUS_PS_ASYNC = 0,
  CHORUS_PS_SYNC = 1,
  CHORUS_PS_BOUNDED = 2,
  CHORUS_PS_MODE_COUNT_ = 3,
  CHORUS_PS_MODE_MAX_ENUM_ = 0x7fffffff
} chorus_ps_mode_t;

typedef enum {
  CHORUS_PS_CHIEF = 0,
  CHORUS_PS_WORKER = 1,
  CHORUS_PS_SERVER = 2,
  CHORUS_PS_ROLE_MAX_ENUM_ = 0x7fffffff
} chorus_ps_role_t;

/* Start with CHORUS_PS_OPTIONS_INITIALIZER. */
typedef struct {
  size_t size;           /* sizeof(chorus_ps_options_t) */
  int servers;           /* the last this many ranks serve; 1 or more, fewer than the ranks;
                            0: as many as TF_CONFIG has ps tasks (chorusrun --ps K sets it) */
  chorus_ps_mode_t mode; /* ASYNC, SYNC or BOUNDED */
  int max_staleness;     /* BOUNDED: steps a worker may run ahead of the slowest (0 or more) */
} chorus_ps_options_t;
#define CHORUS_PS_OPTIONS_INITIALIZER \
  { sizeof(chorus_ps_options_t), 1, CHORUS_PS_ASYNC, 0 }

/* Collective over comm; connects every rank of comm to every other. options
 * NULL: the defaults. comm must outlive ps. */
CHORUS_API chorus_result_t chorus_ps_create(chorus_comm_t comm, const chorus_ps_options_t* options,
                                            chorus_ps_t* out);
/* This rank's role and its index among the ranks of that role. */
CHORUS_API chorus_result_t chorus_ps_role(chorus_ps_t ps, chorus_ps_role_t* role, int* index);
CHORUS_API chorus_result_t chorus_ps_add_variable(chorus_ps_t ps, const char* name, void* data,
                                                  void* gradient, size_t count,
                                                  chorus_dtype_t dtype);
/* Collective over comm: every server gets the chief's values. */
CHORUS_API chorus_result_t chorus_ps_start(chorus_ps_t ps, int64_t timeout_ms);
/* Workers: every variable's value from the servers into data (SYNC, BOUNDED:
 * once this step may start); every gradient to them (the step counts up);
 * the last call, which tells the servers this worker is done. */
CHORUS_API chorus_result_t chorus_ps_pull(chorus_ps_t ps, int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_ps_push(chorus_ps_t ps, int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_ps_finish(chorus_ps_t ps, int64_t timeout_ms);
/* Servers: answers the workers until each has finished or failed. */
CHORUS_API chorus_result_t chorus_ps_serve(chorus_ps_t ps,
                                           const chorus_optimizer_options_t* optimizer);
/* The ranks of the workers the servers reported failed (as of this rank's
 * last reply): up to capacity of them into ranks; *count gets how many. */
CHORUS_API chorus_result_t chorus_ps_failed_workers(chorus_ps_t ps, int* ranks, int capacity,
                                                    int* count);
/* The chief: every variable's current value on the servers to a checkpoint
 * file, or from one to the servers and the chief's own data (its variables
 * must match the file's in names, order, dtypes and counts). */
CHORUS_API chorus_result_t chorus_ps_save(chorus_ps_t ps, const char* path, int64_t timeout_ms);
CHORUS_API chorus_result_t chorus_ps_restore(chorus_ps_t ps, const char* path, int64_t timeout_ms);
/* Closes the strategy's connections and frees ps. ps may be NULL. */
CHORUS_API chorus_result_t chorus_ps_destroy(chorus_ps_t ps);

/* Waits for completion; returns the operation's result. timeout_ms 0: as long as
 * the operation's own deadline (CHORUS_TIMEOUT from its start) and 10 s more, so
 * that an operation that times out returns its own CHORUS_ERR_TIMEOUT (and is
 * freed). On a CHORUS_ERR_TIMEOUT of the wait itself the
 * request stays valid and may be waited on again (the operation goes on); so it
 * does when the arguments are refused (request NULL, timeout_ms negative).
 * Otherwise it is freed and *request set to NULL. A request outliving its
 * communicator gets its own result if it had finished when the communicator
 * was destroyed (destroy waits for outstanding work), else
 * CHORUS_ERR_INVALID_USAGE, and is freed either way. */
CHORUS_API chorus_result_t chorus_wait(chorus_request_t* request, int64_t timeout_ms);
/* Sets *done. When done, returns the operation's result and frees the request
 * (a request whose communicator was destroyed is done). */
CHORUS_API chorus_result_t chorus_test(chorus_request_t* request, int* done);
/* Waits for every request of requests[0, count), as MPI_Waitall: NULL entries
 * count as finished. timeout_ms 0: each request as chorus_wait(request, 0)
 * waits for it; otherwise one deadline, timeout_ms from the call, for all of
 * them (a request still running then gets CHORUS_ERR_TIMEOUT and stays valid,
 * and the ones after it are still collected if they have finished). Every
 * request that finished is freed and set to NULL. results (NULL, or count
 * entries) gets each request's result (CHORUS_SUCCESS for a NULL entry).
 * Returns CHORUS_SUCCESS, or the result of the first request in array order
 * that did not succeed; chorus_comm_last_error of each request's
 * communicator then has the message of its first request that failed. The
 * arguments refused (requests NULL with count > 0, a request listed twice,
 * timeout_ms negative): nothing is waited for or freed. */
CHORUS_API chorus_result_t chorus_wait_all(size_t count, chorus_request_t* requests,
                                           int64_t timeout_ms, chorus_result_t* results);
/* As MPI_Testall: *done = 1 when every request of requests[0, count) has
 * finished, and then finishes them all as chorus_wait_all does (results,
 * freed, the first failure returned); else *done = 0 and none is freed. */
CHORUS_API chorus_result_t chorus_test_all(size_t count, chorus_request_t* requests, int* done,
                                           chorus_result_t* results);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_H */
