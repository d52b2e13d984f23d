/*===- sparse_mlir_runtime.c - the C loader of sparse_mlir artifacts ------===*
 *
 * Mirrors sparse_mlir/artifact.py's `load()`: the same checks in the same
 * order, the same memref calling convention (see sparse_mlir.h).
 *
 *===----------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include "sparse_mlir.h"
#include "smlir_check_csr.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "SMLIRART"
#define CPU_FLAGS_BYTES 512
#define VERSION_AT 12
#define HEADER_SHA_AT 48
#define DATA_SHA_AT 80
#define CPU_FLAGS_AT 112
#define HEADER_BYTES (CPU_FLAGS_AT + CPU_FLAGS_BYTES)
#define RECORD_BYTES (4 + 4 + 8 * SMLIR_MAX_RANK + 8 + 8)
#define FILE_BYTES (SMLIR_FILE_NAME_BYTES + 8 + 32)
#define ALIGNMENT 64
#define ENTRY_POINT "_mlir__mlir_ciface_main"
#define FLAG_CALL_NUMBER 1u
#define FLAG_CUDA 2u /* target="cuda" host code: loaded from Python only */
#define OLDEST_VERSION 2 /* format 2: no CSR inputs (0 in every input record's bytes) */
/* No tensor has more elements than this (2^48): byte counts cannot overflow. */
#define MAX_ELEMENTS ((uint64_t)1 << 48)

typedef struct record {
  int32_t dtype;
  int32_t rank;
  int64_t shape[SMLIR_MAX_RANK];
  uint64_t offset;
  uint64_t bytes;
} record;

/* A memref descriptor of any rank up to SMLIR_MAX_RANK: allocated, aligned,
 * offset, sizes[rank], strides[rank], as MLIR lays it out for that rank. */
typedef struct descriptor {
  int64_t fields[3 + 2 * SMLIR_MAX_RANK];
} descriptor;

struct smlir_model {
  void *library;
  void (*entry)(void **);
  /* The artifact's allocation cache (lib/libsparse_mlir_alloc.so): the
     kernel's result buffer goes back to it for the next call. */
  void (*release)(void *);
  unsigned char *blob; /* weights.bin */
  uint32_t flags;
  int num_inputs, num_buffers;
  record result;
  record *inputs, *buffers;
  descriptor *buffer_descriptors;
  int64_t call_number;
  uint8_t sha256[32]; /* of the header: the artifact's hash */
};

static void fail(char *error, size_t size, const char *format, ...) {
  if (!error || !size)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(error, size, format, args);
  va_end(args);
}

/* ------------------------------------------------------------ SHA-256 (FIPS 180-4) */

typedef struct sha256_state {
  uint32_t h[8];
  uint64_t length; /* bytes hashed so far */
  unsigned char block[64];
  size_t used;
} sha256_state;

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void sha256_block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

static void sha256_init(sha256_state *state) {
  static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(state->h, initial, sizeof initial);
  state->length = 0;
  state->used = 0;
}

static void sha256_update(sha256_state *state, const void *data, size_t size) {
  const unsigned char *p = data;
  state->length += size;
  if (state->used) {
    size_t take = size < 64 - state->used ? size : 64 - state->used;
    memcpy(state->block + state->used, p, take);
    state->used += take, p += take, size -= take;
    if (state->used < 64)
      return;
    sha256_block(state->h, state->block);
    state->used = 0;
  }
  for (; size >= 64; p += 64, size -= 64)
    sha256_block(state->h, p);
  memcpy(state->block, p, size);
  state->used = size;
}

static void sha256_final(sha256_state *state, uint8_t digest[32]) {
  uint64_t bits = state->length * 8;
  unsigned char pad[72] = {0x80};
  size_t padding = (state->used < 56 ? 56 : 120) - state->used;
  for (int i = 0; i < 8; ++i)
    pad[padding + i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(state, pad, padding + 8);
  for (int i = 0; i < 8; ++i)
    for (int k = 0; k < 4; ++k)
      digest[4 * i + k] = (uint8_t)(state->h[i] >> (24 - 8 * k));
}

void smlir_sha256(const void *data, size_t size, uint8_t digest[32]) {
  sha256_state state;
  sha256_init(&state);
  sha256_update(&state, data, size);
  sha256_final(&state, digest);
}

static void hex(const uint8_t digest[32], char out[65]) {
  for (int i = 0; i < 32; ++i)
    snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* ------------------------------------------------------------ files */

static uint32_t u32_at(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t u64_at(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Opens `path` for reading if it is a regular file (never blocks on a FIFO or
 * a device); returns -1 with a reason otherwise. */
static int open_regular(const char *path, uint64_t *size, const char **why) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat info;
  if (fd < 0) {
    *why = errno == ENOENT ? "missing" : "unreadable";
    return -1;
  }
  if (fstat(fd, &info) || !S_ISREG(info.st_mode)) {
    *why = "not a regular file";
    close(fd);
    return -1;
  }
  *size = (uint64_t)info.st_size;
  return fd;
}

static int read_all(int fd, unsigned char *data, size_t size) {
  for (size_t done = 0; done < size;) {
    ssize_t got = pread(fd, data + done, size - done, (off_t)done);
    if (got <= 0)
      return -1;
    done += (size_t)got;
  }
  return 0;
}

/* Whether the file at `path` is regular, `bytes` long and hashes to `expected`. */
static const char *check_file(const char *path, uint64_t bytes, const uint8_t expected[32]) {
  const char *why = NULL;
  uint64_t size = 0;
  int fd = open_regular(path, &size, &why);
  if (fd < 0)
    return why;
  if (size != bytes) {
    close(fd);
    return "size differs from the one weights.bin records (corrupted or replaced)";
  }
  enum { CHUNK = 1 << 16 };
  unsigned char *chunk = malloc(CHUNK);
  if (!chunk) {
    close(fd);
    return "unreadable (out of memory)";
  }
  sha256_state state;
  sha256_init(&state);
  ssize_t got;
  while ((got = read(fd, chunk, CHUNK)) > 0)
    sha256_update(&state, chunk, (size_t)got);
  free(chunk);
  close(fd);
  uint64_t hashed = state.length;
  uint8_t digest[32];
  sha256_final(&state, digest);
  if (got < 0 || hashed != bytes)
    return "unreadable";
  return memcmp(digest, expected, 32) ? "SHA-256 mismatch (corrupted or replaced)" : NULL;
}

/* A file entry's name: "model.so", "manifest.json" or "lib/<name>". */
static int valid_name(const char *name) {
  if (!strcmp(name, "model.so") || !strcmp(name, "manifest.json"))
    return 1;
  const char *base = name + 4;
  return !strncmp(name, "lib/", 4) && *base && !strchr(base, '/') && strcmp(base, ".") && strcmp(base, "..");
}

/* Checks every file the header lists, and that lib/ holds no other file. */
static int check_files(const char *path, const unsigned char *table, uint32_t count, char *error,
                       size_t error_size) {
  char file[4096], names[SMLIR_MAX_FILES][SMLIR_FILE_NAME_BYTES];
  int has_library = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const unsigned char *entry = table + (size_t)FILE_BYTES * i;
    memcpy(names[i], entry, SMLIR_FILE_NAME_BYTES);
    const char *end = memchr(names[i], 0, SMLIR_FILE_NAME_BYTES);
    int padded = end != NULL;
    for (const char *p = end; p && p < names[i] + SMLIR_FILE_NAME_BYTES; ++p)
      padded &= !*p;
    if (!padded || !valid_name(names[i])) {
      fail(error, error_size, "%s/weights.bin: file entry %u has a name that is not model.so, manifest.json or "
                              "lib/<file>; export the model again", path, i);
      return -1;
    }
    for (uint32_t k = 0; k < i; ++k)
      if (!strcmp(names[k], names[i])) {
        fail(error, error_size, "%s/weights.bin: file entry %u (%s) is listed twice; export the model again", path,
             i, names[i]);
        return -1;
      }
    has_library |= !strcmp(names[i], "model.so");
    if (snprintf(file, sizeof file, "%s/%s", path, names[i]) >= (int)sizeof file) {
      fail(error, error_size, "%s: path too long", path);
      return -1;
    }
    const char *why = check_file(file, u64_at(entry + SMLIR_FILE_NAME_BYTES), entry + SMLIR_FILE_NAME_BYTES + 8);
    if (why) {
      fail(error, error_size, "%s: %s; copy the artifact again or export it again", file, why);
      return -1;
    }
  }
  if (!has_library) {
    fail(error, error_size, "%s/weights.bin: lists no model.so among its files; export the model again", path);
    return -1;
  }
  /* The dynamic loader searches lib/ ($ORIGIN/lib) for every dependency: only
     listed (checked) files may be there. */
  snprintf(file, sizeof file, "%s/lib", path);
  DIR *dir = opendir(file);
  for (struct dirent *item; dir && (item = readdir(dir));) {
    if (!strcmp(item->d_name, ".") || !strcmp(item->d_name, ".."))
      continue;
    int listed = 0;
    for (uint32_t i = 0; i < count && !listed; ++i)
      listed = !strncmp(names[i], "lib/", 4) && !strcmp(names[i] + 4, item->d_name);
    if (!listed) {
      fail(error, error_size, "%s/%s: not part of the artifact (weights.bin does not list it), and the model's "
                              "libraries are searched for in lib/; remove it or copy the artifact again",
           file, item->d_name);
      closedir(dir);
      return -1;
    }
  }
  if (dir)
    closedir(dir);
  return 0;
}

size_t smlir_dtype_size(int32_t dtype) {
  switch (dtype) {
  case SMLIR_F64:
  case SMLIR_I64:
    return 8;
  case SMLIR_F32:
  case SMLIR_I32:
    return 4;
  case SMLIR_F16:
  case SMLIR_I16:
    return 2;
  case SMLIR_I8:
    return 1;
  default:
    return 0;
  }
}

static const char *dtype_name(int32_t dtype) {
  static const char *names[] = {"?", "float32", "float64", "float16", "int8", "int16", "int32", "int64"};
  return dtype >= 1 && dtype <= 7 ? names[dtype] : "?";
}

size_t smlir_num_elements(const smlir_tensor *tensor) {
  size_t n = 1;
  for (int i = 0; i < tensor->rank; ++i)
    n *= (size_t)tensor->shape[i];
  return n;
}

static record parse_record(const unsigned char *p) {
  record r;
  r.dtype = (int32_t)u32_at(p);
  r.rank = (int32_t)u32_at(p + 4);
  for (int i = 0; i < SMLIR_MAX_RANK; ++i)
    r.shape[i] = (int64_t)u64_at(p + 8 + 8 * i);
  r.offset = u64_at(p + 8 + 8 * SMLIR_MAX_RANK);
  r.bytes = u64_at(p + 16 + 8 * SMLIR_MAX_RANK);
  return r;
}

/* A record's dtype, rank and shape are ones this loader can describe, and a
 * buffer's data lies inside the data region. Returns NULL or what is wrong. */
static const char *check_record(const record *r, int buffer, uint64_t data_offset, uint64_t size, char *why,
                                size_t why_size) {
  if (!smlir_dtype_size(r->dtype))
    return snprintf(why, why_size, "unknown dtype code %u", (unsigned)r->dtype), why;
  if ((uint32_t)r->rank > SMLIR_MAX_RANK)
    return snprintf(why, why_size, "rank %u (at most %d)", (unsigned)r->rank, SMLIR_MAX_RANK), why;
  uint64_t elements = 1;
  for (int i = 0; i < r->rank; ++i) {
    if (r->shape[i] < 0 || (uint64_t)r->shape[i] > MAX_ELEMENTS)
      return snprintf(why, why_size, "dimension %d of size %lld", i, (long long)r->shape[i]), why;
    elements *= (uint64_t)r->shape[i];
    if (elements > MAX_ELEMENTS)
      return snprintf(why, why_size, "more than 2^48 elements"), why;
  }
  if (!buffer) {   /* an input: offset is its values' bound, for integer inputs only */
    int integer = r->dtype == SMLIR_I8 || r->dtype == SMLIR_I16 || r->dtype == SMLIR_I32 || r->dtype == SMLIR_I64;
    if (r->offset && (!integer || r->offset > (uint64_t)INT64_MAX))
      return snprintf(why, why_size, "a values bound of %llu for a %s input (bounds are for integer inputs)",
                      (unsigned long long)r->offset, dtype_name(r->dtype)), why;
    /* bytes: the input's kind (0: dense; a CSR matrix of float32) */
    uint64_t pos_bits = r->bytes >> 8 & 0xFF, crd_bits = r->bytes >> 16 & 0xFF;
    if (r->bytes && ((r->bytes & 0xFF) != SMLIR_INPUT_CSR || r->bytes >> 24 || (pos_bits != 32 && pos_bits != 64) ||
                     (crd_bits != 32 && crd_bits != 64) || r->rank != 2 || r->dtype != SMLIR_F32 || r->offset))
      return snprintf(why, why_size, "input kind %#llx for a %s rank-%d input (known: 0, dense; 1 | pos bits << 8 | "
                      "crd bits << 16 for a float32 CSR matrix, bits 32 or 64)", (unsigned long long)r->bytes,
                      dtype_name(r->dtype), (int)r->rank), why;
    return NULL;
  }
  uint64_t bytes = elements * smlir_dtype_size(r->dtype);
  if (r->bytes != bytes)
    return snprintf(why, why_size, "%llu bytes for %llu elements of %s (expected %llu)", (unsigned long long)r->bytes,
                    (unsigned long long)elements, dtype_name(r->dtype), (unsigned long long)bytes), why;
  if (r->offset < data_offset || r->offset % ALIGNMENT || r->offset > size || r->bytes > size - r->offset)
    return snprintf(why, why_size, "data at offset %llu, %llu bytes, outside the data region [%llu, %llu) or not "
                    "%d-byte aligned", (unsigned long long)r->offset, (unsigned long long)r->bytes,
                    (unsigned long long)data_offset, (unsigned long long)size, ALIGNMENT), why;
  return NULL;
}

/* Every ISA extension in `needed` (space separated) is in /proc/cpuinfo. */
static int check_cpu(const char *needed, char *missing, size_t missing_size) {
  FILE *file = fopen("/proc/cpuinfo", "r");
  char line[8192] = "";
  char *flags = NULL;
  if (file) {
    while (fgets(line, sizeof line, file))
      if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) {
        flags = strchr(line, ':');
        break;
      }
    fclose(file);
  }
  missing[0] = '\0';
  char wanted[CPU_FLAGS_BYTES + 1];
  snprintf(wanted, sizeof wanted, "%s", needed);
  for (char *save = NULL, *flag = strtok_r(wanted, " ", &save); flag; flag = strtok_r(NULL, " ", &save)) {
    int found = 0;
    size_t length = strlen(flag);
    for (const char *p = flags; p && (p = strstr(p, flag)); p += length)
      if ((p[-1] == ' ' || p[-1] == ':') && (p[length] == ' ' || p[length] == '\n' || !p[length])) {
        found = 1;
        break;
      }
    if (!found && strlen(missing) + length + 2 < missing_size) {
      strcat(missing, missing[0] ? " " : "");
      strcat(missing, flag);
    }
  }
  return missing[0] == '\0';
}

static void describe(descriptor *d, void *data, const int64_t *shape, int rank) {
  memset(d, 0, sizeof *d);
  d->fields[0] = d->fields[1] = (int64_t)(intptr_t)data;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    d->fields[3 + i] = shape[i];
    d->fields[3 + rank + i] = stride;
    stride *= shape[i];
  }
}

/* Reads weights.bin after checking its fixed header against the file's size:
 * NULL with a message, or the whole file (`*size` bytes). */
static unsigned char *read_weights(const char *path, const char *file, uint64_t *size, char *error,
                                   size_t error_size) {
  const char *why = NULL;
  int fd = open_regular(file, size, &why);
  if (fd < 0) {
    fail(error, error_size, "%s: not a sparse_mlir artifact (weights.bin is %s); pass the directory fn.export() "
                            "wrote", path, why);
    return NULL;
  }
  unsigned char header[HEADER_BYTES];
  size_t have = *size < HEADER_BYTES ? (size_t)*size : HEADER_BYTES;
  unsigned char *blob = NULL;
  if (read_all(fd, header, have) || have < 16 || memcmp(header, MAGIC, 8)) {
    fail(error, error_size, "%s: not a sparse_mlir weights file (bad magic); pass the directory fn.export() wrote",
         file);
    goto done;
  }
  uint32_t version = u32_at(header + VERSION_AT);
  if (version < OLDEST_VERSION || version > SMLIR_FORMAT_VERSION) {
    fail(error, error_size, "%s: artifact format version %u, but this runtime reads version %d or %d%s; export the "
                            "model again with the matching sparse_mlir", path, version, OLDEST_VERSION,
         SMLIR_FORMAT_VERSION, version < OLDEST_VERSION ? " (older artifacts bind no hashes)" : "");
    goto done;
  }
  if (have < HEADER_BYTES) {
    fail(error, error_size, "%s: truncated (%llu bytes, its header alone takes %d); copy the artifact again or "
                            "export it again", file, (unsigned long long)*size, HEADER_BYTES);
    goto done;
  }
  uint32_t inputs = u32_at(header + 20), buffers = u32_at(header + 24), files = u32_at(header + 28);
  uint64_t data_offset = u64_at(header + 32), data_bytes = u64_at(header + 40);
  if (inputs > SMLIR_MAX_INPUTS || buffers > SMLIR_MAX_BUFFERS || files > SMLIR_MAX_FILES) {
    fail(error, error_size, "%s: header lists %u inputs, %u buffers, %u files (this loader takes at most %d, %d, "
                            "%d); export the model again", file, inputs, buffers, files, SMLIR_MAX_INPUTS,
         SMLIR_MAX_BUFFERS, SMLIR_MAX_FILES);
    goto done;
  }
  uint64_t tables = HEADER_BYTES + (uint64_t)RECORD_BYTES * (1 + inputs + buffers) + (uint64_t)FILE_BYTES * files;
  if (data_offset < tables || data_offset % ALIGNMENT) {
    fail(error, error_size, "%s: data_offset %llu, but its header takes %llu bytes (and data starts %d-byte "
                            "aligned); export the model again", file, (unsigned long long)data_offset,
         (unsigned long long)tables, ALIGNMENT);
    goto done;
  }
  if (data_offset > *size || data_bytes != *size - data_offset) {
    fail(error, error_size, "%s: truncated or extended (%llu bytes, its header says %llu + %llu); copy the artifact "
                            "again or export it again", file, (unsigned long long)*size,
         (unsigned long long)data_offset, (unsigned long long)data_bytes);
    goto done;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  uint64_t memory = pages > 0 && page_size > 0 ? (uint64_t)pages * (uint64_t)page_size : UINT64_MAX;
  if (*size > memory || *size > SIZE_MAX - ALIGNMENT ||
      !(blob = aligned_alloc(ALIGNMENT, ((size_t)*size + ALIGNMENT) / ALIGNMENT * ALIGNMENT))) {
    fail(error, error_size, "%s: %llu bytes do not fit in this machine's memory (%llu bytes)", file,
         (unsigned long long)*size, (unsigned long long)memory);
    goto done;
  }
  if (read_all(fd, blob, (size_t)*size)) {
    fail(error, error_size, "%s: cannot be read (%s); copy the artifact again", file, strerror(errno));
    free(blob);
    blob = NULL;
  }
done:
  close(fd);
  return blob;
}

smlir_model *smlir_load(const char *path, char *error, size_t error_size) {
  return smlir_load_expecting(path, NULL, error, error_size);
}

void smlir_artifact_sha256(const smlir_model *model, char out[65]) { hex(model->sha256, out); }

smlir_model *smlir_load_expecting(const char *path, const char *expect_sha256, char *error, size_t error_size) {
  char file[4096], digest_text[65];
  uint64_t size = 0;
  if (strlen(path) > sizeof file - 100) {
    fail(error, error_size, "%.100s...: path too long (at most %zu bytes)", path, sizeof file - 100);
    return NULL;
  }
  snprintf(file, sizeof file, "%s/weights.bin", path);
  unsigned char *blob = read_weights(path, file, &size, error, error_size);
  if (!blob)
    return NULL;
  smlir_model *model = calloc(1, sizeof *model);
  if (!model) {
    free(blob);
    fail(error, error_size, "%s: out of memory", path);
    return NULL;
  }
  model->blob = blob;
  model->flags = u32_at(blob + 16);
  model->num_inputs = (int)u32_at(blob + 20);
  model->num_buffers = (int)u32_at(blob + 24);
  uint32_t num_files = u32_at(blob + 28);
  uint64_t data_offset = u64_at(blob + 32);
  /* The header's hash (its own field zeroed), then the data's. */
  static const uint8_t zeros[32];
  uint8_t digest[32];
  sha256_state state;
  sha256_init(&state);
  sha256_update(&state, blob, HEADER_SHA_AT);
  sha256_update(&state, zeros, 32);
  sha256_update(&state, blob + DATA_SHA_AT, (size_t)data_offset - DATA_SHA_AT);
  sha256_final(&state, model->sha256);
  if (memcmp(model->sha256, blob + HEADER_SHA_AT, 32)) {
    fail(error, error_size, "%s: header SHA-256 mismatch (the file is corrupted); copy the artifact again or export "
                            "it again", file);
    goto failed;
  }
  smlir_sha256(blob + data_offset, (size_t)(size - data_offset), digest);
  if (memcmp(digest, blob + DATA_SHA_AT, 32)) {
    fail(error, error_size, "%s: data SHA-256 mismatch (the weights are corrupted); copy the artifact again or "
                            "export it again", file);
    goto failed;
  }
  hex(model->sha256, digest_text);
  if (expect_sha256 && strcasecmp(expect_sha256, digest_text)) {
    fail(error, error_size, "%s: the artifact's SHA-256 is %s, not the expected %s: it is not the artifact that was "
                            "published (replaced or damaged); fetch it again from its source", path, digest_text,
         expect_sha256);
    goto failed;
  }
  if (model->flags & FLAG_CUDA) {
    fail(error, error_size, "%s: a target=\"cuda\" artifact; its GPU buffers are set up by the Python loader "
                            "(sparse_mlir.load), which this C loader does not do yet", file);
    goto failed;
  }
  /* Every record, before anything uses one. */
  model->inputs = calloc((size_t)model->num_inputs + 1, sizeof(record));
  model->buffers = calloc((size_t)model->num_buffers + 1, sizeof(record));
  model->buffer_descriptors = calloc((size_t)model->num_buffers + 1, sizeof(descriptor));
  if (!model->inputs || !model->buffers || !model->buffer_descriptors) {
    fail(error, error_size, "%s: out of memory", path);
    goto failed;
  }
  char why[256];
  for (int i = 0; i < 1 + model->num_inputs + model->num_buffers; ++i) {
    int is_buffer = i > model->num_inputs;
    record r = parse_record(blob + HEADER_BYTES + (size_t)RECORD_BYTES * i);
    const char *wrong = check_record(&r, is_buffer, data_offset, size, why, sizeof why);
    if (wrong) {
      char what[64];
      if (i == 0)
        snprintf(what, sizeof what, "the result");
      else
        snprintf(what, sizeof what, "%s %d", is_buffer ? "buffer" : "input",
                 is_buffer ? i - 1 - model->num_inputs : i - 1);
      fail(error, error_size, "%s: record of %s: %s; export the model again", file, what, wrong);
      goto failed;
    }
    if (i == 0)
      model->result = r;
    else if (!is_buffer)
      model->inputs[i - 1] = r;
    else
      model->buffers[i - 1 - model->num_inputs] = r;
  }
  char needed[CPU_FLAGS_BYTES + 1], missing[CPU_FLAGS_BYTES + 1];
  memcpy(needed, blob + CPU_FLAGS_AT, CPU_FLAGS_BYTES);
  needed[CPU_FLAGS_BYTES] = '\0';
  if (!check_cpu(needed, missing, sizeof missing)) {
    fail(error, error_size, "%s: compiled for a CPU with features this CPU lacks (%s); running it could crash "
                            "with an illegal instruction. Export the model again on this machine", path, missing);
    goto failed;
  }
  /* Every file's hash before any code is loaded (loading runs constructors). */
  const unsigned char *table =
      blob + HEADER_BYTES + (size_t)RECORD_BYTES * (1 + model->num_inputs + model->num_buffers);
  if (check_files(path, table, num_files, error, error_size))
    goto failed;
  snprintf(file, sizeof file, "%s/model.so", path);
  model->library = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!model->library) {
    fail(error, error_size, "%s: cannot be loaded (%s); export the model again on this kind of machine", file,
         dlerror());
    goto failed;
  }
  *(void **)&model->entry = dlsym(model->library, ENTRY_POINT);
  if (!model->entry) {
    fail(error, error_size, "%s: has no %s; export the model again", file, ENTRY_POINT);
    goto failed;
  }
  *(void **)&model->release = dlsym(model->library, "_mlir_memref_to_llvm_free");
  if (!model->release)
    model->release = free; /* its buffers are malloc'ed either way */
  for (int i = 0; i < model->num_buffers; ++i) {
    record *b = &model->buffers[i];
    describe(&model->buffer_descriptors[i], blob + b->offset, b->shape, b->rank);
  }
  return model;

failed:
  smlir_free(model);
  return NULL;
}

void smlir_free(smlir_model *model) {
  if (!model)
    return;
  if (model->library)
    dlclose(model->library);
  free(model->blob);
  free(model->inputs);
  free(model->buffers);
  free(model->buffer_descriptors);
  free(model);
}

int smlir_num_inputs(const smlir_model *model) { return model->num_inputs; }

int smlir_input_csr(const smlir_model *model, int index, int32_t *pos_dtype, int32_t *crd_dtype) {
  if (index < 0 || index >= model->num_inputs)
    return -1;
  uint64_t kind = model->inputs[index].bytes;
  if (!kind)
    return 0;
  if (pos_dtype)
    *pos_dtype = (kind >> 8 & 0xFF) == 32 ? SMLIR_I32 : SMLIR_I64;
  if (crd_dtype)
    *crd_dtype = (kind >> 16 & 0xFF) == 32 ? SMLIR_I32 : SMLIR_I64;
  return 1;
}

static void spec_of(const record *r, smlir_tensor *spec) {
  memset(spec, 0, sizeof *spec);
  spec->dtype = r->dtype;
  spec->rank = r->rank;
  memcpy(spec->shape, r->shape, sizeof r->shape);
}

int smlir_input_spec(const smlir_model *model, int index, smlir_tensor *spec) {
  if (index < 0 || index >= model->num_inputs)
    return -1;
  spec_of(&model->inputs[index], spec);
  return 0;
}

int smlir_output_spec(const smlir_model *model, smlir_tensor *spec) {
  spec_of(&model->result, spec);
  return 0;
}

void smlir_set_call_number(smlir_model *model, int64_t call) { model->call_number = call; }

static int same_spec(const record *r, const smlir_tensor *t) {
  if (t->dtype != r->dtype || t->rank != r->rank)
    return 0;
  for (int i = 0; i < r->rank; ++i)
    if (t->shape[i] != r->shape[i])
      return 0;
  return 1;
}

static void shape_text(char *out, size_t size, int32_t dtype, int rank, const int64_t *shape) {
  int n = snprintf(out, size, "%s[", dtype_name(dtype));
  for (int i = 0; i < rank && n > 0 && (size_t)n < size; ++i)
    n += snprintf(out + n, size - (size_t)n, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (n > 0 && (size_t)n < size)
    snprintf(out + n, size - (size_t)n, "]");
}

/* Copies the strided result into the caller's dense buffer. */
static void copy_result(const descriptor *d, int rank, size_t element, void *out) {
  const char *base = (const char *)(intptr_t)d->fields[1] + d->fields[2] * (int64_t)element;
  int64_t index[SMLIR_MAX_RANK] = {0};
  size_t total = 1;
  for (int i = 0; i < rank; ++i)
    total *= (size_t)d->fields[3 + i];
  for (size_t n = 0; n < total; ++n) {
    int64_t offset = 0;
    for (int i = 0; i < rank; ++i)
      offset += index[i] * d->fields[3 + rank + i];
    memcpy((char *)out + n * element, base + offset * (int64_t)element, element);
    for (int i = rank - 1; i >= 0 && ++index[i] == d->fields[3 + i]; --i)
      index[i] = 0;
  }
}

/* An integer input whose values index a table (its record's offset: their
 * exclusive upper bound) has one outside [0, bound): the compiled gather
 * would abort the process. Returns 1 (error set) or 0. */
static int out_of_bounds(const record *r, const smlir_tensor *t, char *error, size_t error_size, int index) {
  if (!r->offset)
    return 0;
  size_t n = smlir_num_elements(t);
  for (size_t k = 0; k < n; ++k) {
    int64_t v;
    switch (r->dtype) {
    case SMLIR_I8: v = ((const int8_t *)t->data)[k]; break;
    case SMLIR_I16: v = ((const int16_t *)t->data)[k]; break;
    case SMLIR_I32: v = ((const int32_t *)t->data)[k]; break;
    case SMLIR_I64: v = ((const int64_t *)t->data)[k]; break;
    default: return 0;
    }
    if (v < 0 || (uint64_t)v >= r->offset) {
      fail(error, error_size, "input %d: its values index a table of size %llu: expected values in [0, %llu), got %lld at "
           "element %zu", index, (unsigned long long)r->offset, (unsigned long long)r->offset, (long long)v, k);
      return 1;
    }
  }
  return 0;
}

/* A CSR input's buffers fail the checks the kernel's reads rely on (its
 * smlir_csr given, nnz in range, positions / coordinates valid): returns 1
 * (error set, naming the input) or 0. */
static int bad_csr(const record *r, const smlir_tensor *t, char *error, size_t error_size, int index) {
  if (!r->bytes)
    return 0;
  int pos_bits = (int)(r->bytes >> 8 & 0xFF), crd_bits = (int)(r->bytes >> 16 & 0xFF);
  int64_t rows = r->shape[0], cols = r->shape[1];
  const smlir_csr *csr = t->data;
  const char *encoding = pos_bits == 32 ? (crd_bits == 32 ? "CSR, pos_width=32, crd_width=32"
                                                          : "CSR, pos_width=32, crd_width=64")
                                        : (crd_bits == 32 ? "CSR, pos_width=64, crd_width=32"
                                                          : "CSR, pos_width=64, crd_width=64");
  if (csr->nnz < 0 || (uint64_t)csr->nnz > MAX_ELEMENTS || (pos_bits == 32 && csr->nnz > INT32_MAX) ||
      (uint64_t)csr->nnz > (uint64_t)rows * (uint64_t)cols) {
    fail(error, error_size, "input %d (%s): nnz %lld, expected 0 <= nnz <= rows x cols = %lld%s", index, encoding,
         (long long)csr->nnz, (long long)(rows * cols), pos_bits == 32 ? " (and below 2^31: 32-bit positions)" : "");
    return 1;
  }
  if (!csr->positions || (csr->nnz && (!csr->coordinates || !csr->values))) {
    fail(error, error_size, "input %d (%s): a NULL %s buffer (positions hold rows + 1 = %lld entries, coordinates "
         "and values nnz = %lld)", index, encoding, !csr->positions ? "positions" : !csr->coordinates ? "coordinates"
         : "values", (long long)(rows + 1), (long long)csr->nnz);
    return 1;
  }
  switch (smlir_check_csr_buffers(csr->positions, pos_bits, csr->coordinates, crd_bits, rows, csr->nnz, cols)) {
  case SMLIR_CSR_VALID:
    return 0;
  case SMLIR_CSR_BAD_ENDS:
    fail(error, error_size, "input %d (%s): positions must start at 0 and end at nnz = %lld", index, encoding,
         (long long)csr->nnz);
    return 1;
  case SMLIR_CSR_DECREASING:
    fail(error, error_size, "input %d (%s): positions must not decrease (monotone row positions)", index, encoding);
    return 1;
  case SMLIR_CSR_OUT_OF_RANGE:
    fail(error, error_size, "input %d (%s): coordinates out of range: expected 0 <= column < %lld", index, encoding,
         (long long)cols);
    return 1;
  default:
    fail(error, error_size, "input %d (%s): coordinates must be sorted (strictly increasing, no duplicates) within "
         "each row", index, encoding);
    return 1;
  }
}

int smlir_run(smlir_model *model, const smlir_tensor *inputs, int num_inputs, smlir_tensor *output, char *error,
              size_t error_size) {
  char want[256], got[256];
  if (num_inputs != model->num_inputs) {
    fail(error, error_size, "expected %d inputs, got %d", model->num_inputs, num_inputs);
    return -1;
  }
  for (int i = 0; i < num_inputs; ++i)
    if (!same_spec(&model->inputs[i], &inputs[i]) || !inputs[i].data) {
      shape_text(want, sizeof want, model->inputs[i].dtype, model->inputs[i].rank, model->inputs[i].shape);
      shape_text(got, sizeof got, inputs[i].dtype, inputs[i].rank, inputs[i].shape);
      fail(error, error_size, "input %d: expected a %s %s tensor (shapes are static, as in example_args), got %s%s",
           i, model->inputs[i].bytes ? "CSR (data: an smlir_csr)" : "dense", want, got,
           inputs[i].data ? "" : " with data = NULL");
      return -1;
    }
  for (int i = 0; i < num_inputs; ++i)
    if (out_of_bounds(&model->inputs[i], &inputs[i], error, error_size, i) ||
        bad_csr(&model->inputs[i], &inputs[i], error, error_size, i))
      return -1;
  if (!output || !output->data) {
    fail(error, error_size, "output: pass a tensor whose data holds smlir_output_spec()'s size");
    return -1;
  }
  /* A CSR input is three memrefs: positions, coordinates, values. */
  int arguments = 0;
  for (int i = 0; i < num_inputs; ++i)
    arguments += model->inputs[i].bytes ? 3 : 1;
  int count = 1 + model->num_buffers + arguments;
  descriptor result, *input_descriptors = calloc((size_t)arguments + 1, sizeof(descriptor));
  memset(&result, 0, sizeof result);
  void **pointers = calloc((size_t)count + 1, sizeof(void *));
  void **packed = calloc((size_t)count + 1, sizeof(void *));
  pointers[0] = &result;
  for (int i = 0; i < model->num_buffers; ++i)
    pointers[1 + i] = &model->buffer_descriptors[i];
  if (!input_descriptors || !pointers || !packed) {
    free(input_descriptors);
    free(pointers);
    free(packed);
    fail(error, error_size, "out of memory");
    return -1;
  }
  for (int i = 0, at = 0; i < num_inputs; ++i) {
    if (model->inputs[i].bytes) {
      const smlir_csr *csr = inputs[i].data;
      int64_t lengths[3] = {model->inputs[i].shape[0] + 1, csr->nnz, csr->nnz};
      const void *buffers[3] = {csr->positions, csr->coordinates, csr->values};
      for (int k = 0; k < 3; ++k, ++at) {
        describe(&input_descriptors[at], (void *)buffers[k], &lengths[k], 1);
        pointers[1 + model->num_buffers + at] = &input_descriptors[at];
      }
      continue;
    }
    describe(&input_descriptors[at], inputs[i].data, inputs[i].shape, inputs[i].rank);
    pointers[1 + model->num_buffers + at] = &input_descriptors[at];
    ++at;
  }
  for (int i = 0; i < count; ++i)
    packed[i] = &pointers[i];
  int64_t call = model->call_number;
  if (model->flags & FLAG_CALL_NUMBER) {
    packed[count] = &call;
    ++model->call_number;
  }
  model->entry(packed);

  void *data = output->data;
  spec_of(&model->result, output);
  output->data = data;
  size_t element = smlir_dtype_size(model->result.dtype);
  copy_result(&result, model->result.rank, element, output->data);
  /* The kernel returned a buffer it allocated unless it aliases an argument. */
  void *allocated = (void *)(intptr_t)result.fields[0];
  int aliases = 0;
  for (int i = 0; i < model->num_buffers; ++i)
    aliases |= allocated == (void *)(model->blob + model->buffers[i].offset);
  for (int i = 0; i < arguments; ++i)
    aliases |= allocated == (void *)(intptr_t)input_descriptors[i].fields[0];
  if (allocated && !aliases)
    model->release(allocated);
  free(input_descriptors);
  free(pointers);
  free(packed);
  return 0;
}
