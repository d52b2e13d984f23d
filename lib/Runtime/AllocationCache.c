/*===- AllocationCache.c - reuse of the compiled code's large buffers -----===*
 *
 * The CPU pipeline lowers memref.alloc/dealloc to these generic functions
 * (finalize-memref-to-llvm{use-generic-functions=true}). A model allocates
 * its large temporaries afresh on every call; from malloc they come as new
 * mmap'ed pages that the kernel zero-fills on first touch and unmaps on
 * free, which cost as much as the BERT layer's arithmetic. Freed blocks of
 * 64 KiB and more are kept here instead and handed out again to requests of
 * about the same size, up to SPARSE_MLIR_ALLOC_CACHE_MB (default 1024; 0
 * turns the cache off).
 *
 * Every block is a posix_memalign'ed block with 64-byte alignment, so a
 * buffer the caller keeps (a kernel's result) may be released with free().
 *===----------------------------------------------------------------------===*/

#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define SLOTS 64
#define MIN_CACHED (64u << 10)
#define ALIGNMENT 64u

typedef struct {
  void *block;
  size_t size; /* malloc_usable_size(block) */
} Slot;

static Slot slots[SLOTS];
static size_t cachedBytes;
static size_t capacity = (size_t)-1; /* read from the environment once */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t cacheCapacity(void) {
  if (capacity == (size_t)-1) {
    const char *text = getenv("SPARSE_MLIR_ALLOC_CACHE_MB");
    char *end = NULL;
    unsigned long long mb = text ? strtoull(text, &end, 10) : 1024;
    if (text && (end == text || *end != '\0'))
      mb = 1024;
    capacity = (size_t)mb << 20;
  }
  return capacity;
}

/* The cached block that fits `size` with the least waste (at most 1/8). */
static void *takeCached(size_t size, size_t alignment) {
  void *found = NULL;
  pthread_mutex_lock(&lock);
  int best = -1;
  for (int i = 0; i < SLOTS; ++i) {
    size_t have = slots[i].size;
    if (slots[i].block && have >= size && have - size <= size / 8 &&
        (uintptr_t)slots[i].block % alignment == 0 &&
        (best < 0 || have < slots[best].size))
      best = i;
  }
  if (best >= 0) {
    found = slots[best].block;
    cachedBytes -= slots[best].size;
    slots[best].block = NULL;
  }
  pthread_mutex_unlock(&lock);
  return found;
}

static void *allocate(size_t size, size_t alignment) {
  if (alignment < ALIGNMENT)
    alignment = ALIGNMENT;
  if (size >= MIN_CACHED) {
    void *block = takeCached(size, alignment);
    if (block)
      return block;
  }
  void *block = NULL;
  return posix_memalign(&block, alignment, size ? size : 1) == 0 ? block : NULL;
}

void *_mlir_memref_to_llvm_alloc(size_t size) { return allocate(size, ALIGNMENT); }

void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return allocate(size, alignment);
}

void _mlir_memref_to_llvm_free(void *block) {
  if (!block)
    return;
  size_t size = malloc_usable_size(block);
  if (size >= MIN_CACHED && (uintptr_t)block % ALIGNMENT == 0) {
    pthread_mutex_lock(&lock);
    if (cachedBytes + size <= cacheCapacity()) {
      for (int i = 0; i < SLOTS; ++i) {
        if (!slots[i].block) {
          slots[i].block = block;
          slots[i].size = size;
          cachedBytes += size;
          block = NULL;
          break;
        }
      }
    }
    pthread_mutex_unlock(&lock);
  }
  free(block);
}

/* Returns every cached block to malloc; the bytes released. */
size_t smlir_alloc_cache_release(void) {
  size_t released = 0;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < SLOTS; ++i) {
    if (slots[i].block) {
      free(slots[i].block);
      released += slots[i].size;
      slots[i].block = NULL;
    }
  }
  cachedBytes = 0;
  pthread_mutex_unlock(&lock);
  return released;
}

/* The bytes held in the cache now. */
size_t smlir_alloc_cache_bytes(void) {
  pthread_mutex_lock(&lock);
  size_t bytes = cachedBytes;
  pthread_mutex_unlock(&lock);
  return bytes;
}
