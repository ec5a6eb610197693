/* probe_plugin: loads an NCCL network plugin (libnccl-net-X.so) and
 * initialises it the way NCCL does, then, for ncclNet_v11/v12, sends a few
 * host buffers from device 0 to itself. Built and run by
 * tests/compat/aws_ofi_nccl.sh (into .compat/, git-ignored) to prove a
 * third-party plugin works on this machine before coll is run over it.
 *
 * usage: probe_plugin PLUGIN.so      (PROBE_VERBOSE=1: the plugin's INFO log)
 *
 * Declares only what it calls, laid out as NCCL's
 * src/include/plugin/net/net_vN.h lays them out: `name` is the first member
 * of every ncclNet_vN_t and init the second; v11 and v12 have the same
 * members in the same order up to finalize. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int res_t; /* ncclResult_t: 0 = ncclSuccess */
typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
typedef res_t (*prof_cb_t)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);
typedef struct {
  int trafficClass;
} comm_config_t;                 /* ncclNetCommConfig_v10..v12_t */
#define TRAFFIC_CLASS_UNDEF (-1) /* NCCL_NET_TRAFFIC_CLASS_UNDEF */
#define PTR_HOST 0x1             /* NCCL_PTR_HOST */
#define HANDLE_MAXSIZE 128       /* NCCL_NET_HANDLE_MAXSIZE */

/* ncclNetProperties_v8_t: no forceFlush, no vProps / max*Bytes. */
typedef struct {
  char *name, *pciPath;
  uint64_t guid;
  int ptrSupport, regIsGlobal, speed, port;
  float latency;
  int maxComms, maxRecvs, netDeviceType, netDeviceVersion;
} props_v8_t;
/* v9..v12: the same fields up to netDeviceVersion, then vProps (4 devs; 8 in
 * v12), maxP2pBytes, maxCollBytes, then maxMultiRequestSize (v11+) and
 * railId, planeId (v12). */
#define PROPS_HEAD                                      \
  char *name, *pciPath;                                 \
  uint64_t guid;                                        \
  int ptrSupport, regIsGlobal, forceFlush, speed, port; \
  float latency;                                        \
  int maxComms, maxRecvs, netDeviceType, netDeviceVersion;
typedef struct {
  PROPS_HEAD
  struct {
    int ndevs;
    int devs[4];
  } vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize; /* v11 only */
} props_v9_11_t;
typedef struct {
  PROPS_HEAD
  struct {
    int ndevs;
    int devs[8];
  } vProps;
  size_t maxP2pBytes, maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId, planeId;
} props_v12_t;

/* Any version: the members read before the version is known. */
typedef struct {
  const char* name;
  void* init;
  res_t (*devices)(int* ndev);
  res_t (*getProperties)(int dev, void* props);
} net_head_t;

/* ncclNet_v11_t / ncclNet_v12_t up to finalize. */
typedef struct {
  const char* name;
  res_t (*init)(void** ctx, uint64_t commId, comm_config_t* config, logger_t, prof_cb_t);
  res_t (*devices)(int* ndev);
  res_t (*getProperties)(int dev, void* props);
  res_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  res_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, void** sendDevComm);
  res_t (*accept)(void* listenComm, void** recvComm, void** recvDevComm);
  res_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  void* regMrDmaBuf;
  res_t (*deregMr)(void* comm, void* mhandle);
  res_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  res_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                 void** request);
  void* iflush;
  res_t (*test)(void* request, int* done, int* sizes);
  res_t (*closeSend)(void* sendComm);
  res_t (*closeRecv)(void* recvComm);
  res_t (*closeListen)(void* listenComm);
  void *getDeviceMr, *irecvConsumed, *makeVDevice;
  res_t (*finalize)(void* ctx);
} net_v11_t;

static int verbose;

/* NCCL's levels: 1 VERSION, 2 WARN, 3 INFO, 4 ABORT, 5 TRACE. */
static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  if (!verbose && level != 2 && level != 4) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[plugin %d %s:%d] ", level, file ? file : "?", line);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CHECK(call)                                   \
  do {                                                \
    res_t r_ = (call);                                \
    if (r_ != 0) {                                    \
      printf("loopback: %s failed: %d\n", #call, r_); \
      return 1;                                       \
    }                                                 \
  } while (0)

/* Device 0 to itself: listen, connect/accept until both exist (neither may
 * block), then one isend/irecv pair per size, checked byte for byte. */
static int loopback(net_v11_t* net, void* ctx) {
  char handle[HANDLE_MAXSIZE] = {0};
  void *lc = NULL, *sc = NULL, *rc = NULL, *sdev = NULL, *rdev = NULL;
  CHECK(net->listen(ctx, 0, handle, &lc));
  double t0 = now();
  while (!sc || !rc) {
    if (!sc) CHECK(net->connect(ctx, 0, handle, &sc, &sdev));
    if (!rc) CHECK(net->accept(lc, &rc, &rdev));
    if (now() - t0 > 20) {
      printf("loopback: connect/accept timed out\n");
      return 1;
    }
  }
  static const size_t sizes[] = {8, 4096, 4u << 20};
  for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; ++i) {
    size_t n = sizes[i];
    unsigned char *sb = malloc(n), *rb = calloc(1, n);
    if (!sb || !rb) return 1;
    for (size_t k = 0; k < n; ++k) sb[k] = (unsigned char)(k * 7 + i);
    void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
    CHECK(net->regMr(sc, sb, n, PTR_HOST, &smh));
    CHECK(net->regMr(rc, rb, n, PTR_HOST, &rmh));
    int tag = 1, sdone = 0, rdone = 0, got = -1, sent = -1;
    size_t rsize = n;
    void* rdata = rb;
    t0 = now();
    while (!sdone || !rdone) {
      /* A NULL request means "not now, call again". */
      if (!rreq) CHECK(net->irecv(rc, 1, &rdata, &rsize, &tag, &rmh, NULL, &rreq));
      if (!sreq) CHECK(net->isend(sc, sb, n, tag, smh, NULL, &sreq));
      if (rreq && !rdone) CHECK(net->test(rreq, &rdone, &got));
      if (sreq && !sdone) CHECK(net->test(sreq, &sdone, &sent));
      if (now() - t0 > 20) {
        printf("loopback: %zu B timed out\n", n);
        return 1;
      }
    }
    int ok = got >= 0 && (size_t)got == n && memcmp(sb, rb, n) == 0;
    printf("loopback: %zu B %s (received %d)\n", n, ok ? "ok" : "WRONG", got);
    CHECK(net->deregMr(sc, smh));
    CHECK(net->deregMr(rc, rmh));
    free(sb);
    free(rb);
    if (!ok) return 1;
  }
  CHECK(net->closeSend(sc));
  CHECK(net->closeRecv(rc));
  CHECK(net->closeListen(lc));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s libnccl-net-X.so\n", argv[0]);
    return 2;
  }
  verbose = getenv("PROBE_VERBOSE") != NULL;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int ver = 0;
  net_head_t* net = NULL;
  for (int v = 12; v >= 8 && !net; --v) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
    if ((net = (net_head_t*)dlsym(lib, sym))) ver = v;
  }
  if (!net) {
    fprintf(stderr, "no ncclNetPlugin_v8..v12 in %s\n", argv[1]);
    return 1;
  }
  printf("symbol: ncclNetPlugin_v%d\nname: %s\n", ver, net->name);

  /* NCCL always passes a config (trafficClass UNDEF when unset);
   * aws-ofi-nccl's init_v11/v12 (and connect_v10) dereference it unchecked. */
  res_t r;
  void* ctx = NULL;
  comm_config_t cfg = {TRAFFIC_CLASS_UNDEF};
  if (ver >= 11)
    r = ((res_t(*)(void**, uint64_t, comm_config_t*, logger_t, prof_cb_t))net->init)(&ctx, 0x1234, &cfg, logger, NULL);
  else if (ver == 10)
    r = ((res_t(*)(logger_t, prof_cb_t))net->init)(logger, NULL);
  else
    r = ((res_t(*)(logger_t))net->init)(logger);
  printf("init: %d\n", r);
  if (r != 0) return 1;
  /* aws-ofi-nccl sets NCCL_PROTO=simple in the environment when the provider
   * cannot do GPUDirect (tcp): show what init left there. */
  const char* proto = getenv("NCCL_PROTO");
  printf("NCCL_PROTO after init: %s\n", proto ? proto : "(unset)");

  int ndev = -1;
  r = net->devices(&ndev);
  printf("devices: %d (rc %d)\n", ndev, r);
  if (r != 0 || ndev < 1) return 1;
  for (int d = 0; d < ndev; ++d) {
    union {
      props_v8_t v8;
      props_v9_11_t v9;
      props_v12_t v12;
    } p;
    memset(&p, 0, sizeof p);
    r = net->getProperties(d, &p);
    if (r != 0) {
      printf("dev %d: getProperties rc %d\n", d, r);
      return 1;
    }
    if (ver == 8) {
      printf("dev %d: name=%s pciPath=%s guid=0x%" PRIx64
             " ptrSupport=0x%x regIsGlobal=%d speed=%d port=%d latency=%g maxComms=%d maxRecvs=%d\n",
             d, p.v8.name, p.v8.pciPath ? p.v8.pciPath : "(null)", p.v8.guid, p.v8.ptrSupport, p.v8.regIsGlobal,
             p.v8.speed, p.v8.port, (double)p.v8.latency, p.v8.maxComms, p.v8.maxRecvs);
      continue;
    }
    props_v9_11_t* q = &p.v9; /* the common head */
    printf("dev %d: name=%s pciPath=%s guid=0x%" PRIx64
           " ptrSupport=0x%x regIsGlobal=%d forceFlush=%d speed=%d port=%d latency=%g maxComms=%d maxRecvs=%d"
           " netDeviceType=%d vProps.ndevs=%d maxP2pBytes=%zu maxCollBytes=%zu",
           d, q->name, q->pciPath ? q->pciPath : "(null)", q->guid, q->ptrSupport, q->regIsGlobal, q->forceFlush,
           q->speed, q->port, (double)q->latency, q->maxComms, q->maxRecvs, q->netDeviceType,
           ver == 12 ? p.v12.vProps.ndevs : q->vProps.ndevs, ver == 12 ? p.v12.maxP2pBytes : q->maxP2pBytes,
           ver == 12 ? p.v12.maxCollBytes : q->maxCollBytes);
    if (ver == 11) printf(" maxMultiRequestSize=%d", q->maxMultiRequestSize);
    if (ver == 12)
      printf(" maxMultiRequestSize=%d railId=%d planeId=%d", p.v12.maxMultiRequestSize, p.v12.railId, p.v12.planeId);
    printf("\n");
  }
  fflush(stdout);
  if (ver < 11) {
    printf("loopback: skipped (v%d)\n", ver);
    return 0;
  }
  net_v11_t* n11 = (net_v11_t*)net;
  if (loopback(n11, ctx) != 0) return 1;
  r = n11->finalize(ctx);
  printf("finalize: %d\n", r);
  return r != 0;
}
