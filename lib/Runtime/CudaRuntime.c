//===- CudaRuntime.c - the mgpu* entry points of compiled CUDA host code --===//
//
// Host code lowered by gpu-to-llvm calls mgpuModuleLoadJIT, mgpuLaunchKernel,
// mgpuMemcpy, ... MLIR ships them in libmlir_cuda_runtime.so, which links
// libcuda.so.1 (so it cannot even be loaded, nor a module JIT-compiled
// against it, on a machine without the driver) and libLLVM.so (136 MB, of
// which it uses nothing). This library implements the same entry points,
// with the same signatures as MLIR 22 emits them, over the driver API
// opened with dlopen at the first call: the JIT links it anywhere, exported
// CUDA artifacts ship it, and a machine with a driver runs it.
//
// Like MLIR's wrappers, every call runs in the primary context of the
// default device (the one torch uses) and reports a failing driver call on
// stderr; the Python side checks the driver and device before any call.
//
//===----------------------------------------------------------------------===//

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;
typedef uint64_t CUdeviceptr;

enum {
  kStreamNonBlocking = 1,           // CU_STREAM_NON_BLOCKING
  kEventDisableTiming = 2,          // CU_EVENT_DISABLE_TIMING
  kMaxDynamicSharedSizeBytes = 8,   // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  kJitOptimizationLevel = 7,        // CU_JIT_OPTIMIZATION_LEVEL
  kStaticSharedLimit = 48 * 1024,   // more must be opted into per function
  kDeinitialized = 4,               // CUDA_ERROR_DEINITIALIZED
};

// The driver functions used, by their exported (versioned) names.
#define SMLIR_CUDA_FUNCTIONS(X)                                                \
  X(cuInit, "cuInit", CUresult, (unsigned))                                    \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice *, int))                   \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult,            \
    (CUcontext *, CUdevice))                                                   \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", CUresult, (CUcontext))            \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", CUresult, (CUcontext *))            \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult, const char **))     \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, (CUmodule *, const void *))\
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", CUresult,                        \
    (CUmodule *, const void *, unsigned, int *, void **))                      \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule))                    \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                      \
    (CUfunction *, CUmodule, const char *))                                    \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, (CUfunction, int, int))\
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                                \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,   \
     unsigned, CUstream, void **, void **))                                    \
  X(cuStreamCreate, "cuStreamCreate", CUresult, (CUstream *, unsigned))        \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream))               \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream))          \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult,                          \
    (CUstream, CUevent, unsigned))                                             \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent *, unsigned))           \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent))                  \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent, CUstream))             \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent))             \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr *, size_t))            \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr))                        \
  X(cuMemcpyAsync, "cuMemcpyAsync", CUresult,                                  \
    (CUdeviceptr, CUdeviceptr, size_t, CUstream))                              \
  X(cuMemsetD32Async, "cuMemsetD32Async", CUresult,                            \
    (CUdeviceptr, unsigned, size_t, CUstream))                                 \
  X(cuMemsetD16Async, "cuMemsetD16Async", CUresult,                            \
    (CUdeviceptr, unsigned short, size_t, CUstream))

#define SMLIR_DECLARE(field, symbol, ret, args) ret(*field) args;
static struct {
  SMLIR_CUDA_FUNCTIONS(SMLIR_DECLARE)
} cu;
#undef SMLIR_DECLARE

static pthread_once_t driverOnce = PTHREAD_ONCE_INIT;
static bool driverLoaded;
static int defaultDevice;
static CUcontext primaryContext;
static pthread_mutex_t contextLock = PTHREAD_MUTEX_INITIALIZER;
static bool tracing;  // SPARSE_MLIR_CUDA_TRACE=1: every entry point on stderr

static void trace(const char *format, ...) {
  if (!tracing)
    return;
  va_list args;
  va_start(args, format);
  fputs("sparse_mlir CUDA runtime: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
}

static void loadDriver(void) {
  const char *trace = getenv("SPARSE_MLIR_CUDA_TRACE");
  tracing = trace && *trace && *trace != '0';
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!library) {
    fprintf(stderr, "sparse_mlir CUDA runtime: cannot load libcuda.so.1 (%s)\n",
            dlerror());
    return;
  }
#define SMLIR_RESOLVE(field, symbol, ret, args)                                \
  *(void **)(&cu.field) = dlsym(library, symbol);                              \
  if (!cu.field) {                                                             \
    fprintf(stderr, "sparse_mlir CUDA runtime: libcuda.so.1 lacks %s\n",       \
            symbol);                                                           \
    return;                                                                    \
  }
  SMLIR_CUDA_FUNCTIONS(SMLIR_RESOLVE)
#undef SMLIR_RESOLVE
  driverLoaded = true;
}

static bool report(CUresult result, const char *call) {
  if (result == 0)
    return true;
  const char *name = NULL;
  if (cu.cuGetErrorName)
    cu.cuGetErrorName(result, &name);
  fprintf(stderr, "sparse_mlir CUDA runtime: %s failed with %s\n", call,
          name ? name : "an unknown error");
  return false;
}
#define CHECK(call) report(call, #call)

/// Makes the default device's primary context current; false (reported)
/// when there is no driver or device.
static bool enter(void) {
  pthread_once(&driverOnce, loadDriver);
  if (!driverLoaded)
    return false;
  pthread_mutex_lock(&contextLock);
  if (!primaryContext) {
    CUdevice device;
    if (CHECK(cu.cuInit(0)) && CHECK(cu.cuDeviceGet(&device, defaultDevice)))
      CHECK(cu.cuDevicePrimaryCtxRetain(&primaryContext, device));
  }
  pthread_mutex_unlock(&contextLock);
  if (!primaryContext)
    return false;
  CUresult result = cu.cuCtxPushCurrent(primaryContext);
  // At process exit the driver may shut down before a library's destructor
  // unloads its module: nothing is left to release then.
  return result != kDeinitialized && report(result, "cuCtxPushCurrent");
}

static void leave(void) {
  CUcontext previous;
  CHECK(cu.cuCtxPopCurrent(&previous));
}

CUmodule mgpuModuleLoad(void *data, size_t size) {
  (void)size;
  CUmodule module = NULL;
  if (enter()) {
    CHECK(cu.cuModuleLoadData(&module, data));
    leave();
  }
  return module;
}

CUmodule mgpuModuleLoadJIT(void *data, int optLevel) {
  CUmodule module = NULL;
  if (enter()) {
    int options[] = {kJitOptimizationLevel};
    void *values[] = {(void *)(intptr_t)optLevel};
    CHECK(cu.cuModuleLoadDataEx(&module, data, 1, options, values));
    leave();
  }
  trace("mgpuModuleLoadJIT(%p, O%d) -> %p", data, optLevel, module);
  return module;
}

void mgpuModuleUnload(CUmodule module) {
  if (module && enter()) {
    CHECK(cu.cuModuleUnload(module));
    leave();
  }
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  CUfunction function = NULL;
  if (module && enter()) {
    CHECK(cu.cuModuleGetFunction(&function, module, name));
    leave();
  }
  trace("mgpuModuleGetFunction(%p, %s) -> %p", module, name, function);
  return function;
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream stream,
                      void **params, void **extra, size_t paramsCount) {
  trace("mgpuLaunchKernel(%p, grid %ld x %ld x %ld, block %ld x %ld x %ld, "
        "%d B shared, stream %p, %zu parameters)",
        function, (long)gridX, (long)gridY, (long)gridZ, (long)blockX,
        (long)blockY, (long)blockZ, smem, stream, paramsCount);
  if (!function) {
    fprintf(stderr, "sparse_mlir CUDA runtime: launch of a kernel that was "
                    "not loaded (see the messages above)\n");
    return;
  }
  if (!enter())
    return;
  if (smem > kStaticSharedLimit)
    CHECK(cu.cuFuncSetAttribute(function, kMaxDynamicSharedSizeBytes, smem));
  CHECK(cu.cuLaunchKernel(function, gridX, gridY, gridZ, blockX, blockY,
                          blockZ, smem, stream, params, extra));
  if (tracing)
    CHECK(cu.cuStreamSynchronize(stream)); // a faulting kernel shows here
  leave();
}

CUstream mgpuStreamCreate(void) {
  CUstream stream = NULL;
  if (enter()) {
    CHECK(cu.cuStreamCreate(&stream, kStreamNonBlocking));
    leave();
  }
  return stream;
}

void mgpuStreamDestroy(CUstream stream) {
  if (stream && enter()) {
    CHECK(cu.cuStreamDestroy(stream));
    leave();
  }
}

void mgpuStreamSynchronize(CUstream stream) {
  trace("mgpuStreamSynchronize(%p)", stream);
  if (enter()) {
    CHECK(cu.cuStreamSynchronize(stream));
    leave();
  }
}

void mgpuStreamWaitEvent(CUstream stream, CUevent event) {
  if (enter()) {
    CHECK(cu.cuStreamWaitEvent(stream, event, 0));
    leave();
  }
}

CUevent mgpuEventCreate(void) {
  CUevent event = NULL;
  if (enter()) {
    CHECK(cu.cuEventCreate(&event, kEventDisableTiming));
    leave();
  }
  return event;
}

void mgpuEventDestroy(CUevent event) {
  if (event && enter()) {
    CHECK(cu.cuEventDestroy(event));
    leave();
  }
}

void mgpuEventSynchronize(CUevent event) {
  if (enter()) {
    CHECK(cu.cuEventSynchronize(event));
    leave();
  }
}

void mgpuEventRecord(CUevent event, CUstream stream) {
  if (enter()) {
    CHECK(cu.cuEventRecord(event, stream));
    leave();
  }
}

void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream, bool isHostShared) {
  (void)stream;
  CUdeviceptr pointer = 0;
  if (isHostShared) {
    fprintf(stderr, "sparse_mlir CUDA runtime: host-shared allocations are "
                    "not supported\n");
    return NULL;
  }
  if (enter()) {
    CHECK(cu.cuMemAlloc(&pointer, sizeBytes ? sizeBytes : 1));
    leave();
  }
  trace("mgpuMemAlloc(%llu) -> %p", (unsigned long long)sizeBytes,
        (void *)(uintptr_t)pointer);
  return (void *)(uintptr_t)pointer;
}

void mgpuMemFree(void *pointer, CUstream stream) {
  (void)stream;
  if (pointer && enter()) {
    CHECK(cu.cuMemFree((CUdeviceptr)(uintptr_t)pointer));
    leave();
  }
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream stream) {
  trace("mgpuMemcpy(%p <- %p, %zu B, stream %p)", dst, src, sizeBytes, stream);
  if (enter()) {
    CHECK(cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst,
                           (CUdeviceptr)(uintptr_t)src, sizeBytes, stream));
    leave();
  }
}

void mgpuMemset32(void *dst, unsigned value, size_t count, CUstream stream) {
  if (enter()) {
    CHECK(cu.cuMemsetD32Async((CUdeviceptr)(uintptr_t)dst, value, count,
                              stream));
    leave();
  }
}

void mgpuMemset16(void *dst, unsigned short value, size_t count,
                  CUstream stream) {
  if (enter()) {
    CHECK(cu.cuMemsetD16Async((CUdeviceptr)(uintptr_t)dst, value, count,
                              stream));
    leave();
  }
}

void mgpuSetDefaultDevice(int32_t device) { defaultDevice = device; }
