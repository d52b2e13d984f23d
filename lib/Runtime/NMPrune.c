//===- NMPrune.c - n:m magnitude pruning into n:m storage, one pass -------===//
//
// Training with runtime n:m pruning (MaskUpdate) prunes every weight each
// step: the dense master's groups of m consecutive values keep their n
// largest |x| (ties keep the lower index, NaN ranks last: the numpy
// sparsifier's order), written as the n:m storage the kernels read (each
// kept value's position in its group, ascending, and the values) and as
// the pruned dense matrix torch's side reads. One pass over the weight,
// against a dozen for the same in torch ops.
//
//===----------------------------------------------------------------------===//

#include <math.h>
#include <stdint.h>
#include <string.h>

// |x| with NaN ranking below every number (as -1).
static inline float score(float x) { return x == x ? fabsf(x) : -1.0f; }

// Each group of m: the keep mask of its n largest scores (an entry's rank
// is how many entries beat it: a larger score, or an equal one at a lower
// index).
static inline uint32_t keep_mask(const float *group, int n, int m) {
  float s[16];
  int rank[16];
  for (int j = 0; j < m; ++j) {
    s[j] = score(group[j]);
    rank[j] = 0;
  }
  for (int j = 0; j < m; ++j)
    for (int k = j + 1; k < m; ++k) {
      int later_wins = s[k] > s[j];
      rank[j] += later_wins;
      rank[k] += !later_wins;
    }
  uint32_t mask = 0;
  for (int j = 0; j < m; ++j)
    mask |= (uint32_t)(rank[j] < n) << j;
  return mask;
}

// m = 4 unrolled: six comparisons, no loops (2:4 and 1:4, the common case).
static inline uint32_t keep_mask4(const float *group, int n) {
  float a = score(group[0]), b = score(group[1]), c = score(group[2]), d = score(group[3]);
  int ra = (b > a) + (c > a) + (d > a);
  int rb = (a >= b) + (c > b) + (d > b);
  int rc = (a >= c) + (b >= c) + (d > c);
  int rd = (a >= d) + (b >= d) + (c >= d);
  return (uint32_t)(ra < n) | (uint32_t)(rb < n) << 1 | (uint32_t)(rc < n) << 2 | (uint32_t)(rd < n) << 3;
}

// The kept positions of every mask with n bits set, ascending: positions[mask][i].
static void fill_positions(uint8_t (*positions)[16], int m) {
  for (uint32_t mask = 0; mask < (1u << m); ++mask) {
    int i = 0;
    for (int j = 0; j < m; ++j)
      if (mask >> j & 1)
        positions[mask][i++] = (uint8_t)j;
  }
}

// `bits` where `keep` is 1, else +0.0f: a select on the float's bits, with
// no branch (the kept pattern is random: a branch mispredicts half the
// time, which made the loop 4x slower) and exact for NaN.
static inline uint32_t select_bits(uint32_t bits, uint32_t keep) { return bits & (0u - keep); }

// N, M: n and m, literals (2:4: loops unrolled) or the arguments n and m.
#define DEFINE_PRUNE(NAME, CRD, N, M, KEEP_MASK)                                \
  static void NAME(const uint32_t *weight, int64_t first, int64_t last, int n, \
                   int m, const uint8_t (*positions)[16], CRD *coordinates,    \
                   uint32_t *values, uint32_t *pruned) {                       \
    (void)n;                                                                   \
    (void)m;                                                                   \
    for (int64_t g = first; g < last; ++g) {                                   \
      const uint32_t *group = weight + g * (M);                                \
      uint32_t mask = KEEP_MASK((const float *)group, N, M);                   \
      uint32_t *out = pruned + g * (M);                                        \
      for (int j = 0; j < (M); ++j)                                            \
        out[j] = select_bits(group[j], mask >> j & 1);                         \
      const uint8_t *kept = positions[mask];                                   \
      for (int i = 0; i < (N); ++i) {                                          \
        coordinates[g * (N) + i] = (CRD)kept[i];                               \
        values[g * (N) + i] = group[kept[i]];                                  \
      }                                                                        \
    }                                                                          \
  }

#define KEEP_MASK4(group, n, m) keep_mask4(group, n)
DEFINE_PRUNE(prune24_crd8, uint8_t, 2, 4, KEEP_MASK4)
DEFINE_PRUNE(prune_crd8, uint8_t, n, m, keep_mask)
DEFINE_PRUNE(prune_crd16, int16_t, n, m, keep_mask)
DEFINE_PRUNE(prune_crd32, int32_t, n, m, keep_mask)
DEFINE_PRUNE(prune_crd64, int64_t, n, m, keep_mask)

// Prunes groups [first, last) of `weight` (groups of `m` floats). Writes
// `n` coordinates per group into `coordinates` (elements of `crd_bytes`
// bytes: 1, 2, 4 or 8), `n` values per group into `values` and the group
// with the dropped values zeroed into `pruned`. Returns 0, or -1 when the
// arguments are out of range (m > 8, n > m, an unknown coordinate width).
int smlir_prune_nm_f32(const float *weight, int64_t first, int64_t last,
                       int32_t n, int32_t m, void *coordinates,
                       int32_t crd_bytes, float *values, float *pruned) {
  // (m <= 8: the position table is 256 x 16 bytes, filled per call.)
  if (m < 1 || m > 8 || n < 0 || n > m || first < 0 || last < first)
    return -1;
  uint8_t positions[256][16];
  memset(positions, 0, sizeof(positions));
  fill_positions(positions, m);
  const uint8_t(*table)[16] = (const uint8_t(*)[16])positions;
  // The values move as bits (a float copy may quiet a signaling NaN).
  const uint32_t *w = (const uint32_t *)weight;
  uint32_t *v = (uint32_t *)values, *p = (uint32_t *)pruned;
  switch (crd_bytes) {
  case 1:   // (2:4's usual storage: 8-bit coordinates)
    if (n == 2 && m == 4)
      prune24_crd8(w, first, last, n, m, table, coordinates, v, p);
    else
      prune_crd8(w, first, last, n, m, table, coordinates, v, p);
    return 0;
  case 2: prune_crd16(w, first, last, n, m, table, coordinates, v, p); return 0;
  case 4: prune_crd32(w, first, last, n, m, table, coordinates, v, p); return 0;
  case 8: prune_crd64(w, first, last, n, m, table, coordinates, v, p); return 0;
  default: return -1;
  }
}
