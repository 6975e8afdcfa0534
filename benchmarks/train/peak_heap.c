// Peak live heap bytes of a process, for the memory benchmarks (LD_PRELOAD).
//
// Why: a rank's peak RSS (VmHWM) is what the machine must have, but it also holds
// what the allocator keeps after free (glibc returns blocks under its mmap
// threshold to the heap, not to the system), so two runs that allocate the same
// bytes at their peak can differ in RSS by how their frees fell. `hpcrl plan`
// counts live tensor bytes; this counts live malloc bytes, the CPU counterpart of
// cudaMaxMemoryAllocated, so plan and measurement count the same thing.
//
// Every malloc-family call of the process goes through here to glibc's own
// (__libc_*: no dlsym, which itself allocates); the usable size of each block is
// added to or taken from a live counter whose maximum is kept with the time it
// was reached. Memory mapped outside malloc (MPI's shared segments, mmap'd
// files) is not counted, nor are glibc's own internal allocations (strdup,
// fopen and the like call its malloc directly): small, and only ever freed
// through here, so the counter can only under-count them. At exit the process writes, if HPCRL_PEAK_HEAP_DIR is
// set, DIR/heap-RANK-PID.txt: "peak_bytes peak_unix_us final_bytes", RANK being
// OMPI_COMM_WORLD_RANK (or -1). With HPCRL_PEAK_HEAP_SAMPLE_MS=N a thread also
// writes DIR/heap-RANK-PID.samples, "unix_us live_bytes" every N ms.
//   cc -O2 -shared -fPIC -pthread -o peak_heap.so peak_heap.c
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static _Atomic int64_t live_bytes;
static _Atomic int64_t peak_bytes;
static _Atomic int64_t peak_unix_us;

static int64_t unix_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static void add_live(int64_t n) {
  int64_t now = atomic_fetch_add(&live_bytes, n) + n;
  int64_t peak = atomic_load(&peak_bytes);
  while (now > peak) {
    if (atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {
      atomic_store(&peak_unix_us, unix_us());
      break;
    }
  }
}

static void* counted(void* p) {
  if (p) add_live((int64_t)malloc_usable_size(p));
  return p;
}

void* malloc(size_t n) { return counted(__libc_malloc(n)); }
void* calloc(size_t k, size_t n) { return counted(__libc_calloc(k, n)); }
void* memalign(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void* aligned_alloc(size_t a, size_t n) { return counted(__libc_memalign(a, n)); }
void* valloc(size_t n) { return counted(__libc_memalign((size_t)sysconf(_SC_PAGESIZE), n)); }

int posix_memalign(void** out, size_t a, size_t n) {
  if (a % sizeof(void*) != 0 || (a & (a - 1)) != 0) return 22;  // EINVAL, as glibc's
  void* p = __libc_memalign(a, n);
  if (!p && n) return 12;  // ENOMEM
  *out = counted(p);
  return 0;
}

void free(void* p) {
  if (!p) return;
  add_live(-(int64_t)malloc_usable_size(p));
  __libc_free(p);
}

void* realloc(void* p, size_t n) {
  int64_t before = p ? (int64_t)malloc_usable_size(p) : 0;
  void* q = __libc_realloc(p, n);
  if (!q && n) return NULL;  // p is untouched
  add_live((q ? (int64_t)malloc_usable_size(q) : 0) - before);
  return q;
}

static char out_stem[512];

static void* sampler(void* arg) {
  long ms = (long)(intptr_t)arg;
  char path[600];
  snprintf(path, sizeof path, "%s.samples", out_stem);
  FILE* f = fopen(path, "w");
  if (!f) return NULL;
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000};
  for (;;) {
    fprintf(f, "%lld %lld\n", (long long)unix_us(), (long long)atomic_load(&live_bytes));
    fflush(f);
    nanosleep(&pause, NULL);
  }
  return NULL;
}

__attribute__((constructor)) static void start(void) {
  const char* dir = getenv("HPCRL_PEAK_HEAP_DIR");
  if (!dir) return;
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  snprintf(out_stem, sizeof out_stem, "%s/heap-%s-%d", dir, rank ? rank : "-1", (int)getpid());
  const char* sample_ms = getenv("HPCRL_PEAK_HEAP_SAMPLE_MS");
  if (sample_ms && atol(sample_ms) > 0) {
    pthread_t t;
    if (pthread_create(&t, NULL, sampler, (void*)(intptr_t)atol(sample_ms)) == 0) pthread_detach(t);
  }
}

__attribute__((destructor)) static void finish(void) {
  if (!out_stem[0]) return;
  char path[600];
  snprintf(path, sizeof path, "%s.txt", out_stem);
  FILE* f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "%lld %lld %lld\n", (long long)atomic_load(&peak_bytes), (long long)atomic_load(&peak_unix_us),
          (long long)atomic_load(&live_bytes));
  fclose(f);
}
