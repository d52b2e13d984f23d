/*===- MemrefCopy.c - memref.copy between strided buffers -----------------===*
 *
 * finalize-memref-to-llvm lowers a memref.copy whose operands are not both
 * contiguous (a slice along the innermost dimension: attention's q/k/v
 * split, RoPE's rotate_half) to a call of `memrefCopy`. MLIR defines it in
 * libmlir_c_runner_utils, which the JIT loads but an exported artifact does
 * not ship (it needs LLVM's support library); this is the same function on
 * MLIR's descriptors, with no dependencies, in the library artifacts ship.
 *
 * A ranked descriptor is {allocated, aligned, offset, sizes[rank],
 * strides[rank]} (pointers and int64 alike are 8 bytes on the hosts we
 * target); an unranked one is {rank, pointer to the ranked descriptor}.
 *===----------------------------------------------------------------------===*/

#include <stdint.h>
#include <string.h>

typedef struct {
  int64_t rank;
  int64_t *descriptor;
} UnrankedMemRef;

#define MAX_RANK 64

void memrefCopy(int64_t elementSize, UnrankedMemRef *source,
                UnrankedMemRef *destination) {
  const int64_t rank = source->rank;
  const int64_t *src = source->descriptor, *dst = destination->descriptor;
  const int64_t *sizes = src + 3;
  char *from = (char *)(intptr_t)src[1] + src[2] * elementSize;
  char *to = (char *)(intptr_t)dst[1] + dst[2] * elementSize;
  if (rank == 0) {
    memcpy(to, from, (size_t)elementSize);
    return;
  }
  if (rank > MAX_RANK)
    __builtin_trap(); /* no model has 65 dimensions: never silently wrong */
  for (int64_t d = 0; d < rank; ++d)
    if (sizes[d] == 0)
      return;
  /* The innermost dimensions both buffers hold contiguously become one
     memcpy of `chunk` bytes; the outer ones are walked like an odometer. */
  const int64_t *srcStrides = src + 3 + rank, *dstStrides = dst + 3 + rank;
  int64_t chunk = elementSize, inner = rank;
  while (inner > 0 && srcStrides[inner - 1] * elementSize == chunk &&
         dstStrides[inner - 1] * elementSize == chunk) {
    --inner;
    chunk *= sizes[inner];
  }
  int64_t index[MAX_RANK] = {0};
  for (;;) {
    memcpy(to, from, (size_t)chunk);
    int64_t d = inner - 1;
    for (; d >= 0; --d) {
      from += srcStrides[d] * elementSize;
      to += dstStrides[d] * elementSize;
      if (++index[d] < sizes[d])
        break;
      from -= srcStrides[d] * elementSize * sizes[d];
      to -= dstStrides[d] * elementSize * sizes[d];
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}
