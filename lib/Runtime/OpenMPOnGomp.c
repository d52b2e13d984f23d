// LLVM's OpenMP runtime ABI (the `__kmpc_*` calls `convert-scf-to-openmp`
// emits) implemented on GNU libgomp, so compiled kernels run their parallel
// loops on the thread pool torch's own kernels use (torch's CPU wheel ships
// libgomp). Two OpenMP runtimes in one process each keep a team of threads
// spinning after a parallel loop; on a machine with as many threads as cores
// the two teams take each other's cores (measured: a model alternating torch
// ops and our kernels ran 0.9x eager at 2 threads with both runtimes).
//
// libgomp is not linked: Python hands this library the entry points of the
// libgomp torch loaded (`smlir_omp_bind`), so both share one pool. Unbound,
// parallel regions run on the calling thread. Only the calls MLIR's OpenMP
// lowering emits are implemented (fork, static worksharing, barrier,
// reductions by critical section).

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ident ident_t; // source location; unused
typedef void (*kmpc_micro)(int32_t *gtid, int32_t *btid, ...);

enum { kMaxArgs = 32, kSchedStaticChunked = 33, kSchedStatic = 34 };

static void (*gompParallel)(void (*)(void *), void *, unsigned, unsigned);
static void (*gompBarrier)(void);
static int (*ompThreadNum)(void);
static int (*ompNumThreads)(void);
static int requestedThreads; // 0: the OpenMP runtime's own default
static pthread_mutex_t reductionLock = PTHREAD_MUTEX_INITIALIZER;

// Binds libgomp's GOMP_parallel, GOMP_barrier, omp_get_thread_num and
// omp_get_num_threads; returns 0 on success.
int smlir_omp_bind(void *parallel, void *barrier, void *threadNum, void *numThreads) {
  if (!parallel || !barrier || !threadNum || !numThreads)
    return 1;
  gompParallel = (void (*)(void (*)(void *), void *, unsigned, unsigned))parallel;
  gompBarrier = (void (*)(void))barrier;
  ompThreadNum = (int (*)(void))threadNum;
  ompNumThreads = (int (*)(void))numThreads;
  return 0;
}

int smlir_omp_is_bound(void) { return gompParallel != 0; }

// Threads of the next parallel regions (0: libgomp's default for the caller,
// which torch.set_num_threads sets).
void smlir_omp_set_num_threads(int threads) { requestedThreads = threads > 0 ? threads : 0; }
int smlir_omp_requested_threads(void) { return requestedThreads; }

static int threadNum(void) { return ompThreadNum ? ompThreadNum() : 0; }
static int numThreads(void) { return ompNumThreads ? ompNumThreads() : 1; }

int32_t __kmpc_global_thread_num(ident_t *loc) {
  (void)loc;
  return threadNum();
}

struct Fork {
  kmpc_micro micro;
  int32_t argc;
  void *args[kMaxArgs];
};

#define A(i) fork->args[i]
static void runMicrotask(void *data) {
  struct Fork *fork = (struct Fork *)data;
  int32_t gtid = threadNum(), btid = gtid;
  kmpc_micro f = fork->micro;
  switch (fork->argc) {
  case 0: f(&gtid, &btid); break;
  case 1: f(&gtid, &btid, A(0)); break;
  case 2: f(&gtid, &btid, A(0), A(1)); break;
  case 3: f(&gtid, &btid, A(0), A(1), A(2)); break;
  case 4: f(&gtid, &btid, A(0), A(1), A(2), A(3)); break;
  case 5: f(&gtid, &btid, A(0), A(1), A(2), A(3), A(4)); break;
  case 6: f(&gtid, &btid, A(0), A(1), A(2), A(3), A(4), A(5)); break;
  case 7: f(&gtid, &btid, A(0), A(1), A(2), A(3), A(4), A(5), A(6)); break;
  case 8: f(&gtid, &btid, A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7)); break;
  default:
    // More captured values than any call site here passes: 32 pointers
    // (extra ones are ignored by the callee, as in libomp's own invoker).
    f(&gtid, &btid, A(0), A(1), A(2), A(3), A(4), A(5), A(6), A(7), A(8), A(9), A(10), A(11), A(12), A(13),
      A(14), A(15), A(16), A(17), A(18), A(19), A(20), A(21), A(22), A(23), A(24), A(25), A(26), A(27), A(28),
      A(29), A(30), A(31));
  }
}
#undef A

int32_t smlir_omp_max_fork_args(void) { return kMaxArgs; }

void __kmpc_fork_call(ident_t *loc, int32_t argc, kmpc_micro micro, ...) {
  (void)loc;
  struct Fork fork = {micro, argc, {0}};
  if (argc < 0 || argc > kMaxArgs) {
    // MLIR outlines a parallel loop with one argument per captured value;
    // past 32 this runtime cannot forward them (libomp stops at 15).
    fprintf(stderr, "sparse_mlir OpenMP runtime: a parallel region captures %d values (at most %d)\n", argc,
            kMaxArgs);
    abort();
  }
  va_list ap;
  va_start(ap, micro);
  for (int32_t i = 0; i < argc; ++i)
    fork.args[i] = va_arg(ap, void *);
  va_end(ap);
  if (gompParallel && requestedThreads != 1)
    gompParallel(runMicrotask, &fork, (unsigned)requestedThreads, 0);
  else
    runMicrotask(&fork); // one thread: thread 0 of a team of 1 takes every iteration
}

// libomp's static schedules: unchunked splits the trip count into one
// contiguous block per thread (sizes differ by at most one); chunked hands
// out chunks round-robin (the caller strides by *pstride).
#define STATIC_INIT(NAME, UT, ST)                                                                      \
  void NAME(ident_t *loc, int32_t gtid, int32_t schedtype, int32_t *plastiter, UT *plower, UT *pupper, \
            ST *pstride, ST incr, ST chunk) {                                                          \
    (void)loc, (void)gtid;                                                                             \
    UT lower = *plower, upper = *pupper;                                                               \
    UT step = incr > 0 ? (UT)incr : (UT)(-incr);                                                       \
    UT trips = incr > 0 ? (upper - lower) / step + 1 : (lower - upper) / step + 1;                     \
    UT threads = (UT)numThreads(), tid = (UT)threadNum();                                              \
    if (schedtype == kSchedStaticChunked && chunk > 0) {                                               \
      UT span = (UT)chunk * (UT)incr;                                                                  \
      *plower = lower + tid * span;                                                                    \
      *pupper = *plower + span - (UT)incr;                                                             \
      *pstride = (ST)(span * threads);                                                                 \
      if (plastiter)                                                                                   \
        *plastiter = tid == ((trips - 1) / (UT)chunk) % threads;                                       \
      return;                                                                                          \
    }                                                                                                  \
    UT small = trips / threads, extra = trips % threads;                                               \
    UT first = tid * small + (tid < extra ? tid : extra);                                              \
    UT count = small + (tid < extra ? 1 : 0);                                                          \
    *pstride = (ST)trips;                                                                              \
    if (plastiter)                                                                                     \
      *plastiter = count > 0 && first + count == trips;                                                \
    if (count == 0) { /* no iterations: upper - lower + 1 == 0 */                                      \
      *plower = upper + (UT)incr;                                                                      \
      return;                                                                                          \
    }                                                                                                  \
    *plower = lower + first * (UT)incr;                                                                \
    *pupper = *plower + (count - 1) * (UT)incr;                                                        \
  }

STATIC_INIT(__kmpc_for_static_init_4, int32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_4u, uint32_t, int32_t)
STATIC_INIT(__kmpc_for_static_init_8, int64_t, int64_t)
STATIC_INIT(__kmpc_for_static_init_8u, uint64_t, int64_t)
#undef STATIC_INIT

void __kmpc_for_static_fini(ident_t *loc, int32_t gtid) { (void)loc, (void)gtid; }

void __kmpc_barrier(ident_t *loc, int32_t gtid) {
  (void)loc, (void)gtid;
  if (gompBarrier)
    gompBarrier(); // a no-op outside a team
}

// Reductions: every thread combines its partial result itself under a lock
// (libomp's "critical" method: return 1, the caller combines, then ends).
int32_t __kmpc_reduce_nowait(ident_t *loc, int32_t gtid, int32_t vars, size_t size, void *data,
                             void (*reduce)(void *, void *), void *lock) {
  (void)loc, (void)gtid, (void)vars, (void)size, (void)data, (void)reduce, (void)lock;
  pthread_mutex_lock(&reductionLock);
  return 1;
}

void __kmpc_end_reduce_nowait(ident_t *loc, int32_t gtid, void *lock) {
  (void)loc, (void)gtid, (void)lock;
  pthread_mutex_unlock(&reductionLock);
}

int32_t __kmpc_reduce(ident_t *loc, int32_t gtid, int32_t vars, size_t size, void *data,
                      void (*reduce)(void *, void *), void *lock) {
  return __kmpc_reduce_nowait(loc, gtid, vars, size, data, reduce, lock);
}

void __kmpc_end_reduce(ident_t *loc, int32_t gtid, void *lock) {
  __kmpc_end_reduce_nowait(loc, gtid, lock);
  __kmpc_barrier(loc, gtid);
}
