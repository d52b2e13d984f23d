/*===- CheckCSR.c - validate a CSR tensor's buffers in one pass -----------===*
 *
 * Sparse model inputs (compiler/regions/inputs.py) are checked every call
 * before a kernel reads them: positions start at 0, end at nnz and never
 * decrease; coordinates are in [0, inner) and strictly increasing within
 * each row. As torch ops that is ~10 passes over nnz (0.18 ms at 10^5
 * entries, ~30 us of op overhead on a tiny graph); here it is one. Called
 * through ctypes; a failure is re-checked with the torch ops, which say
 * what is wrong.
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>

#define SMLIR_CHECK_CSR(NAME, POS, CRD)                                        \
  static int NAME(const POS *pos, const CRD *crd, int64_t outer, int64_t nnz,  \
                  int64_t inner) {                                             \
    if (pos[0] != 0 || (int64_t)pos[outer] != nnz)                             \
      return 1;                                                                \
    for (int64_t i = 0; i < outer; ++i)                                        \
      if (pos[i + 1] < pos[i])                                                 \
        return 2;                                                              \
    for (int64_t i = 0; i < outer; ++i) {                                      \
      int64_t lo = (int64_t)pos[i], hi = (int64_t)pos[i + 1];                  \
      int64_t previous = -1;                                                   \
      for (int64_t p = lo; p < hi; ++p) {                                      \
        int64_t c = (int64_t)crd[p];                                           \
        if (c < 0 || c >= inner)                                               \
          return 3;                                                            \
        if (c <= previous)                                                     \
          return 4;                                                            \
        previous = c;                                                          \
      }                                                                        \
    }                                                                          \
    return 0;                                                                  \
  }

SMLIR_CHECK_CSR(check_32_32, int32_t, int32_t)
SMLIR_CHECK_CSR(check_32_64, int32_t, int64_t)
SMLIR_CHECK_CSR(check_64_32, int64_t, int32_t)
SMLIR_CHECK_CSR(check_64_64, int64_t, int64_t)

/* 0: valid; 1: ends wrong; 2: positions decrease; 3: a coordinate out of
 * range; 4: coordinates unsorted or duplicated in a row; -1: bad widths.
 * `pos` holds outer + 1 entries, `crd` nnz (the caller checked lengths). */
int smlir_check_csr(const void *pos, int pos_bits, const void *crd,
                    int crd_bits, int64_t outer, int64_t nnz, int64_t inner) {
  if (pos_bits == 32 && crd_bits == 32)
    return check_32_32(pos, crd, outer, nnz, inner);
  if (pos_bits == 32 && crd_bits == 64)
    return check_32_64(pos, crd, outer, nnz, inner);
  if (pos_bits == 64 && crd_bits == 32)
    return check_64_32(pos, crd, outer, nnz, inner);
  if (pos_bits == 64 && crd_bits == 64)
    return check_64_64(pos, crd, outer, nnz, inner);
  return -1;
}
