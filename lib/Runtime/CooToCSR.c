/*===- CooToCSR.c - COO and BSR inputs as CSR buffers --------------------===*
 *
 * A sparse_coo input (compiler/regions/inputs.py) runs on the CSR SpMM
 * kernel: its row indices become row positions in one pass over nnz, which
 * also checks what the kernel relies on (indices in range, entries sorted
 * row-major without duplicates) and, where the encoding's coordinate width
 * differs from torch's int64 indices, writes the narrowed column indices.
 * Called through ctypes; a failure is reported by its code and the caller
 * names the problem.
 *
 *===----------------------------------------------------------------------===*/

#include <stddef.h>
#include <stdint.h>

#define SMLIR_COO_TO_CSR(NAME, IDX, POS, CRD)                                   \
  static int NAME(const IDX *row, const IDX *col, int64_t nnz, int64_t rows,    \
                  int64_t cols, POS *pos, CRD *crd) {                           \
    int64_t filled = 0; /* pos[0 .. filled] are written */                      \
    int64_t previous_row = 0, previous_col = -1;                                \
    pos[0] = 0;                                                                 \
    for (int64_t p = 0; p < nnz; ++p) {                                         \
      int64_t r = (int64_t)row[p], c = (int64_t)col[p];                         \
      if (r < 0 || r >= rows)                                                   \
        return 3;                                                               \
      if (c < 0 || c >= cols)                                                   \
        return 5;                                                               \
      if (r < previous_row || (r == previous_row && c <= previous_col))         \
        return 4;                                                               \
      while (filled < r)                                                        \
        pos[++filled] = (POS)p;                                                 \
      previous_row = r;                                                         \
      previous_col = c;                                                         \
      if (crd)                                                                  \
        crd[p] = (CRD)c;                                                        \
    }                                                                           \
    while (filled < rows)                                                       \
      pos[++filled] = (POS)nnz;                                                 \
    return 0;                                                                   \
  }

SMLIR_COO_TO_CSR(coo_64_32_32, int64_t, int32_t, int32_t)
SMLIR_COO_TO_CSR(coo_64_32_64, int64_t, int32_t, int64_t)
SMLIR_COO_TO_CSR(coo_64_64_32, int64_t, int64_t, int32_t)
SMLIR_COO_TO_CSR(coo_64_64_64, int64_t, int64_t, int64_t)
SMLIR_COO_TO_CSR(coo_32_32_32, int32_t, int32_t, int32_t)
SMLIR_COO_TO_CSR(coo_32_32_64, int32_t, int32_t, int64_t)
SMLIR_COO_TO_CSR(coo_32_64_32, int32_t, int64_t, int32_t)
SMLIR_COO_TO_CSR(coo_32_64_64, int32_t, int64_t, int64_t)

/* 0: valid, pos (rows + 1 entries) written, and crd (nnz entries) where
 * not NULL; 3: a row index out of range; 5: a column index out of range;
 * 4: entries not sorted row-major, or a duplicate; -1: bad widths. `row`
 * and `col` hold nnz entries of idx_bits each (the caller checked lengths). */
int smlir_coo_to_csr(const void *row, const void *col, int idx_bits,
                     int64_t nnz, int64_t rows, int64_t cols, void *pos,
                     int pos_bits, void *crd, int crd_bits) {
  int key = (idx_bits == 64 ? 4 : idx_bits == 32 ? 0 : -100) +
            (pos_bits == 64 ? 2 : pos_bits == 32 ? 0 : -100) +
            (crd_bits == 64 ? 1 : crd_bits == 32 ? 0 : -100);
  switch (key) {
  case 0: return coo_32_32_32(row, col, nnz, rows, cols, pos, crd);
  case 1: return coo_32_32_64(row, col, nnz, rows, cols, pos, crd);
  case 2: return coo_32_64_32(row, col, nnz, rows, cols, pos, crd);
  case 3: return coo_32_64_64(row, col, nnz, rows, cols, pos, crd);
  case 4: return coo_64_32_32(row, col, nnz, rows, cols, pos, crd);
  case 5: return coo_64_32_64(row, col, nnz, rows, cols, pos, crd);
  case 6: return coo_64_64_32(row, col, nnz, rows, cols, pos, crd);
  case 7: return coo_64_64_64(row, col, nnz, rows, cols, pos, crd);
  default: return -1;
  }
}

/*===- BSR blocks as CSR rows ---------------------------------------------===*
 *
 * A sparse_bsr input runs on the same CSR kernel: each r x c block is r
 * rows of c entries (its stored zeros included). One pass writes the
 * positions, coordinates and values; the caller validated the block
 * buffers (CheckCSR.c on the block positions and block columns).
 */

#define SMLIR_BSR_TO_CSR(NAME, IDX, POS, CRD)                                   \
  static void NAME(const IDX *bpos, const IDX *bcrd, const float *values,       \
                   int64_t block_rows, int64_t r, int64_t c, POS *pos,          \
                   CRD *crd, float *out) {                                      \
    for (int64_t br = 0; br < block_rows; ++br) {                               \
      int64_t lo = (int64_t)bpos[br], n = (int64_t)bpos[br + 1] - lo;           \
      for (int64_t a = 0; a < r; ++a) {                                         \
        int64_t start = lo * r * c + a * n * c;                                 \
        pos[br * r + a] = (POS)start;                                           \
        for (int64_t q = 0; q < n; ++q) {                                       \
          int64_t column = (int64_t)bcrd[lo + q] * c;                           \
          const float *from = values + ((lo + q) * r + a) * c;                  \
          int64_t to = start + q * c;                                           \
          for (int64_t b = 0; b < c; ++b) {                                     \
            crd[to + b] = (CRD)(column + b);                                    \
            out[to + b] = from[b];                                              \
          }                                                                     \
        }                                                                       \
      }                                                                         \
    }                                                                           \
    pos[block_rows * r] = (POS)((int64_t)bpos[block_rows] * r * c);             \
  }

SMLIR_BSR_TO_CSR(bsr_32_32_32, int32_t, int32_t, int32_t)
SMLIR_BSR_TO_CSR(bsr_32_32_64, int32_t, int32_t, int64_t)
SMLIR_BSR_TO_CSR(bsr_32_64_32, int32_t, int64_t, int32_t)
SMLIR_BSR_TO_CSR(bsr_32_64_64, int32_t, int64_t, int64_t)
SMLIR_BSR_TO_CSR(bsr_64_32_32, int64_t, int32_t, int32_t)
SMLIR_BSR_TO_CSR(bsr_64_32_64, int64_t, int32_t, int64_t)
SMLIR_BSR_TO_CSR(bsr_64_64_32, int64_t, int64_t, int32_t)
SMLIR_BSR_TO_CSR(bsr_64_64_64, int64_t, int64_t, int64_t)

/* 0: done; -1: bad widths. `bpos` holds block_rows + 1 entries and `bcrd`
 * / `values` the blocks (validated); `pos` block_rows * r + 1 entries,
 * `crd` and `out` blocks * r * c. */
int smlir_bsr_to_csr(const void *bpos, const void *bcrd, int idx_bits,
                     const float *values, int64_t block_rows, int64_t r,
                     int64_t c, void *pos, int pos_bits, void *crd,
                     int crd_bits, float *out) {
  int key = (idx_bits == 64 ? 4 : idx_bits == 32 ? 0 : -100) +
            (pos_bits == 64 ? 2 : pos_bits == 32 ? 0 : -100) +
            (crd_bits == 64 ? 1 : crd_bits == 32 ? 0 : -100);
#define SMLIR_BSR_CASE(K, FN)                                                  \
  case K:                                                                      \
    FN(bpos, bcrd, values, block_rows, r, c, pos, crd, out);                   \
    return 0;
  switch (key) {
    SMLIR_BSR_CASE(0, bsr_32_32_32)
    SMLIR_BSR_CASE(1, bsr_32_32_64)
    SMLIR_BSR_CASE(2, bsr_32_64_32)
    SMLIR_BSR_CASE(3, bsr_32_64_64)
    SMLIR_BSR_CASE(4, bsr_64_32_32)
    SMLIR_BSR_CASE(5, bsr_64_32_64)
    SMLIR_BSR_CASE(6, bsr_64_64_32)
    SMLIR_BSR_CASE(7, bsr_64_64_64)
  default:
    return -1;
  }
#undef SMLIR_BSR_CASE
}
