/* TEST-ONLY stand-in for libcudart.so, built by tests/compat/aws_ofi_nccl.sh
 * into .compat/ (git-ignored). Not part of coll: nothing links it.
 *
 * Why it exists: aws-ofi-nccl (built with --enable-cudart-dynamic) does, at
 * init (nccl_net_ofi_gpu_init in src/nccl_ofi_cuda.cpp):
 *   dlopen("libcudart.so"); cudaRuntimeGetVersion(&v);
 *   for ~30 driver functions (cuDriverGetVersion, cuCtxGetDevice,
 *   cuDeviceGetAttribute, cuMemAlloc, ...):
 *     cudaGetDriverEntryPointByVersion(name, &fn, ver, flags, &status)
 *     (cudaGetDriverEntryPoint if the runtime is older than 13.0)
 *   cuDriverGetVersion(&v)  -- must succeed, or init fails
 * and fails the whole plugin when any of that fails. The real cudart resolves
 * driver entry points through libcuda.so.1, which a machine without an NVIDIA
 * driver does not have, so the plugin cannot initialise there. coll's
 * compatibility check only moves host memory, so this library answers the
 * version calls and hands out one stub for every driver function, which
 * returns CUDA_ERROR_NO_DEVICE. It is put first on LD_LIBRARY_PATH for the
 * plugin runs only, and is never installed or linked into anything. */
#include <stddef.h>
#include <string.h>

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define cudaSuccess 0
#define cudaErrorNoDevice 100
#define cudaDriverEntryPointSuccess 0
#define FAKE_VERSION 13000 /* CUDA 13.0: the plugin then uses ...ByVersion */

/* Every driver function but cuDriverGetVersion: "no device". The callers pass
 * arguments the stub ignores; with the C calling convention that is harmless. */
static int fake_cu_no_device(void) { return CUDA_ERROR_NO_DEVICE; }

static int fake_cuDriverGetVersion(int* v) {
  if (v == NULL) return 1; /* CUDA_ERROR_INVALID_VALUE */
  *v = FAKE_VERSION;
  return CUDA_SUCCESS;
}

static void* lookup(const char* symbol) {
  if (symbol != NULL && strcmp(symbol, "cuDriverGetVersion") == 0) return (void*)fake_cuDriverGetVersion;
  return (void*)fake_cu_no_device;
}

int cudaRuntimeGetVersion(int* v) {
  if (v == NULL) return 1; /* cudaErrorInvalidValue */
  *v = FAKE_VERSION;
  return cudaSuccess;
}
int cudaDriverGetVersion(int* v) { return cudaRuntimeGetVersion(v); }

int cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int ver, unsigned long long flags,
                                     int* status) {
  (void)ver;
  (void)flags;
  if (fn == NULL) return 1;
  *fn = lookup(symbol);
  if (status != NULL) *status = cudaDriverEntryPointSuccess;
  return cudaSuccess;
}
int cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags, int* status) {
  return cudaGetDriverEntryPointByVersion(symbol, fn, FAKE_VERSION, flags, status);
}

/* Anything else of the runtime someone might call: no device. */
int cudaGetDeviceCount(int* n) {
  if (n) *n = 0;
  return cudaErrorNoDevice;
}
int cudaGetDevice(int* d) {
  (void)d;
  return cudaErrorNoDevice;
}
int cudaSetDevice(int d) {
  (void)d;
  return cudaErrorNoDevice;
}
int cudaGetLastError(void) { return cudaErrorNoDevice; }
int cudaPeekAtLastError(void) { return cudaErrorNoDevice; }
const char* cudaGetErrorString(int e) {
  return e == 0 ? "no error" : "no CUDA-capable device is detected (test stand-in)";
}
const char* cudaGetErrorName(int e) { return e == 0 ? "cudaSuccess" : "cudaErrorNoDevice"; }
