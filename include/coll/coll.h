/*
 * coll: collective communication for host and device memory.
 *
 * The C ABI. It has NCCL's shape with the `coll` prefix and NCCL's numeric values for every
 * enum, so that an NCCL compatibility shim is a thin mapping. The header is C99 and needs no CUDA
 * header: collStream_t is the same type as cudaStream_t, declared here as an opaque pointer.
 *
 * Conventions for every function below:
 *  - The return value is a collResult_t. On failure, collGetLastError() gives a sentence that names
 *    the rank, the peer and the cause. Output parameters are written only on success.
 *  - No function throws, aborts the process or waits forever: every wait has a deadline and ends
 *    in collTimeout or collRemoteError. Init and the bootstrap wait at most
 *    COLL_BOOTSTRAP_TIMEOUT_MS (config.bootstrapTimeoutMs); a data transfer fails after
 *    COLL_TIMEOUT_MS (config.timeoutMs) without progress.
 *  - A communicator may be used by one thread at a time; different communicators may be used
 *    concurrently from different threads. collCommAbort is the exception: any thread may call it
 *    at any time, including while another thread is blocked in a call on the same communicator.
 */
#ifndef COLL_COLL_H_
#define COLL_COLL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 1
#define COLL_PATCH 0
/** Version code as NCCL computes it: major*10000 + minor*100 + patch. */
#define COLL_VERSION(X, Y, Z) ((X)*10000 + (Y)*100 + (Z))
#define COLL_VERSION_CODE COLL_VERSION(COLL_MAJOR, COLL_MINOR, COLL_PATCH)

/** Opaque communicator handle. */
typedef struct collComm* collComm_t;

/**
 * The same type as cudaStream_t. Host buffers: NULL (the call blocks until done) or a host stream
 * (collHostStreamCreate: queued, returns at once). Device buffers: a CUDA stream or NULL (enqueued).
 */
typedef struct CUstream_st* collStream_t;

#define COLL_UNIQUE_ID_BYTES 128
/** Rendezvous token made by collGetUniqueId on one rank and passed to all others (out of band). */
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} collUniqueId;

/** Result codes; values 0..7 are NCCL's. */
typedef enum {
  collSuccess = 0,
  collUnhandledCudaError = 1,
  collSystemError = 2,
  collInternalError = 3,
  collInvalidArgument = 4,
  collInvalidUsage = 5,
  collRemoteError = 6,
  collInProgress = 7,
  collTimeout = 8,
  collNumResults = 9
} collResult_t;

/**
 * Element types; NCCL's values. collFloat8e4m3 and collFloat8e5m2 are OCP's 8-bit floats (CUDA's
 * __nv_fp8_e4m3 and __nv_fp8_e5m2, PyTorch's float8_e4m3fn and float8_e5m2): every collective
 * moves them, and reductions compute each step in float32 and round once to nearest-even,
 * saturating at the largest finite value (448 and 57344) as CUDA's conversions do; NaN stays NaN.
 */
typedef enum {
  collInt8 = 0,
  collChar = 0,
  collUint8 = 1,
  collInt32 = 2,
  collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6,
  collHalf = 6,
  collFloat32 = 7,
  collFloat = 7,
  collFloat64 = 8,
  collDouble = 8,
  collBfloat16 = 9,
  collFloat8e4m3 = 10,
  collFloat8e5m2 = 11,
  collNumTypes = 12
} collDataType_t;

/**
 * Reduction operators. Values 0..4 and collNumOps are NCCL's; collAvg is a sum divided by the rank
 * count. collRedOpCreatePreMulSum returns further ops, numbered collNumOps + index as NCCL's
 * dynamic ops (5, 6, ...), each valid only on the communicator that created it.
 *
 * coll extensions, with values outside NCCL's range so that they never meet a dynamic op:
 * collBand, collBor and collBxor are bitwise and, or and exclusive or, for the integer types only
 * (collInt8, collUint8, collInt32, collUint32, collInt64, collUint64); a floating type is
 * collInvalidArgument naming the op and the type.
 */
typedef enum {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  collNumOps = 5,
  collBand = 0x40000000,
  collBor = 0x40000001,
  collBxor = 0x40000002
} collRedOp_t;

/** Where the scalar of collRedOpCreatePreMulSum lives; NCCL's values. */
typedef enum {
  /** scalar points to memory read each time an operation with the op runs (see
   *  collRedOpCreatePreMulSum). */
  collScalarDevice = 0,
  /** scalar points to host memory read once, when the op is created. */
  collScalarHostImmediate = 1
} collScalarResidence_t;

/** Color for collCommSplit: the calling rank joins no new communicator. */
#define COLL_SPLIT_NOCOLOR (-1)

/** Marks a collConfig_t field as "not set": the library default (or environment) applies. */
#define COLL_CONFIG_UNDEF_INT (-2147483647 - 1)
#define COLL_CONFIG_UNDEF_PTR NULL
#define COLL_CONFIG_MAGIC 0xc011c0deu

/**
 * Communicator options for collCommInitRankConfig and collCommSplit. Always start from
 * COLL_CONFIG_INITIALIZER so that fields added in later versions keep their defaults.
 */
typedef struct collConfig_v1 {
  size_t size;        /**< sizeof(collConfig_t), set by the initializer */
  unsigned int magic; /**< COLL_CONFIG_MAGIC, set by the initializer */
  unsigned int version;
  /** 1 (default, or COLL_COMM_BLOCKING): init blocks until the communicator is ready. 0 (NCCL's
   *  non-blocking communicator): init, split, shrink, finalize, collectives and point-to-point
   *  calls without a stream, and collGroupEnd over them, return collInProgress at once; the calls
   *  run in issue order in the background and collCommGetAsyncError reports when they are done. */
  int blocking;
  /** Deadline in milliseconds for every bootstrap wait of this communicator; overrides
   *  COLL_BOOTSTRAP_TIMEOUT_MS. */
  int bootstrapTimeoutMs;
  /** CUDA device of this rank; -1 makes a host-only communicator. Not set: the current CUDA
   *  device when a CUDA driver and device are present, host-only otherwise. */
  int cudaDev;
  /** Name shown in log lines; copied at init. */
  const char* commName;
  /** Deadline in milliseconds for a data transfer that makes no progress (a stalled or silent
   *  peer); overrides COLL_TIMEOUT_MS; 0: no deadline (a dead peer still ends the wait). Added
   *  after commName: a config built with an older header is shorter, and the library then reads
   *  no timeoutMs from it. */
  int timeoutMs;
} collConfig_t;

#define COLL_CONFIG_INITIALIZER                                                                               \
  {                                                                                                           \
    sizeof(collConfig_t), COLL_CONFIG_MAGIC, COLL_VERSION_CODE, COLL_CONFIG_UNDEF_INT, COLL_CONFIG_UNDEF_INT, \
        COLL_CONFIG_UNDEF_INT, COLL_CONFIG_UNDEF_PTR, COLL_CONFIG_UNDEF_INT                                   \
  }

/* ------------------------------------------------------------------------------------------ */
/* Information                                                                                  */
/* ------------------------------------------------------------------------------------------ */

/**
 * Writes COLL_VERSION_CODE of the loaded library to *version.
 * Non-blocking, thread-safe. Returns collInvalidArgument when version is NULL.
 */
collResult_t collGetVersion(int* version);

/**
 * Writes to *count the CUDA devices this process can use (0 without a CUDA driver or device;
 * the emulated ones under COLL_DEVICE_EMULATION). Thread-safe.
 */
collResult_t collGetDeviceCount(int* count);

/**
 * Returns a static, human-readable name for a result code (never NULL, also for unknown codes).
 * Non-blocking, thread-safe. The string is owned by the library.
 */
const char* collGetErrorString(collResult_t result);

/**
 * Returns the sentence describing the last error: the one recorded on comm when comm is not NULL
 * and has an error, otherwise the last error of the calling thread (init failures, where no
 * communicator exists). Returns "" when there is none.
 * Non-blocking, thread-safe. The string belongs to the calling thread and stays valid until its
 * next call into coll.
 */
const char* collGetLastError(collComm_t comm);

/**
 * Creates the rendezvous root of a new communicator and writes its token to *uniqueId.
 * Call it on exactly one rank, then pass the 128 bytes to every rank (MPI_Bcast, a file, a store).
 * The token carries the root's address (chosen by COLL_SOCKET_IFNAME), a magic and a random
 * 64-bit secret that every rank must present. The root runs on a background thread of the calling
 * process until all ranks have arrived or COLL_BOOTSTRAP_TIMEOUT_MS has passed since the first.
 * Blocking only to open the listening socket. Thread-safe.
 */
collResult_t collGetUniqueId(collUniqueId* uniqueId);

/* ------------------------------------------------------------------------------------------ */
/* Communicator lifecycle                                                                       */
/* ------------------------------------------------------------------------------------------ */

/**
 * Creates the communicator for rank `rank` of `nranks` that share `commId`.
 * Blocking: returns when all nranks ranks have arrived and exchanged their information, or fails
 * with collTimeout naming the ranks that never arrived (COLL_BOOTSTRAP_TIMEOUT_MS).
 * Thread-safe; several ranks may be initialized concurrently from threads of one process.
 * The caller owns *comm and releases it with collCommDestroy or collCommAbort.
 */
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank);

/**
 * As collCommInitRank, with options. config may be NULL (all defaults). With config->blocking == 0
 * the call returns collInProgress at once with *comm set; poll collCommGetAsyncError until it
 * returns collSuccess (ready) or an error. The config struct is read during the call only.
 */
collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank, collConfig_t* config);

/**
 * Creates ndev communicators, one per rank, all in the calling process (ranks as threads).
 * devlist gives each rank's CUDA device (repeats allowed); NULL makes host-only communicators.
 * Blocking; internally runs one thread per rank. Thread-safe. comms must hold ndev handles; the
 * caller owns each and destroys each.
 */
collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist);

/**
 * Creates the communicator of this process from launcher environment variables, read in this
 * order: COLL_RANK/COLL_WORLD_SIZE/COLL_LOCAL_RANK/COLL_MASTER_ADDR/COLL_MASTER_PORT (coll-run),
 * torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI
 * (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID),
 * PMI (PMI_RANK, PMI_SIZE). Launchers that give no master address need COLL_MASTER_ADDR and
 * COLL_MASTER_PORT (or MASTER_ADDR/MASTER_PORT). Rank 0 hosts the rendezvous root at the master
 * address. A missing, malformed or contradictory variable is collInvalidArgument naming it.
 * Blocking as collCommInitRank.
 */
collResult_t collCommInitFromEnv(collComm_t* comm);

/**
 * Splits comm: ranks that pass the same color form a new communicator, ordered by key and then by
 * their rank in comm. COLL_SPLIT_NOCOLOR makes *newcomm NULL. Collective: every rank of comm must
 * call it. config NULL inherits comm's options (blocking among them).
 * Blocking by default; uses comm's bootstrap, so comm must not be used concurrently by another
 * thread. Non-blocking (config.blocking=0, or inherited): returns collInProgress at once, with
 * *newcomm set (NULL for COLL_SPLIT_NOCOLOR); comm reports collInProgress from
 * collCommGetAsyncError, and refuses other calls, while the exchange runs, and *newcomm until it is
 * ready. One thread may then split every rank of comm in turn.
 */
collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config);

/** collCommShrink's flags; NCCL's values. */
#define COLL_SHRINK_DEFAULT 0x00
#define COLL_SHRINK_ABORT 0x01

/**
 * Makes a communicator of comm's ranks but the excludeRanksCount ranks of excludeRanksList (ranks of
 * comm), in their order in comm: the survivors of failed ranks go on. Called by every surviving rank
 * and by none of the excluded ones, which may be dead: it talks only to the survivors (the lowest
 * starts the new rendezvous and tells the others its id through comm's bootstrap). Operations of
 * comm still queued on host streams finish first; with COLL_SHRINK_ABORT they are cancelled
 * instead (one already running ends as it would: a dead peer is detected, a silent one at the
 * deadline). config NULL inherits comm's options. Non-blocking (config.blocking=0, or inherited):
 * returns collInProgress at once with *newcomm set, which reports collInProgress until the
 * exchange and its init are done (one thread may then shrink every survivor in turn). Inside a
 * group it runs at collGroupEnd with the group's other shrinks (one thread may shrink every
 * survivor of a clique). comm stays valid (destroy or abort it). NCCL 2.28's ncclCommShrink.
 */
collResult_t collCommShrink(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                            collConfig_t* config, int shrinkFlags);

/**
 * Completes outstanding work and synchronizes with the other ranks so that connections can be
 * torn down without errors on either side. Collective (deadline COLL_BOOTSTRAP_TIMEOUT_MS); blocking,
 * except on a non-blocking communicator, where it returns collInProgress at once and
 * collCommGetAsyncError says collInProgress until it has ended (calls meanwhile are refused).
 * Inside a group it runs at collGroupEnd, with the group's other finalizes (one thread may finalize
 * every rank of a clique). After it, only collCommDestroy may be called on comm.
 */
collResult_t collCommFinalize(collComm_t comm);

/**
 * Frees comm and everything it holds. Local: no communication. Without a prior collCommFinalize,
 * peers still communicating with this rank will see collRemoteError. Not thread-safe with other
 * calls on comm. comm is invalid afterwards; NULL is accepted and ignored.
 */
collResult_t collCommDestroy(collComm_t comm);

/**
 * Stops every operation of comm, wakes any thread blocked in a call on it (those calls return
 * collRemoteError), closes its connections and frees it. Always returns, never waits on a peer.
 * May be called from any thread. comm is invalid afterwards; NULL is accepted and ignored.
 */
collResult_t collCommAbort(collComm_t comm);

/**
 * Writes the asynchronous state of comm to *asyncError: collInProgress while a non-blocking init,
 * split, shrink or finalize, or a non-blocking communicator's call, is running; collSuccess when
 * healthy and idle; or the error that broke the communicator. Non-blocking.
 * Thread-safe.
 */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError);

/**
 * Sets the data-path deadline of comm: a call made after this one fails with collTimeout, naming
 * the peer, once it has waited timeoutMs milliseconds for a peer without anything moving (as
 * config.timeoutMs and COLL_TIMEOUT_MS, which set the first value). 0: no deadline (a dead peer
 * still ends the wait). Calls already made, queued on a stream or running, keep the deadline they
 * were made with; a group runs under the longest of its calls'. Communicators split from comm
 * afterwards inherit the new value unless their config sets one. Negative: collInvalidArgument.
 * Thread-safe.
 */
collResult_t collCommSetTimeout(collComm_t comm, int timeoutMs);

/**
 * What comm's device kernels measured inside themselves (the GPU's clocks), summed over the
 * launches that completed since the last collCommGetDeviceTimings: divide by launches for a mean.
 * Poll and fence times are those of the Simple protocol's two waiting threads per channel (the
 * receive side's and the send side's), summed over channels. Launches replayed by a CUDA graph
 * are not counted.
 */
typedef struct {
  unsigned long long launches; /* launches that completed */
  unsigned long long channels; /* channels (CTAs) they ran */
  unsigned long long pieces;   /* FIFO slots moved */
  double kernelUs;             /* per launch: the last channel's end minus the first one's start */
  double firstPieceUs;         /* per launch: its first piece moved, from its start */
  double lastPieceUs;          /* per launch: its last piece moved, from its start */
  double recvPollUs;           /* waiting for a peer's data (head) */
  double sendPollUs;           /* waiting for a peer to free a slot (tail) */
  double recvFenceUs;          /* releasing a drained slot (a system-scope fence and a store) */
  double sendFenceUs;          /* publishing a filled slot (its size, a fence, the head) */
} collDeviceTimings_t;

/**
 * Writes to *timings what comm's device kernels measured since the last call, and starts a new
 * count; all zero for a communicator that has made no device call. Reaps completed launches
 * first (non-blocking). Not thread-safe against other calls on comm that enqueue device work.
 */
collResult_t collCommGetDeviceTimings(collComm_t comm, collDeviceTimings_t* timings);

/** Writes the number of ranks of comm to *count. Non-blocking, thread-safe. */
collResult_t collCommCount(const collComm_t comm, int* count);

/** Writes the rank of the caller in comm to *rank. Non-blocking, thread-safe. */
collResult_t collCommUserRank(const collComm_t comm, int* rank);

/**
 * Writes the CUDA device of comm to *device. Returns collInvalidUsage for a host-only
 * communicator. Non-blocking, thread-safe.
 */
collResult_t collCommCuDevice(const collComm_t comm, int* device);

/**
 * Writes to buf (a NUL-terminated line, cut to len bytes) the algorithm comm runs for the
 * collective `name` ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
 * "alltoall", "sendrecv") of `bytes` bytes per rank and call (count x type size), e.g. "ring".
 * An extension for tools such as coll-perf; it sends nothing. Thread-safe.
 */
collResult_t collCommGetAlgorithm(const collComm_t comm, const char* name, size_t bytes, char* buf, size_t len);

/**
 * Writes to buf (a NUL-terminated line, cut to len bytes) how comm reaches the other ranks from
 * this one: its hosts and the transport per peer, e.g. "4 ranks on 1 host; shm to 3 peers", and
 * for a communicator with a CUDA device the transports of device buffers too ("...; device
 * buffers: p2p to 3 peers"). An extension for tools such as coll-perf; it sends nothing.
 * Thread-safe.
 */
collResult_t collCommGetTransports(const collComm_t comm, char* buf, size_t len);

/* ------------------------------------------------------------------------------------------ */
/* Reduction operators of a communicator                                                        */
/* ------------------------------------------------------------------------------------------ */

/**
 * Creates a reduction operator of comm that multiplies each rank's input by a scalar before
 * summing: the result is sum over ranks r of scalar_r * input_r, with each rank's own scalar.
 * NCCL's signature and meaning. scalar is one element of `datatype`; residence says when it is read:
 *  - collScalarHostImmediate: *scalar is host memory, copied now; the caller may free it after.
 *  - collScalarDevice: scalar is a pointer read each time an operation with the op runs (inside a
 *    group: at collGroupEnd), so it must stay valid until collRedOpDestroy. With host-memory
 *    collectives it may simply be host memory, whose value then may change between calls; CUDA
 *    device memory is read with the CUDA runtime. With device-buffer collectives, a scalar in
 *    the communicator's device memory is read by the kernel when the operation runs (each
 *    launch of a captured graph reads its current value); one in host memory is read when the
 *    call is enqueued.
 * Multiplying and summing follow the reduce kernels: integers wrap, float16 and bfloat16 are
 * computed in float32 and rounded to nearest-even after each step.
 * Writes the op to *op: collNumOps + index (5, 6, ...), the lowest free index of comm. It is valid
 * on comm only and with `datatype` only: a collective with another type, with the op after
 * collRedOpDestroy, or on a communicator that holds no op of that value is collInvalidArgument
 * (as in NCCL, the value alone cannot tell two communicators' ops of one index apart).
 * The op is usable with collAllReduce, collReduce and collReduceScatter; every rank of a
 * collective passes its own op (with its own scalar). Local (nothing is sent); non-blocking; not
 * thread-safe with other calls on comm.
 */
collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                      collScalarResidence_t residence, collComm_t comm);

/**
 * Frees an op made by collRedOpCreatePreMulSum on comm; its value may be returned again by a later
 * create. A built-in op (collSum..collAvg, collBand..collBxor) or one that comm does not hold is
 * collInvalidArgument. collCommDestroy and collCommAbort free the ops still held. Local;
 * non-blocking; not thread-safe with other calls on comm.
 */
collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm);

/* ------------------------------------------------------------------------------------------ */
/* Collectives and point-to-point                                                               */
/*                                                                                              */
/* Host buffers, NULL stream: the call returns when the result is in recvbuff (inside a group:  */
/* at collGroupEnd), after any work the communicator has queued on host streams. Host buffers,  */
/* host stream: checked, queued, returns at once ("Host streams" below). Device buffers (memory */
/* of the comm's device), CUDA stream: enqueued, returns at once; errors: collCommGetAsyncError */
/* In-place as NCCL: all-reduce sendbuff == recvbuff; reduce-scatter                            */
/* recvbuff == sendbuff + rank*recvcount; all-gather sendbuff == recvbuff + rank*sendcount.     */
/* ------------------------------------------------------------------------------------------ */

/** Reduces count elements across ranks with op; every rank receives the result. */
collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                           collComm_t comm, collStream_t stream);

/** Copies count elements from root's sendbuff to every rank's recvbuff. */
collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                           collComm_t comm, collStream_t stream);

/** Reduces count elements across ranks with op into root's recvbuff. */
collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collRedOp_t op,
                        int root, collComm_t comm, collStream_t stream);

/** Gathers sendcount elements from every rank into recvbuff (nranks*sendcount), in rank order. */
collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                           collComm_t comm, collStream_t stream);

/** Reduces nranks*recvcount elements with op; rank r receives block r (recvcount elements). */
collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                               collRedOp_t op, collComm_t comm, collStream_t stream);

/** Sends block j (count elements) of sendbuff to rank j; receives rank j's block into block j. */
collResult_t collAllToAll(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, collComm_t comm,
                          collStream_t stream);

/**
 * Gathers count elements of every rank's sendbuff into root's recvbuff (nranks*count elements,
 * rank i's at recvbuff + i*count); recvbuff is not used on the other ranks. In place when
 * sendbuff == recvbuff + root*count. NCCL 2.28's ncclGather: a group of sends and receives.
 */
collResult_t collGather(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                        collComm_t comm, collStream_t stream);

/**
 * Sends block i (count elements at sendbuff + i*count) of root's sendbuff to rank i's recvbuff;
 * sendbuff is not used on the other ranks. In place when recvbuff == sendbuff + root*count.
 * NCCL 2.28's ncclScatter: a group of sends and receives.
 */
collResult_t collScatter(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                         collComm_t comm, collStream_t stream);

/** Sends count elements to peer, which must post a matching collRecv. */
collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream);

/** Receives count elements from peer, which must post a matching collSend. */
collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                      collStream_t stream);

/* ---------------------------------------------------------------------------------------------- */
/* Tagged messages: point-to-point with MPI's matching (host memory)                              */
/*                                                                                                */
/* collSend/collRecv above are NCCL's: both ends name each other and post in the same order. The  */
/* calls below are MPI's instead: a receive names a source or COLL_ANY_SOURCE and a tag or        */
/* COLL_ANY_TAG, and is matched, among the messages that fit it, with the earliest one sent;      */
/* messages from one source with one tag are received in the order they were sent. A message that */
/* arrives before its receive is posted is held in memory, up to COLL_P2P_UNEXPECTED_BYTES per    */
/* communicator; past that, the receiving rank's pending and later tagged receives fail with      */
/* collInvalidUsage naming the sender, the tag and the sizes (its senders' sends then end at      */
/* their deadline). They run on an internal communicator of comm's ranks, with connections and a  */
/* progress thread of their own: a posted receive never holds up comm's collectives, nor they it. */
/* ---------------------------------------------------------------------------------------------- */

#define COLL_ANY_SOURCE (-1)
#define COLL_ANY_TAG (-1)

/** A send or receive in flight: from collIsend or collIrecv, ended by collWait, a collTest that
 *  finds it done, or collRequestFree. */
typedef struct collRequest_st* collRequest_t;

/** What a completed tagged request moved. */
typedef struct {
  int source;   /* the sender (a receive), or this rank (a send) */
  int tag;      /* the message's tag */
  size_t bytes; /* bytes of the message (at most the receive's count x type size) */
} collMsgStatus_t;

/**
 * Makes comm ready for tagged messages: creates the internal communicator (a split of comm, so
 * every rank of comm calls this, in the same order as its other splits and collectives), connects
 * every pair of ranks and starts the progress thread. Calling it again does nothing. Each
 * connection has a FIFO of COLL_P2P_BUFFSIZE bytes per direction (shared memory or sockets).
 */
collResult_t collCommTaggedInit(collComm_t comm);

/**
 * Starts sending count elements of buf to peer with tag (>= 0); returns at once with *request.
 * buf must stay unchanged until the request has completed. A message to this rank itself is
 * matched like any other. The request fails with collRemoteError when peer dies or leaves, and
 * with collTimeout when nothing of it moved for the deadline the call was made under
 * (collCommSetTimeout), naming peer.
 */
collResult_t collIsend(const void* buf, size_t count, collDataType_t datatype, int peer, int tag, collComm_t comm,
                       collRequest_t* request);

/**
 * Posts a receive of at most count elements into buf from source (or COLL_ANY_SOURCE) with tag
 * (or COLL_ANY_TAG); returns at once with *request. A message longer than the receive fails it
 * with collInvalidUsage (the message is dropped), and so does one sent as another datatype (MPI's
 * type matching, under COLL_CHECK_CALLS's in-band check; 0 turns it off). It fails with collRemoteError when its source
 * dies or leaves (a receive from any source: when any rank does while it is posted), and with
 * collTimeout when nothing arrived for it within the deadline the call was made under.
 */
collResult_t collIrecv(void* buf, size_t count, collDataType_t datatype, int source, int tag, collComm_t comm,
                       collRequest_t* request);

/**
 * Whether *request has completed: *done = 1 and, if status is not NULL, *status filled; the
 * request is then freed and *request set to NULL. *done = 0 otherwise. A failed request returns
 * its error (and is freed). Non-blocking; thread-safe for different requests.
 */
collResult_t collTest(collRequest_t* request, int* done, collMsgStatus_t* status);

/** Waits until *request completes (its deadline bounds the wait), then as collTest. */
collResult_t collWait(collRequest_t* request, collMsgStatus_t* status);

/**
 * Frees *request without waiting and sets it to NULL; its buffer is the caller's again at once. A
 * receive not yet matched is withdrawn; a matched one drops the rest of its message; a send goes
 * on in the background from a copy of what it has not sent yet. NULL or a NULL *request is
 * accepted.
 */
collResult_t collRequestFree(collRequest_t* request);

/**
 * Starts a group: the collective and point-to-point calls that follow, up to the matching
 * collGroupEnd, are queued and fused. Groups nest; per calling thread.
 */
collResult_t collGroupStart(void);

/**
 * Ends a group and runs what it queued (host buffers), or enqueues it on the stream (device
 * buffers: a communicator's collectives as one launch, its sends and receives as one). As with
 * NCCL, a group's operations must not depend on each other: on device buffers they run side by
 * side on their channels, so one that reads another's output belongs in a later group (host
 * buffers happen to run in call order). Matching sends and receives inside one group never deadlock. A group may span
 * several communicators, e.g. one thread driving every rank of a collCommInitAll clique: they run concurrently. On
 * failure every failing communicator records its error and the first one is returned. When a call inside the group
 * was refused (it returned an error), collGroupEnd runs none of the group's operations and returns that refusal
 * (as ncclGroupEnd does), so that no peer sees a part of the group.
 */
collResult_t collGroupEnd(void);

/** What collGroupSimulateEnd reports; NCCL's ncclSimInfo_t. Start from COLL_SIM_INFO_INITIALIZER. */
typedef struct collSimInfo_v1 {
  size_t size;        /**< sizeof(collSimInfo_t), set by the initializer */
  unsigned int magic; /**< COLL_SIM_INFO_MAGIC, set by the initializer */
  unsigned int version;
  /** The group's predicted time in microseconds (-1 until simulated). */
  float estimatedTime;
} collSimInfo_t;

#define COLL_SIM_INFO_MAGIC 0x74685283u
#define COLL_SIM_INFO_INITIALIZER \
  { sizeof(collSimInfo_t), COLL_SIM_INFO_MAGIC, COLL_VERSION_CODE, -1.0f }

/**
 * Ends a group as collGroupEnd would, except that its operations do not run: simInfo->estimatedTime
 * gets the tuner's prediction of the group's time (each communicator's operations one after the
 * other with the algorithm it would choose, the communicators side by side; a send or receive as
 * one step of a ring). Communicators the group creates, splits and finalizes are still done. A
 * call refused inside the group is returned as by collGroupEnd. collInvalidUsage outside a group
 * or inside a nested one; collInvalidArgument for a NULL or foreign simInfo.
 */
collResult_t collGroupSimulateEnd(collSimInfo_t* simInfo);

/* ------------------------------------------------------------------------------------------ */
/* Memory, registration and windows                                                             */
/* ------------------------------------------------------------------------------------------ */

/**
 * Allocates size bytes for communication buffers and writes the pointer to *ptr (NULL for size 0).
 * Where the calling thread's current CUDA device exists (a real or an emulated one), device
 * memory on it: on a GPU from CUDA's virtual memory management (cuMemCreate with a handle exportable
 * as a file descriptor, rounded up to the allocation granularity, readable and writable by the
 * device and its peers), as NCCL's ncclMemAlloc, or cudaMalloc where the device or driver lacks it.
 * Otherwise page-aligned host memory from a shareable mapping (memfd), so that the other ranks of
 * the host can map it. Not zeroed. Free it with collMemFree. Thread-safe.
 */
collResult_t collMemAlloc(void** ptr, size_t size);

/** Frees memory from collMemAlloc; NULL is a no-op, any other pointer collInvalidArgument. */
collResult_t collMemFree(void* ptr);

/**
 * Registers [buff, buff + size) with comm for later collectives and writes a handle to *handle.
 * Any valid buffer may be registered (host or device memory, from collMemAlloc or not); a
 * registered buffer is used in place. Non-collective, thread-safe. Release it with
 * collCommDeregister before the buffer is freed and before comm is destroyed.
 */
collResult_t collCommRegister(const collComm_t comm, void* buff, size_t size, void** handle);

/** Releases a handle from collCommRegister on the same communicator. */
collResult_t collCommDeregister(const collComm_t comm, void* handle);

/** A registered window (collCommWindowRegister). */
typedef struct collWindow* collWindow_t;

/** Window flags: NCCL's values. COLL_WIN_COLL_SYMMETRIC: every rank registers a window of the
 *  same size at the same point, and collectives on windows may use the peers' windows directly. */
#define COLL_WIN_DEFAULT 0x00
#define COLL_WIN_COLL_SYMMETRIC 0x01
#define COLL_WIN_STRICT_ORDERING 0x02

/**
 * Registers [buff, buff + size) of every rank as a window of comm and writes it to *win.
 * Collective: every rank calls it, with its own buffer (sizes may differ), in the same order of
 * window calls. The ranks exchange where their buffers are, and each rank reaches the windows of
 * the other ranks of its host directly: ranks that are threads of one process through each
 * other's pointers, memory from collMemAlloc by mapping it (once, until deregistration), other
 * host memory through the kernel's cross-process copies (process_vm_writev). Ranks on other hosts
 * and device memory are not reached this way. The first window also sets up the signals of the
 * one-sided calls below. With COLL_WIN_COLL_SYMMETRIC (every rank registers its window at the same
 * point), collectives whose buffers lie in such windows may run on the one-copy path: every rank
 * reads and writes the other ranks' windows directly, without FIFOs, where every rank reaches every
 * window by pointer (ranks that are threads of one process, or memory from collMemAlloc) and the
 * tuner predicts it faster (COLL_ALGO "window" forces it, "^window" turns it off). Every rank's
 * buffers of such a call must lie in windows, or none's. collStatWindowCollectives counts the calls
 * that took it.
 */
collResult_t collCommWindowRegister(collComm_t comm, void* buff, size_t size, collWindow_t* win, int flags);

/** Releases a window of comm. Collective, as its registration: it returns once every rank has
 *  called it (no rank writes into the window after that), then unmaps the peers' windows. */
collResult_t collCommWindowDeregister(collComm_t comm, collWindow_t win);

/** Writes the calling rank's buffer of window win to *ptr. */
collResult_t collWinGetUserPtr(collComm_t comm, collWindow_t win, void** ptr);

/**
 * One-sided put (NCCL 2.29's ncclPutSignal): copies count elements of datatype from localbuff
 * into rank peer's buffer of window peerWin at byte offset peerWinOffset, then raises this rank's
 * signal at peer, so that a collWaitSignal on peer that sees the signal sees the bytes. peer takes
 * no part. A rank's puts and signals to one peer arrive in the order it made them. sigIdx, ctx and
 * flags must be 0 (as NCCL requires today). The ranks of this host (the peer reached as
 * collCommWindowRegister says; another host's rank is collInvalidUsage). A host-memory window:
 * stream NULL returns when the bytes and the signal are in place; a host stream
 * (collHostStreamCreate) queues it in the stream's order. A device-memory window: a device stream
 * (localbuff device memory), on which the put is a kernel's stores into the peer's window, then
 * the signal, in the stream's order. Not inside collGroupStart/End.
 */
collResult_t collPutSignal(const void* localbuff, size_t count, collDataType_t datatype, int peer, collWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, collComm_t comm,
                           collStream_t stream);

/** Raises this rank's signal at peer without data (NCCL's ncclSignal); as collPutSignal. */
collResult_t collSignal(int peer, int sigIdx, int ctx, unsigned int flags, collComm_t comm, collStream_t stream);

/** One condition of collWaitSignal (NCCL's ncclWaitSignalDesc_t). */
typedef struct {
  int opCnt;  /**< signals to wait for from peer (>= 0) */
  int peer;   /**< the rank that raises them */
  int sigIdx; /**< 0 */
  int ctx;    /**< 0 */
} collWaitSignalDesc_t;

/**
 * Waits until, for every descriptor, opCnt more signals have come from its peer than earlier
 * waits took, then takes them (NCCL's ncclWaitSignal). A peer that dies, or nothing arriving for
 * the communicator's timeout, ends the wait with collRemoteError or collTimeout naming the peers
 * still awaited. stream as collPutSignal's: on a device stream, the stream's later work waits
 * for the signals (a kernel waits on them; its failure is reported as a device launch's, through
 * collCommGetAsyncError). Needs a window registered first (the signals are set up with it).
 */
collResult_t collWaitSignal(int nDesc, const collWaitSignalDesc_t* signalDescs, collComm_t comm, collStream_t stream);

/** collCommSuspend flag: release the communicator's memory that can be made again. */
#define COLL_SUSPEND_MEM 0x01

/**
 * Suspends comm: waits for its queued and running work, then with COLL_SUSPEND_MEM releases the
 * memory it can make again (device scratch and staging, its stream-ordered pool's reserve).
 * Connections and their buffers stay: the ranks remain connected. Until collCommResume, calls
 * that move data on comm fail with collInvalidUsage. Not thread-safe against other calls on comm.
 */
collResult_t collCommSuspend(collComm_t comm, int flags);

/** Resumes a suspended communicator; released memory is made again as calls need it. */
collResult_t collCommResume(collComm_t comm);

/** collCommRevoke flags: none yet (NCCL's NCCL_REVOKE_DEFAULT). */
#define COLL_REVOKE_DEFAULT 0

/**
 * Revokes comm: its operations in flight end (with collRemoteError, "aborted"), its queued
 * host-stream work is cancelled, and once nothing of comm runs the call returns. Afterwards only
 * collCommSplit, collCommShrink and collCommDestroy/Abort may be called on it; data calls fail with
 * collInvalidUsage. Typically every rank revokes, then the ranks split or shrink into a new
 * communicator. A second revoke is a no-op. NCCL 2.29's ncclCommRevoke.
 */
collResult_t collCommRevoke(collComm_t comm, int flags);

/** What collCommMemStats reports (NCCL's ncclCommMemStat_t values first). */
typedef enum {
  collStatDeviceMemSuspendable = 0, /**< device bytes collCommSuspend can release */
  collStatDeviceMemSuspended = 1,   /**< 1 while comm is suspended, else 0 */
  collStatDeviceMemPersistent = 2,  /**< device bytes held until destroy (connection buffers) */
  collStatDeviceMemTotal = 3,       /**< the two device counts together */
  collStatHostMemRegistered = 4,    /**< bytes registered with comm (collCommRegister, windows) */
  collStatWindowCollectives = 5     /**< collectives this rank has run on windows (one-copy path) */
} collCommMemStat_t;

/** Writes one of comm's memory statistics to *value. Non-blocking. */
collResult_t collCommMemStats(collComm_t comm, collCommMemStat_t stat, unsigned long long* value);

/* ------------------------------------------------------------------------------------------ */
/* Parameters (the COLL_* variables that coll-info --params lists)                              */
/* ------------------------------------------------------------------------------------------ */

/**
 * Reads parameter name (COLL_X, or X) as the library sees it now: *value gets its text (the
 * environment's, or the default), *isSet (when not NULL) 1 when the environment set it. The
 * string belongs to the calling thread until its next collParamGet. collInvalidArgument names an
 * unknown parameter.
 */
collResult_t collParamGet(const char* name, const char** value, int* isSet);

/** Writes every parameter's name (COLL_X, sorted) to *names and their number to *count. The
 *  table is the library's and stays valid. */
collResult_t collParamNames(const char* const** names, int* count);

/**
 * on=1: a parameter COLL_X that the environment does not set takes NCCL_X's value (what the NCCL
 * drop-in turns on, so that a program written for NCCL keeps its settings); on=0: NCCL_X is never
 * read. COLL_NCCL_TWINS in the environment, when set, wins over this call. Call it before the
 * first communicator.
 */
collResult_t collParamNcclTwins(int on);

/** Reads the logging variables (COLL_DEBUG, COLL_DEBUG_SUBSYS, COLL_DEBUG_FILE) again. */
void collDebugReload(void);

/* ------------------------------------------------------------------------------------------ */
/* Host streams (a coll extension): non-blocking host-memory operations                         */
/*                                                                                              */
/* A host stream is coll's own stream object. A collective or send/recv on host buffers given a */
/* host stream is checked at once (bad arguments fail the call and nothing is queued), queued,  */
/* and the call returns collSuccess without waiting: the buffers must stay valid and unchanged   */
/* (recvbuff unread) until the stream is synchronized, or collStreamQuery says it is done.     */
/*  - Each communicator runs its queued work in the order it was issued, on a thread of its own, */
/*    so several operations may be in flight on one communicator and the calling thread is free */
/*    meanwhile. A blocking call (NULL stream) on a communicator runs after its queued work.     */
/*  - Work on one stream runs in stream order, also across communicators. Inside a group, every  */
/*    call of one communicator uses the same stream; the group's parts on several communicators */
/*    run together (one thread may drive every rank of a clique) and count as one stream item.  */
/*    Outside a group, one thread driving several ranks needs a stream per rank: on one stream, */
/*    a rank's call would wait for the previous rank's, which waits for it.                    */
/*  - A failing operation fails exactly as the blocking call would (same result, same sentence, */
/*    the communicator marked broken, collCommGetAsyncError set); the stream keeps the first     */
/*    failure until collStreamSynchronize returns it.                                            */
/*  - collCommAbort, or collCommDestroy with work still queued or running, cancels that work and */
/*    aborts what runs: its stream reports collInvalidUsage (cancelled) or collRemoteError       */
/*    (aborted), and no thread is left waiting. collCommFinalize waits for the queued work.     */
/* ------------------------------------------------------------------------------------------ */

/** Creates a host stream in *stream. Any thread may use it; it is not tied to a communicator. */
collResult_t collHostStreamCreate(collStream_t* stream);

/**
 * Waits for the work queued on a host stream, then frees it. Returns the stream's first failure
 * not yet returned by collStreamSynchronize (the stream is freed either way).
 */
collResult_t collHostStreamDestroy(collStream_t stream);

/**
 * Waits until every operation queued on stream so far has completed. Returns collSuccess, or the
 * first failure since the previous synchronize (collGetLastError(NULL) gives its sentence, which
 * names the call and the rank), which is then forgotten. NULL: collSuccess at once.
 */
collResult_t collStreamSynchronize(collStream_t stream);

/**
 * Does not wait: collSuccess when every operation queued on stream has completed without failure,
 * collInProgress while some have not, else the first failure (kept until collStreamSynchronize).
 */
collResult_t collStreamQuery(collStream_t stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* COLL_COLL_H_ */
