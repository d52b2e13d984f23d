/*===- smlir_check_csr.h - validate a CSR matrix's buffers in one pass ----===*
 *
 * Shared by the C loader (sparse_mlir_runtime.c: CSR inputs of artifacts)
 * and lib/Runtime/CheckCSR.c (the Python side's ctypes library): positions
 * start at 0, end at nnz and never decrease; coordinates are in [0, inner)
 * and strictly increasing within each row. Reads pos[0 .. outer] and
 * crd[0 .. nnz) only, so a caller that passes buffers of those lengths is
 * never read out of bounds, whatever they hold.
 *
 *===----------------------------------------------------------------------===*/

#ifndef SMLIR_CHECK_CSR_H
#define SMLIR_CHECK_CSR_H

#include <stdint.h>

/* Results of smlir_check_csr_buffers. */
#define SMLIR_CSR_VALID 0
#define SMLIR_CSR_BAD_ENDS 1      /* pos[0] != 0 or pos[outer] != nnz */
#define SMLIR_CSR_DECREASING 2    /* positions decrease */
#define SMLIR_CSR_OUT_OF_RANGE 3  /* a coordinate outside [0, inner) */
#define SMLIR_CSR_UNSORTED 4      /* coordinates unsorted or repeated in a row */
#define SMLIR_CSR_BAD_WIDTHS (-1) /* index widths other than 32 / 64 bits */

/* Positions are checked monotone before any row is walked: a row's
 * [pos[i], pos[i + 1]) then lies inside [0, nnz). */
#define SMLIR_CHECK_CSR_DEFINE(NAME, POS, CRD)                                 \
  static int NAME(const POS *pos, const CRD *crd, int64_t outer, int64_t nnz,  \
                  int64_t inner) {                                             \
    if (pos[0] != 0 || (int64_t)pos[outer] != nnz)                             \
      return SMLIR_CSR_BAD_ENDS;                                               \
    for (int64_t i = 0; i < outer; ++i)                                        \
      if (pos[i + 1] < pos[i])                                                 \
        return SMLIR_CSR_DECREASING;                                           \
    for (int64_t i = 0; i < outer; ++i) {                                      \
      int64_t lo = (int64_t)pos[i], hi = (int64_t)pos[i + 1];                  \
      int64_t previous = -1;                                                   \
      for (int64_t p = lo; p < hi; ++p) {                                      \
        int64_t c = (int64_t)crd[p];                                           \
        if (c < 0 || c >= inner)                                               \
          return SMLIR_CSR_OUT_OF_RANGE;                                       \
        if (c <= previous)                                                     \
          return SMLIR_CSR_UNSORTED;                                           \
        previous = c;                                                          \
      }                                                                        \
    }                                                                          \
    return SMLIR_CSR_VALID;                                                    \
  }

SMLIR_CHECK_CSR_DEFINE(smlir_check_csr_32_32, int32_t, int32_t)
SMLIR_CHECK_CSR_DEFINE(smlir_check_csr_32_64, int32_t, int64_t)
SMLIR_CHECK_CSR_DEFINE(smlir_check_csr_64_32, int64_t, int32_t)
SMLIR_CHECK_CSR_DEFINE(smlir_check_csr_64_64, int64_t, int64_t)

/* `pos` holds outer + 1 entries, `crd` nnz (the caller's lengths). */
static inline int smlir_check_csr_buffers(const void *pos, int pos_bits, const void *crd, int crd_bits,
                                          int64_t outer, int64_t nnz, int64_t inner) {
  if (pos_bits == 32 && crd_bits == 32)
    return smlir_check_csr_32_32(pos, crd, outer, nnz, inner);
  if (pos_bits == 32 && crd_bits == 64)
    return smlir_check_csr_32_64(pos, crd, outer, nnz, inner);
  if (pos_bits == 64 && crd_bits == 32)
    return smlir_check_csr_64_32(pos, crd, outer, nnz, inner);
  if (pos_bits == 64 && crd_bits == 64)
    return smlir_check_csr_64_64(pos, crd, outer, nnz, inner);
  return SMLIR_CSR_BAD_WIDTHS;
}

#endif /* SMLIR_CHECK_CSR_H */
