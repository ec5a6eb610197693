/*
 * A program written for NCCL, in the shape of NCCL's user-guide examples, on host memory: it is
 * compiled against CUDA's nccl.h and linked against a libnccl.so.2 (coll's drop-in, or NVIDIA's
 * with coll's folder first in LD_LIBRARY_PATH or preloaded). Every exported entry point is called;
 * bad input must be answered by ncclInvalidArgument/ncclInvalidUsage and a sentence.
 *
 *   nccl_program threads N   one process drives N ranks (ncclCommInitAll with no devices), groups
 *   nccl_program mpi         one rank per process under mpirun (the unique id through MPI_Bcast)
 *
 * COLLTEST_EXPECT_NCCL_LIB=path: fail unless ncclAllReduce comes from a library whose file name
 * contains path (the interposition tests check which library really ran).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef NCCL_PROGRAM_MPI
#include <mpi.h>
#endif

static int failures = 0;

#define CHECK(cmd)                                                                               \
  do {                                                                                           \
    ncclResult_t r_ = (cmd);                                                                     \
    if (r_ != ncclSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #cmd, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                           \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

#define EXPECT(cond, ...)                                               \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

/* A refusal: the expected code, and a sentence containing words. */
static void refused(ncclResult_t got, ncclResult_t want, ncclComm_t comm, const char* words, const char* what) {
  const char* text = ncclGetLastError(comm);
  EXPECT(got == want, "%s: got %d (%s), want %d", what, (int)got, ncclGetErrorString(got), (int)want);
  EXPECT(text && strstr(text, words), "%s: the sentence \"%s\" lacks \"%s\"", what, text ? text : "(null)", words);
}

static void checkLibrary(void) {
  const char* want = getenv("COLLTEST_EXPECT_NCCL_LIB");
  Dl_info info;
  if (!want) return;
  if (!dladdr((void*)&ncclAllReduce, &info) || !info.dli_fname || !strstr(info.dli_fname, want)) {
    fprintf(stderr, "ncclAllReduce comes from %s, not from a library matching %s\n",
            info.dli_fname ? info.dli_fname : "(unknown)", want);
    exit(1);
  }
  printf("nccl_program: ncclAllReduce from %s\n", info.dli_fname);
}

static float value(int rank, size_t i) { return (float)(rank * 3 + (int)(i % 7)); }

/* The collectives of rank r of n, its calls made by whoever drives it (inside a group or not). */
typedef struct {
  float *in, *out, *blocks, *gathered, *p2p;
  size_t count;
} Buffers;

static Buffers makeBuffers(int rank, int n, size_t count) {
  Buffers b;
  size_t i;
  b.count = count;
  b.in = malloc(count * n * sizeof(float));
  b.out = malloc(count * n * sizeof(float));
  b.blocks = malloc(count * n * sizeof(float));
  b.gathered = malloc(count * n * sizeof(float));
  b.p2p = malloc(count * sizeof(float));
  for (i = 0; i < count * n; ++i) b.in[i] = value(rank, i);
  return b;
}

static void freeBuffers(Buffers* b) { free(b->in), free(b->out), free(b->blocks), free(b->gathered), free(b->p2p); }

static void poison(float* p, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = -12345.0f;
}

/* Each step: issue(rank) for every rank (one thread in a group, or one process each), then check(rank). */
enum Step {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kRing,
  kPreMul,
  kSteps
};
static const char* kNames[] = {"AllReduce", "Broadcast", "Reduce",  "AllGather",      "ReduceScatter",
                               "AlltoAll",  "Gather",    "Scatter", "Send/Recv ring", "PreMulSum"};

static void issue(enum Step s, ncclComm_t comm, int rank, int n, Buffers* b, ncclRedOp_t premul) {
  size_t c = b->count;
  int root = 1 % n;
  switch (s) {
    case kAllReduce:
      poison(b->out, c);
      CHECK(ncclAllReduce(b->in, b->out, c, ncclFloat, ncclSum, comm, NULL));
      break;
    case kBroadcast:
      poison(b->out, c);
      if (rank == root) memcpy(b->out, b->in, c * sizeof(float));
      CHECK(ncclBcast(b->out, c, ncclFloat, root, comm, NULL));
      break;
    case kReduce:
      poison(b->out, c);
      CHECK(ncclReduce(b->in, b->out, c, ncclFloat, ncclMax, root, comm, NULL));
      break;
    case kAllGather:
      poison(b->gathered, c * n);
      CHECK(ncclAllGather(b->in, b->gathered, c, ncclFloat, comm, NULL));
      break;
    case kReduceScatter:
      poison(b->out, c);
      CHECK(ncclReduceScatter(b->in, b->out, c, ncclFloat, ncclSum, comm, NULL));
      break;
    case kAlltoAll:
      poison(b->blocks, c * n);
      CHECK(ncclAlltoAll(b->in, b->blocks, c, ncclFloat, comm, NULL));
      break;
    case kGather:
      poison(b->gathered, c * n);
      CHECK(ncclGather(b->in, b->gathered, c, ncclFloat, root, comm, NULL));
      break;
    case kScatter:
      poison(b->out, c);
      CHECK(ncclScatter(b->in, b->out, c, ncclFloat, root, comm, NULL));
      break;
    case kRing:
      poison(b->p2p, c);
      CHECK(ncclGroupStart());
      CHECK(ncclSend(b->in, c, ncclFloat, (rank + 1) % n, comm, NULL));
      CHECK(ncclRecv(b->p2p, c, ncclFloat, (rank + n - 1) % n, comm, NULL));
      CHECK(ncclGroupEnd());
      break;
    case kPreMul:
      poison(b->out, c);
      CHECK(ncclAllReduce(b->in, b->out, c, ncclFloat, premul, comm, NULL));
      break;
    default:
      break;
  }
}

static void check(enum Step s, int rank, int n, Buffers* b) {
  size_t c = b->count, i;
  int root = 1 % n, r;
  for (i = 0; i < c * n; ++i) {
    float want = 0, got = 0;
    size_t j = i % c;
    int block = (int)(i / c);
    if (i >= c && s != kAllGather && s != kAlltoAll && !(s == kGather && rank == root)) break;
    switch (s) {
      case kAllReduce:
        for (r = 0; r < n; ++r) want += value(r, j);
        got = b->out[i];
        break;
      case kBroadcast:
        want = value(root, j), got = b->out[i];
        break;
      case kReduce:
        if (rank != root) continue;
        want = value(n - 1, j), got = b->out[i];
        break;
      case kAllGather:
      case kGather:
        if (s == kGather && rank != root) continue;
        want = value(block, j), got = b->gathered[i];
        break;
      case kReduceScatter:
        for (r = 0; r < n; ++r) want += value(r, (size_t)rank * c + j);
        got = b->out[i];
        break;
      case kAlltoAll:
        want = value(block, (size_t)rank * c + j), got = b->blocks[i];
        break;
      case kScatter:
        want = value(root, (size_t)rank * c + j), got = b->out[i];
        break;
      case kRing:
        want = value((rank + n - 1) % n, j), got = b->p2p[i];
        break;
      case kPreMul:
        for (r = 0; r < n; ++r) want += 2.0f * value(r, j);
        got = b->out[i];
        break;
      default:
        break;
    }
    if (got != want) {
      EXPECT(got == want, "%s rank %d/%d element %zu: got %g want %g", kNames[s], rank, n, i, got, want);
      return;
    }
  }
}

/* float8 e4m3 (NCCL's ncclFloat8e4m3) on the ncomms communicators this thread drives (one rank
 * each, of nranks): 1.0 is 0x38, and the sum over the ranks is nranks. */
static void float8Sum(ncclComm_t* comms, int ncomms, int nranks) {
  static const unsigned char codes[] = {0, 0x38, 0x40, 0x44, 0x48, 0x4a, 0x4c, 0x4e, 0x50};
  unsigned char f8[8][5];
  int r;
  if (ncomms > 8 || nranks > 8) return;
  for (r = 0; r < ncomms; ++r) {
    memset(f8[r], 0x38, 4);
    f8[r][4] = 0x5a; /* a guard */
  }
  CHECK(ncclGroupStart());
  for (r = 0; r < ncomms; ++r) CHECK(ncclAllReduce(f8[r], f8[r], 4, ncclFloat8e4m3, ncclSum, comms[r], NULL));
  CHECK(ncclGroupEnd());
  for (r = 0; r < ncomms; ++r)
    EXPECT(f8[r][0] == codes[nranks] && f8[r][3] == codes[nranks] && f8[r][4] == 0x5a,
           "float8 all-reduce over %d ranks gave 0x%x", nranks, f8[r][0]);
}

/* What every program can check on one communicator, whoever drives it: refusals with sentences. */
static void refusals(ncclComm_t comm) {
  float x[4] = {0};
  void* handle = NULL;
  ncclWindow_t win = NULL;
  void* mem = NULL;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  int version = 0, count = 0, rank = -1, dev = 0;
  ncclResult_t async = ncclInternalError;
  CHECK(ncclGetVersion(&version));
  /* coll's drop-in implements NCCL 2.30.7's API: at least the header's. */
  EXPECT(version >= NCCL_VERSION_CODE, "ncclGetVersion %d, nccl.h %d", version, NCCL_VERSION_CODE);
  CHECK(ncclCommCount(comm, &count));
  CHECK(ncclCommUserRank(comm, &rank));
  EXPECT(count > 0 && rank >= 0 && rank < count, "count %d rank %d", count, rank);
  CHECK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess, "async error %d", (int)async);
  refused(ncclCommCuDevice(comm, &dev), ncclInvalidUsage, comm, "host-only", "ncclCommCuDevice on a host communicator");
  refused(ncclAllReduce(x, x, 4, (ncclDataType_t)42, ncclSum, comm, NULL), ncclInvalidArgument, comm, "datatype 42",
          "an unknown type");
  refused(ncclAllReduce(x, x, 4, ncclFloat, (ncclRedOp_t)77, comm, NULL), ncclInvalidArgument, comm, "op 77",
          "an unknown op");
  refused(ncclBroadcast(x, x, 4, ncclFloat, count, comm, NULL), ncclInvalidArgument, comm, "root",
          "a root out of range");
  refused(ncclGather(x, x, 1, ncclFloat, -1, comm, NULL), ncclInvalidArgument, comm, "root -1", "gather root -1");
  refused(ncclSend(NULL, 4, ncclFloat, 0, comm, NULL), ncclInvalidArgument, comm, "NULL", "a NULL send buffer");
  /* Registration succeeds for any valid buffer; a handle is released once. */
  CHECK(ncclCommRegister(comm, x, sizeof(x), &handle));
  CHECK(ncclCommDeregister(comm, handle));
  refused(ncclCommDeregister(comm, handle), ncclInvalidArgument, comm, "not registered", "a second deregister");
  refused(ncclCommRegister(comm, x, sizeof(x), NULL), ncclInvalidArgument, comm, "handle is NULL", "no handle");
  /* Windows: the single-rank local part here (every rank of a clique registers in the tests with
   * collectives: tests/nccl/pynccl_shape.py). */
  if (count == 1) {
    CHECK(ncclCommWindowRegister(comm, x, sizeof(x), &win, NCCL_WIN_COLL_SYMMETRIC));
    CHECK(ncclCommWindowDeregister(comm, win));
  }
  refused(ncclCommWindowRegister(comm, x, sizeof(x), &win, 0x100), ncclInvalidArgument, comm, "flags",
          "unknown window flags");
  /* ncclMemAlloc: host memory here (no GPU), usable and freed once. */
  CHECK(ncclMemAlloc(&mem, 4096));
  EXPECT(mem != NULL && ((size_t)mem & 4095) == 0, "ncclMemAlloc gave %p", mem);
  if (mem) memset(mem, 0x5a, 4096);
  CHECK(ncclMemFree(mem));
  refused(ncclMemFree(x), ncclInvalidArgument, NULL, "not allocated by", "freeing memory ncclMemAlloc did not give");
  refused(ncclCommRevoke(comm, 3), ncclInvalidArgument, comm, "revokeFlags=3", "revoke with flags");
  /* Simulated: the tuner's estimate, nothing runs, the group is closed. */
  x[0] = -7.0f;
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(x, x + 2, 2, ncclFloat, ncclSum, comm, NULL));
  CHECK(ncclGroupSimulateEnd(&sim));
  /* One rank moves nothing: 0; more: the tuner's positive prediction. */
  EXPECT(count == 1 ? sim.estimatedTime == 0 : sim.estimatedTime > 0, "estimated time %g on %d ranks",
         (double)sim.estimatedTime, count);
  EXPECT(x[2] == 0.0f, "a simulated all-reduce ran");
  refused(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, NULL, "outside a group", "simulate outside a group");
  /* NCCL's own strings (frameworks print them, and some match the remote error's). */
  EXPECT(
      strcmp(ncclGetErrorString(ncclInvalidArgument), "invalid argument (run with NCCL_DEBUG=WARN for details)") == 0,
      "ncclGetErrorString: %s", ncclGetErrorString(ncclInvalidArgument));
  EXPECT(strcmp(ncclGetErrorString(ncclRemoteError), "remote process exited or there was a network error") == 0,
         "ncclGetErrorString: %s", ncclGetErrorString(ncclRemoteError));
  EXPECT(strcmp(ncclGetErrorString((ncclResult_t)8), "timeout") == 0, "ncclGetErrorString(8): %s",
         ncclGetErrorString((ncclResult_t)8));
}

static void refusedConfigs(void) {
  ncclComm_t comm = NULL, none = NULL;
  ncclUniqueId id;
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER, fresh = NCCL_CONFIG_INITIALIZER;
  CHECK(ncclGetUniqueId(&id));
  bad.magic = 0x1234;
  refused(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, NULL, "magic", "a config's magic");
  bad.magic = fresh.magic;
  bad.blocking = 2;
  refused(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, NULL, "config.blocking=2", "blocking 2");
  bad.blocking = 1;
  bad.minCTAs = 8, bad.maxCTAs = 2;
  refused(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, NULL, "config.minCTAs=8",
          "minCTAs > maxCTAs");
  EXPECT(comm == NULL, "a refused init wrote the communicator");
  refused(ncclCommInitRankScalable(&comm, 1, 0, 0, &id, NULL), ncclInvalidArgument, NULL, "nId=0", "no ids");
  refused(ncclCommShrink(comm, NULL, 0, &none, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument, NULL,
          "communicator is NULL", "shrink of no communicator");
}

/* The last rank of a new clique goes away (its communicator aborted); the survivors shrink, in
 * one group driven by this thread, and reduce on the shrunk communicators. */
static void shrinkAfterLoss(int n) {
  ncclComm_t* comms = calloc(n, sizeof(ncclComm_t));
  ncclComm_t* shrunk = calloc(n, sizeof(ncclComm_t));
  float* v = calloc((size_t)n * 64, sizeof(float));
  int lost = n - 1, r, count = 0;
  size_t i;
  CHECK(ncclCommInitAll(comms, n, NULL));
  CHECK(ncclCommAbort(comms[lost]));
  CHECK(ncclGroupStart());
  for (r = 0; r < lost; ++r) CHECK(ncclCommShrink(comms[r], &lost, 1, &shrunk[r], NULL, NCCL_SHRINK_ABORT));
  CHECK(ncclGroupEnd());
  for (i = 0; i < (size_t)lost * 64; ++i) v[i] = (float)(i / 64 + 1);
  CHECK(ncclGroupStart());
  for (r = 0; r < lost; ++r) CHECK(ncclAllReduce(v + r * 64, v + r * 64, 64, ncclFloat, ncclSum, shrunk[r], NULL));
  CHECK(ncclGroupEnd());
  for (r = 0; r < lost; ++r) {
    CHECK(ncclCommCount(shrunk[r], &count));
    EXPECT(count == lost, "shrunk communicator of %d ranks, want %d", count, lost);
    EXPECT(v[r * 64 + 63] == (float)(lost * (lost + 1) / 2), "shrunk all-reduce on rank %d: %g", r, v[r * 64 + 63]);
  }
  for (r = 0; r < lost; ++r) CHECK(ncclCommDestroy(shrunk[r]));
  for (r = 0; r < lost; ++r) CHECK(ncclCommDestroy(comms[r]));
  free(comms), free(shrunk), free(v);
}

static int runThreads(int n) {
  ncclComm_t* comms = calloc(n, sizeof(ncclComm_t));
  ncclComm_t* halves = calloc(n, sizeof(ncclComm_t));
  Buffers* b = calloc(n, sizeof(Buffers));
  ncclRedOp_t* premul = calloc(n, sizeof(ncclRedOp_t));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  float two = 2.0f;
  int r, s;
  size_t counts[] = {1, 7, 4099};
  size_t k;
  CHECK(ncclCommInitAll(comms, n, NULL));
  for (r = 0; r < n; ++r)
    CHECK(ncclRedOpCreatePreMulSum(&premul[r], &two, ncclFloat, ncclScalarHostImmediate, comms[r]));
  for (k = 0; k < sizeof(counts) / sizeof(counts[0]); ++k) {
    for (r = 0; r < n; ++r) b[r] = makeBuffers(r, n, counts[k]);
    for (s = 0; s < kSteps; ++s) {
      /* One thread drives every rank: the calls of all ranks in one group (NCCL's single-process example). */
      CHECK(ncclGroupStart());
      for (r = 0; r < n; ++r) issue((enum Step)s, comms[r], r, n, &b[r], premul[r]);
      CHECK(ncclGroupEnd());
      for (r = 0; r < n; ++r) check((enum Step)s, r, n, &b[r]);
    }
    for (r = 0; r < n; ++r) freeBuffers(&b[r]);
  }
  for (r = 0; r < n; ++r) CHECK(ncclRedOpDestroy(premul[r], comms[r]));
  /* Splits in one group: even and odd ranks, then an all-reduce in each half. */
  cfg.commName = "halves";
  CHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) CHECK(ncclCommSplit(comms[r], r % 2, r, &halves[r], &cfg));
  CHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) b[r] = makeBuffers(r, n, 5);
  CHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) CHECK(ncclAllReduce(b[r].in, b[r].out, 5, ncclFloat, ncclSum, halves[r], NULL));
  CHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) {
    int q;
    float want = 0;
    for (q = r % 2; q < n; q += 2) want += value(q, 3);
    EXPECT(b[r].out[3] == want, "split half of rank %d: got %g want %g", r, b[r].out[3], want);
    freeBuffers(&b[r]);
  }
  refusals(comms[0]);
  float8Sum(comms, n, n);
  refusedConfigs();
  if (n >= 2) shrinkAfterLoss(n);
  CHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) CHECK(ncclCommFinalize(halves[r]));
  CHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) CHECK(ncclCommDestroy(halves[r]));
  CHECK(ncclGroupStart());
  for (r = 0; r < n; ++r) CHECK(ncclCommFinalize(comms[r]));
  CHECK(ncclGroupEnd());
  for (r = 0; r < n; ++r) CHECK(ncclCommDestroy(comms[r]));
  free(comms), free(halves), free(b), free(premul);
  return failures;
}

#ifdef NCCL_PROGRAM_MPI
static int runMpi(void) {
  int rank, n, s;
  ncclUniqueId ids[2];
  ncclComm_t comm, scalable;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  ncclRedOp_t premul;
  float two = 2.0f;
  Buffers b;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (rank == 0) CHECK(ncclGetUniqueId(&ids[0]));
  MPI_Bcast(&ids[0], sizeof(ncclUniqueId), MPI_BYTE, 0, MPI_COMM_WORLD);
  cfg.commName = "mpi";
  cfg.blocking = 1;
  CHECK(ncclCommInitRankConfig(&comm, n, ids[0], rank, &cfg));
  CHECK(ncclRedOpCreatePreMulSum(&premul, &two, ncclFloat, ncclScalarHostImmediate, comm));
  b = makeBuffers(rank, n, 1001);
  for (s = 0; s < kSteps; ++s) {
    issue((enum Step)s, comm, rank, n, &b, premul);
    check((enum Step)s, rank, n, &b);
  }
  CHECK(ncclRedOpDestroy(premul, comm));
  /* Scalable init: two new ids, made by rank 0 and by the last rank, every rank passes both. */
  if (rank == 0) CHECK(ncclGetUniqueId(&ids[0]));
  MPI_Bcast(&ids[0], sizeof(ncclUniqueId), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rank == n - 1) CHECK(ncclGetUniqueId(&ids[1]));
  MPI_Bcast(&ids[1], sizeof(ncclUniqueId), MPI_BYTE, n - 1, MPI_COMM_WORLD);
  CHECK(ncclCommInitRankScalable(&scalable, n, rank, 2, ids, NULL));
  issue(kAllReduce, scalable, rank, n, &b, ncclSum);
  check(kAllReduce, rank, n, &b);
  refusals(comm);
  float8Sum(&comm, 1, n);
  freeBuffers(&b);
  CHECK(ncclCommFinalize(scalable));
  CHECK(ncclCommDestroy(scalable));
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
  return failures;
}
#endif

int main(int argc, char** argv) {
  int bad;
  checkLibrary();
  if (argc >= 3 && strcmp(argv[1], "threads") == 0) {
    bad = runThreads(atoi(argv[2]));
  } else if (argc >= 2 && strcmp(argv[1], "mpi") == 0) {
#ifdef NCCL_PROGRAM_MPI
    int total = 0;
    MPI_Init(&argc, &argv);
    bad = runMpi();
    MPI_Allreduce(&bad, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    bad = total;
#else
    fprintf(stderr, "built without MPI\n");
    return 2;
#endif
  } else {
    fprintf(stderr, "usage: nccl_program threads N | mpi\n");
    return 2;
  }
  if (bad)
    fprintf(stderr, "nccl_program: %d check(s) failed\n", bad);
  else
    printf("nccl_program %s: all checks passed\n", argv[1]);
  return bad ? 1 : 0;
}
