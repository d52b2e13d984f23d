/*===- CheckCSR.c - validate a CSR tensor's buffers in one pass -----------===*
 *
 * Sparse model inputs (compiler/regions/inputs.py, runtime/csr_inputs.py)
 * are checked every call before a kernel reads them: positions start at 0,
 * end at nnz and never decrease; coordinates are in [0, inner) and strictly
 * increasing within each row. As torch ops that is ~10 passes over nnz
 * (0.18 ms at 10^5 entries, ~30 us of op overhead on a tiny graph); here it
 * is one. Called through ctypes; a failure is re-checked with the torch
 * ops, which say what is wrong. The check itself is the C loader's too
 * (sparse_mlir/c/smlir_check_csr.h).
 *
 *===----------------------------------------------------------------------===*/

#include "../../sparse_mlir/c/smlir_check_csr.h"

/* 0: valid; 1: ends wrong; 2: positions decrease; 3: a coordinate out of
 * range; 4: coordinates unsorted or duplicated in a row; -1: bad widths.
 * `pos` holds outer + 1 entries, `crd` nnz (the caller checked lengths). */
int smlir_check_csr(const void *pos, int pos_bits, const void *crd,
                    int crd_bits, int64_t outer, int64_t nnz, int64_t inner) {
  return smlir_check_csr_buffers(pos, pos_bits, crd, crd_bits, outer, nnz, inner);
}
