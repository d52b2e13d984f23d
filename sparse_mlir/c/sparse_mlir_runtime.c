/*===- sparse_mlir_runtime.c - the C loader of sparse_mlir artifacts ------===*
 *
 * Mirrors sparse_mlir/artifact.py's `load()`: the same checks in the same
 * order, the same memref calling convention (see sparse_mlir.h).
 *
 *===----------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include "sparse_mlir.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "SMLIRART"
#define CPU_FLAGS_BYTES 512
#define HEADER_BYTES (8 + 4 * 6 + 8 + CPU_FLAGS_BYTES)
#define CPU_FLAGS_AT 40
#define RECORD_BYTES (4 + 4 + 8 * SMLIR_MAX_RANK + 8 + 8)
#define ENTRY_POINT "_mlir__mlir_ciface_main"
#define FLAG_CALL_NUMBER 1u
#define FLAG_CUDA 2u /* target="cuda" host code: loaded from Python only */

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
};

static void fail(char *error, size_t size, const char *format, ...) {
  if (!error || !size)
    return;
  va_list args;
  va_start(args, format);
  vsnprintf(error, size, format, args);
  va_end(args);
}

static uint32_t crc32_update(uint32_t crc, const unsigned char *data, size_t size) {
  static uint32_t table[256];
  if (!table[1])
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  crc = ~crc;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

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

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *file = fopen(path, "rb");
  if (!file)
    return NULL;
  fseek(file, 0, SEEK_END);
  long length = ftell(file);
  fseek(file, 0, SEEK_SET);
  unsigned char *data = length >= 0 ? aligned_alloc(64, ((size_t)length + 64) / 64 * 64) : NULL;
  if (data && fread(data, 1, (size_t)length, file) != (size_t)length) {
    free(data);
    data = NULL;
  }
  fclose(file);
  *size = (size_t)length;
  return data;
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

smlir_model *smlir_load(const char *path, char *error, size_t error_size) {
  char file[4096];
  size_t size = 0, library_size = 0;
  snprintf(file, sizeof file, "%s/weights.bin", path);
  unsigned char *blob = read_file(file, &size);
  if (!blob) {
    fail(error, error_size, "%s: not a sparse_mlir artifact (no readable weights.bin); pass the directory "
                            "fn.export() wrote", path);
    return NULL;
  }
  smlir_model *model = calloc(1, sizeof *model);
  model->blob = blob;
  if (size < HEADER_BYTES || memcmp(blob, MAGIC, 8)) {
    fail(error, error_size, "%s: not a sparse_mlir weights file (bad magic); pass the directory fn.export() wrote",
         file);
    goto failed;
  }
  uint32_t crc = u32_at(blob + 8), version = u32_at(blob + 12);
  model->flags = u32_at(blob + 16);
  if (model->flags & FLAG_CUDA) {
    fail(error, error_size, "%s: a target=\"cuda\" artifact; its GPU buffers are set up by the Python loader "
                            "(sparse_mlir.load), which this C loader does not do yet", file);
    goto failed;
  }
  model->num_inputs = (int)u32_at(blob + 20);
  model->num_buffers = (int)u32_at(blob + 24);
  uint32_t library_crc = u32_at(blob + 28);
  size_t tables = HEADER_BYTES + (size_t)RECORD_BYTES * (1 + model->num_inputs + model->num_buffers);
  if (size < tables) {
    fail(error, error_size, "%s: truncated (%zu bytes, its header alone takes %zu); copy the artifact again or "
                            "export it again", file, size, tables);
    goto failed;
  }
  if (model->num_buffers) {
    record last = parse_record(blob + tables - RECORD_BYTES);
    if (size < last.offset + last.bytes) {
      fail(error, error_size, "%s: truncated (%zu bytes, expected %llu); copy the artifact again or export it "
                              "again", file, size, (unsigned long long)(last.offset + last.bytes));
      goto failed;
    }
  }
  if (crc32_update(0, blob + 12, size - 12) != crc) {
    fail(error, error_size, "%s: checksum mismatch (the file is corrupted); copy the artifact again or export "
                            "it again", file);
    goto failed;
  }
  if (version != SMLIR_FORMAT_VERSION) {
    fail(error, error_size, "%s: artifact format version %u, but this runtime reads version %d; export the model "
                            "again with the matching sparse_mlir", path, version, SMLIR_FORMAT_VERSION);
    goto failed;
  }
  char needed[CPU_FLAGS_BYTES + 1], missing[CPU_FLAGS_BYTES + 1];
  memcpy(needed, blob + CPU_FLAGS_AT, CPU_FLAGS_BYTES);
  needed[CPU_FLAGS_BYTES] = '\0';
  if (!check_cpu(needed, missing, sizeof missing)) {
    fail(error, error_size, "%s: compiled for a CPU with features this CPU lacks (%s); running it could crash "
                            "with an illegal instruction. Export the model again on this machine", path, missing);
    goto failed;
  }
  snprintf(file, sizeof file, "%s/model.so", path);
  unsigned char *library = read_file(file, &library_size);
  int library_ok = library && crc32_update(0, library, library_size) == library_crc;
  free(library);
  if (!library_ok) {
    fail(error, error_size, "%s: missing or checksum mismatch (corrupted or replaced); copy the artifact again or "
                            "export it again", file);
    goto failed;
  }
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
  model->result = parse_record(blob + HEADER_BYTES);
  model->inputs = calloc((size_t)model->num_inputs + 1, sizeof(record));
  model->buffers = calloc((size_t)model->num_buffers + 1, sizeof(record));
  model->buffer_descriptors = calloc((size_t)model->num_buffers + 1, sizeof(descriptor));
  for (int i = 0; i < model->num_inputs; ++i)
    model->inputs[i] = parse_record(blob + HEADER_BYTES + (size_t)RECORD_BYTES * (1 + i));
  for (int i = 0; i < model->num_buffers; ++i) {
    record *b = &model->buffers[i];
    *b = parse_record(blob + HEADER_BYTES + (size_t)RECORD_BYTES * (1 + model->num_inputs + i));
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
      fail(error, error_size, "input %d: expected a dense %s tensor (shapes are static, as in example_args), got %s%s",
           i, want, got, inputs[i].data ? "" : " with data = NULL");
      return -1;
    }
  if (!output || !output->data) {
    fail(error, error_size, "output: pass a tensor whose data holds smlir_output_spec()'s size");
    return -1;
  }
  int count = 1 + model->num_buffers + num_inputs;
  descriptor result, *input_descriptors = calloc((size_t)num_inputs + 1, sizeof(descriptor));
  memset(&result, 0, sizeof result);
  void **pointers = calloc((size_t)count + 1, sizeof(void *));
  void **packed = calloc((size_t)count + 1, sizeof(void *));
  pointers[0] = &result;
  for (int i = 0; i < model->num_buffers; ++i)
    pointers[1 + i] = &model->buffer_descriptors[i];
  for (int i = 0; i < num_inputs; ++i) {
    describe(&input_descriptors[i], inputs[i].data, inputs[i].shape, inputs[i].rank);
    pointers[1 + model->num_buffers + i] = &input_descriptors[i];
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
  for (int i = 0; i < num_inputs; ++i)
    aliases |= allocated == inputs[i].data;
  if (allocated && !aliases)
    model->release(allocated);
  free(input_descriptors);
  free(pointers);
  free(packed);
  return 0;
}
