// The caching allocator (autograd/memory.h). A process-wide pool: an intrusive free list per
// size class (the list link lives in the free block itself, so caching allocates nothing), behind
// one lock. Blocks come from the system one by one (::operator new(size, align_val_t), or mmap from
// 1 MiB up), so any block can be given back on its own (cache limit, empty_cache).
//
// In front of the pool, each thread parks up to thread_blocks() freed blocks of each class up to
// 64 KiB, under a lock of its own that stays in that core's cache: an op's ~5 blocks then touch
// no shared cache line: with the pool's lock alone, two threads decoding halves of a batch spend
// much of their time with the lock and free lists bouncing between the cores (figures in
// docs/performance.md, "Figures behind design choices in the code"). Blocks move
// freely between threads (a tensor made on the main thread may die in a TBB task): a freed block
// is parked by the thread that frees it, or goes to the pool. Thread caches are registered, so
// cache_stats() counts their blocks as cached and empty_cache() returns them; a thread's cache
// goes to the pool when the thread exits. For the pool, a parked block is still in use.
#include "autograd/memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>
#include <string>
#include <thread>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A cached block is poisoned past its list link, so ASan still reports a use after free of a
// tensor buffer although the block stays allocated.
#define TG_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TG_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define TG_POISON(p, n) ((void)(p), (void)(n))
#define TG_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace tg {

namespace {

/// "512 B", "1.5 KiB", "8.0 GiB": one decimal from KiB up, binary units.
std::string human_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u + 1 < static_cast<int>(std::size(kUnits))) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string out_of_memory_message(std::size_t bytes, std::string_view what_for) {
  std::string m = "out of memory: ";
  if (bytes == SIZE_MAX) m += "more than 16 EiB (the size overflows)";
  else m += human_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
  if (what_for.empty()) m += " requested from tapegrad's allocator";
  else m.append(" for ").append(what_for);
  return m;
}

}  // namespace

OutOfMemoryError::OutOfMemoryError(std::size_t bytes, std::string_view what_for)
    : bytes_(bytes), message_(out_of_memory_message(bytes, what_for)) {}

const char* OutOfMemoryError::what() const noexcept { return message_.what(); }

}  // namespace tg

namespace tg::memory {

namespace {

/// Out of line and cold: the allocation paths build no message unless they fail.
[[noreturn, gnu::cold, gnu::noinline]] void throw_out_of_memory(std::size_t bytes) { throw OutOfMemoryError(bytes); }

constexpr std::size_t kSmallStep = 64;   // small classes: multiples of 64 B ...
constexpr std::size_t kSmallMax = 1024;  // ... up to 1 KiB
constexpr int kSmallClasses = static_cast<int>(kSmallMax / kSmallStep);
// Large classes: 4 per power of two from 1 KiB (at most 25% rounding), 16 per power of two from
// 1 MiB (at most 6.25%: coarser classes hold large models' memory hostage, and blocks that big are
// cheap to take from the system anyway).
constexpr int kLargeLog2Min = 10, kFineLog2Min = 20;
constexpr int kCoarseSubLog2 = 2, kFineSubLog2 = 4;
constexpr int sub_log2(int k) { return k < kFineLog2Min ? kCoarseSubLog2 : kFineSubLog2; }
/// Index of the first class of the power of two 2^k (k >= kLargeLog2Min).
constexpr int first_class(int k) {
  return k < kFineLog2Min ? kSmallClasses + ((k - kLargeLog2Min) << kCoarseSubLog2)
                          : kSmallClasses + ((kFineLog2Min - kLargeLog2Min) << kCoarseSubLog2) +
                                ((k - kFineLog2Min) << kFineSubLog2);
}
constexpr int kClasses = first_class(64);
// Default limit on in-use + cached bytes: the peak in use plus a headroom of 25% of it, at most
// 32 MiB; at least 64 MiB in all. No limit keeps too much reserved, no headroom thrashes, and the
// cap keeps a large model's cache from staying resident (measurements: docs/performance.md,
// "Figures behind design choices in the code").
constexpr std::int64_t kMinDefaultLimit = std::int64_t{64} << 20;
constexpr std::int64_t kMaxHeadroom = std::int64_t{32} << 20;

/// A test-and-test-and-set lock (BasicLockable, for std::lock_guard). Critical sections are a few
/// list operations; a waiter spins briefly, then yields.
class SpinLock {
 public:
  void lock() noexcept {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 64) __builtin_ia32_pause();
        else std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

struct SizeClass {
  int index;
  std::size_t bytes;
};

constexpr SizeClass size_class(std::size_t bytes) {
  if (bytes <= kSmallMax) {
    const int c = bytes == 0 ? 0 : static_cast<int>((bytes - 1) / kSmallStep);
    return {c, (static_cast<std::size_t>(c) + 1) * kSmallStep};
  }
  if (bytes > (std::size_t{1} << 62)) throw_out_of_memory(bytes);
  const int k = 63 - __builtin_clzll(bytes - 1);  // 2^k <= bytes - 1 < 2^(k+1), k >= 10
  const std::size_t base = std::size_t{1} << k, step = base >> sub_log2(k);
  const std::size_t j = (bytes - 1 - base) / step + 1;  // 1 .. 2^sub_log2(k)
  return {first_class(k) + static_cast<int>(j - 1), base + j * step};
}

/// The block size of class `index` (size_class's inverse).
constexpr std::size_t class_bytes(int index) {
  if (index < kSmallClasses) return (static_cast<std::size_t>(index) + 1) * kSmallStep;
  int k = kLargeLog2Min;
  while (k < 63 && first_class(k + 1) <= index) ++k;
  const int j = index - first_class(k) + 1;
  return (std::size_t{1} << k) + static_cast<std::size_t>(j) * (std::size_t{1} << (k - sub_log2(k)));
}
static_assert(class_bytes(size_class(1000).index) == 1024 && class_bytes(size_class(5000).index) == 5120);
static_assert(class_bytes(size_class((1 << 20) + 1).index) == (1 << 20) + (1 << 16));

struct FreeBlock {
  FreeBlock* next;
  std::size_t bytes;  // set when the block is unlinked to go back to the system (system_free needs it)
};

constexpr int kThreadClasses = size_class(std::size_t{64} << 10).index + 1;  // classes up to 64 KiB
// Blocks of 1 MiB and more are mapped from the kernel directly, and unmapped when they go back (or
// resized into a block of another class, remap() below):
// glibc keeps freed chunks below its mmap threshold (which grows to 32 MiB once large chunks have
// been freed) resident in its arenas, as RSS beyond every block this allocator knows of. Smaller
// blocks come from ::operator new, which a replaced global operator new
// (tests/models/training/test_allocations.cpp) sees; system_allocs in cache_stats() counts both.
constexpr std::size_t kMapMin = std::size_t{1} << 20;
constexpr int kFirstMappedClass = size_class(kMapMin).index;
// Blocks a thread may park per class: 256 KiB worth, at least 8 and at most 64 (so at most
// 6.3 MiB per thread over all classes). A decoding step of a batch of 64 frees more than 8 handles
// and small buffers of a class at once, so a fixed 8 per class is too few.
constexpr int thread_blocks(int index) {
  return static_cast<int>(std::clamp<std::size_t>((std::size_t{256} << 10) / class_bytes(index), 8, 64));
}

/// Blocks parked by one thread. Its lock is taken by the owner on every use, by other threads only
/// in cache_stats() and empty_cache().
struct ThreadCache {
  SpinLock mutex;
  FreeBlock* lists[kThreadClasses] = {};
  int counts[kThreadClasses] = {};
  std::int64_t bytes = 0, blocks = 0, hits = 0;
  ThreadCache* next = nullptr;  // in the registry

  /// Unlinks every parked block into `out` (per class).
  void take_all(FreeBlock* (&out)[kThreadClasses]) {
    for (int c = 0; c < kThreadClasses; ++c) {
      out[c] = lists[c];
      lists[c] = nullptr;
      counts[c] = 0;
    }
    bytes = blocks = 0;
  }
};

struct Pool {
  SpinLock mutex;
  FreeBlock* lists[kClasses] = {};
  CacheStats stats;
  std::int64_t limit = -1;  // < 0: default

  std::int64_t effective_limit() const {
    return limit >= 0 ? limit
                      : std::max(kMinDefaultLimit, stats.peak_in_use_bytes + std::min(stats.peak_in_use_bytes / 4, kMaxHeadroom));
  }
  /// Unlinks the first cached block of class `c` (non-empty) to go back to the system: its size
  /// is set for system_free (or remap) and it leaves the cache's counts.
  FreeBlock* unlink_for_system(int c) {
    FreeBlock* b = lists[c];
    lists[c] = b->next;
    b->bytes = class_bytes(c);
    stats.cached_bytes -= static_cast<std::int64_t>(b->bytes);
    --stats.cached_blocks;
    ++stats.system_frees;
    return b;
  }
  /// Unlinks cached blocks, largest classes first, until `need` more bytes fit under the limit
  /// (or the cache is empty); the caller frees them outside the lock.
  FreeBlock* take_to_fit(std::int64_t need) {
    FreeBlock* out = nullptr;
    const std::int64_t cap = effective_limit();
    for (int c = kClasses - 1; c >= 0 && stats.in_use_bytes + stats.cached_bytes + need > cap; --c) {
      while (lists[c] && stats.in_use_bytes + stats.cached_bytes + need > cap) {
        FreeBlock* b = unlink_for_system(c);
        b->next = out;
        out = b;
      }
    }
    return out;
  }
  /// Unlinks the cached mapped block whose class is nearest to `index` (a larger one on a tie:
  /// shrinking it maps nothing new), or returns null when no mapped block is cached.
  FreeBlock* take_mapped_near(int index) {
    const int lowest = kFirstMappedClass;
    for (int d = 1; d < kClasses; ++d) {
      for (int j : {index + d, index - d}) {
        if (j < lowest || j >= kClasses || !lists[j]) continue;
        return unlink_for_system(j);
      }
      if (index + d >= kClasses && index - d < lowest) break;
    }
    return nullptr;
  }
  /// Blocks parked in a thread cache (in use, for the pool) join the free lists. Hits counted by
  /// the thread cache carry over.
  void adopt(FreeBlock* (&parked)[kThreadClasses], std::int64_t thread_hits) {
    for (int c = 0; c < kThreadClasses; ++c) {
      const auto size = static_cast<std::int64_t>(class_bytes(c));
      while (FreeBlock* b = parked[c]) {
        parked[c] = b->next;
        b->next = lists[c];
        lists[c] = b;
        stats.in_use_bytes -= size;
        --stats.in_use_blocks;
        stats.cached_bytes += size;
        ++stats.cached_blocks;
      }
    }
    stats.hits += thread_hits;
  }
  /// Unlinks every cached block; the caller frees them outside the lock.
  FreeBlock* take_all() {
    FreeBlock* all = nullptr;
    for (int c = 0; c < kClasses; ++c) {
      while (lists[c]) {
        FreeBlock* b = unlink_for_system(c);
        b->next = all;
        all = b;
      }
    }
    return all;
  }
};

// Constructed on first use and never destroyed: tensors in static storage may be freed after
// every other static object is gone.
Pool& pool() {
  alignas(Pool) static unsigned char storage[sizeof(Pool)];
  static Pool* p = new (storage) Pool;
  return *p;
}

/// Every live thread's cache, for cache_stats() and empty_cache(). Lock order: the registry
/// first; a thread cache's lock and the pool's are never held together.
struct Registry {
  std::mutex mutex;
  ThreadCache* first = nullptr;
};

Registry& registry() {
  alignas(Registry) static unsigned char storage[sizeof(Registry)];
  static Registry* r = new (storage) Registry;
  return *r;
}

/// Owns the calling thread's cache: registers it, and at thread exit gives its blocks to the pool.
struct ThreadCacheOwner {
  ThreadCache cache;
  ThreadCacheOwner() {
    std::lock_guard lock(registry().mutex);
    cache.next = registry().first;
    registry().first = &cache;
  }
  ~ThreadCacheOwner();
};

thread_local bool t_cache_gone = false;  // trivially destructible: readable after the owner is gone

/// The calling thread's cache; null once the thread is exiting (static destructors still free).
ThreadCache* thread_cache() {
  if (t_cache_gone) return nullptr;
  thread_local ThreadCacheOwner owner;
  return &owner.cache;
}

// allocate_at_least may hand out a cached block this many classes up (6.25% each from 1 MiB).
constexpr int kFitClasses = 2;

/// Throws std::bad_alloc on failure (allocate_at_least turns it into an OutOfMemoryError).
void* system_allocate(std::size_t bytes) {
  if (bytes < kMapMin) return ::operator new(bytes, std::align_val_t{kAlignment});
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);
  return p;  // page-aligned
}
void system_free(void* p, std::size_t bytes) noexcept {
  if (bytes < kMapMin) return ::operator delete(p, std::align_val_t{kAlignment});
  // ASan keeps shadow state for addresses, not mappings: a poisoned (cached) range unmapped and
  // later mapped again would read as poisoned. Nothing of an unmapped block may stay poisoned.
  TG_UNPOISON(p, bytes);
  ::munmap(p, bytes);
}

/// A mapped block of `new_bytes` made from the cached mapped block `b`: the kernel moves its
/// pages instead of unmapping them and zeroing fresh ones (only the growth, if any, is new
/// memory). Null if the kernel refuses; `b` is gone either way.
void* remap(FreeBlock* b, std::size_t new_bytes) noexcept {
  const std::size_t old_bytes = b->bytes;
  TG_UNPOISON(b, old_bytes);  // as in system_free: the old range must not stay poisoned
  void* p = ::mremap(b, old_bytes, new_bytes, MREMAP_MAYMOVE);
  if (p == MAP_FAILED) {
    ::munmap(b, old_bytes);
    return nullptr;
  }
  return p;
}

void free_list(FreeBlock* b) noexcept {
  while (b) {
    FreeBlock* next = b->next;
    TG_UNPOISON(b, sizeof(FreeBlock));  // the rest is left to the system allocator's own bookkeeping
    system_free(b, b->bytes);
    b = next;
  }
}

/// Takes every block parked in `tc` and hands it to the pool (under the pool's lock, not the cache's).
void return_parked(ThreadCache& tc) {
  FreeBlock* parked[kThreadClasses];
  std::int64_t hits;
  {
    std::lock_guard lock(tc.mutex);
    tc.take_all(parked);
    hits = tc.hits;
    tc.hits = 0;
  }
  Pool& p = pool();
  FreeBlock* excess;
  {
    std::lock_guard lock(p.mutex);
    p.adopt(parked, hits);
    excess = p.take_to_fit(0);
  }
  free_list(excess);
}

ThreadCacheOwner::~ThreadCacheOwner() {
  {
    std::lock_guard lock(registry().mutex);
    for (ThreadCache** link = &registry().first; *link; link = &(*link)->next)
      if (*link == &cache) {
        *link = cache.next;
        break;
      }
  }
  return_parked(cache);
  t_cache_gone = true;
}

}  // namespace

std::size_t size_class_bytes(std::size_t bytes) { return size_class(bytes).bytes; }

void* allocate(std::size_t bytes) { return allocate_at_least(bytes, nullptr); }

void* allocate_at_least(std::size_t bytes, std::size_t* block_bytes) {
  const SizeClass c = size_class(bytes);
  if (block_bytes) *block_bytes = c.bytes;
  if (c.index < kThreadClasses) {
    if (ThreadCache* tc = thread_cache()) {
      std::lock_guard lock(tc->mutex);
      if (FreeBlock* b = tc->lists[c.index]) {
        tc->lists[c.index] = b->next;
        --tc->counts[c.index];
        tc->bytes -= static_cast<std::int64_t>(c.bytes);
        --tc->blocks;
        ++tc->hits;
        TG_UNPOISON(b, c.bytes);
        return b;
      }
    }
  }
  const auto size = static_cast<std::int64_t>(c.bytes);
  Pool& p = pool();
  FreeBlock* evicted;
  FreeBlock* recycled = nullptr;
  {
    std::lock_guard lock(p.mutex);
    p.stats.in_use_bytes += size;
    ++p.stats.in_use_blocks;
    p.stats.peak_in_use_bytes = std::max(p.stats.peak_in_use_bytes, p.stats.in_use_bytes);
    if (FreeBlock* b = p.lists[c.index]) {
      p.lists[c.index] = b->next;
      p.stats.cached_bytes -= size;
      --p.stats.cached_blocks;
      ++p.stats.hits;
      TG_UNPOISON(b, c.bytes);
      return b;
    }
    if (block_bytes && c.bytes >= kMapMin) {
      for (int j = c.index + 1; j <= c.index + kFitClasses && j < kClasses; ++j) {
        FreeBlock* b = p.lists[j];
        if (!b) continue;
        const auto larger = static_cast<std::int64_t>(class_bytes(j));
        p.lists[j] = b->next;
        p.stats.cached_bytes -= larger;
        --p.stats.cached_blocks;
        ++p.stats.hits;
        p.stats.in_use_bytes += larger - size;
        p.stats.peak_in_use_bytes = std::max(p.stats.peak_in_use_bytes, p.stats.in_use_bytes);
        *block_bytes = class_bytes(j);
        TG_UNPOISON(b, class_bytes(j));
        return b;
      }
    }
    ++p.stats.system_allocs;
    // A cached mapped block of another class is resized into the new one rather than unmapped
    // by take_to_fit: the pages it already has are not zeroed again by the kernel.
    if (c.bytes >= kMapMin) recycled = p.take_mapped_near(c.index);
    if (recycled) ++p.stats.remaps;
    // Room for the new block under the limit: cached blocks of other classes go back first.
    evicted = p.take_to_fit(0);
    p.stats.peak_reserved_bytes =
        std::max(p.stats.peak_reserved_bytes, p.stats.in_use_bytes + p.stats.cached_bytes);
  }
  free_list(evicted);
  if (recycled) {
    if (void* q = remap(recycled, c.bytes)) return q;
    std::lock_guard lock(p.mutex);
    --p.stats.remaps;  // the kernel refused: a fresh mapping below
  }
  try {
    return system_allocate(c.bytes);
  } catch (const std::bad_alloc&) {
    // The cache may hold blocks of other classes: give them back and try once more.
    FreeBlock* all;
    {
      std::lock_guard lock(p.mutex);
      all = p.take_all();
    }
    free_list(all);
    try {
      return system_allocate(c.bytes);
    } catch (const std::bad_alloc&) {
      {
        std::lock_guard lock(p.mutex);
        p.stats.in_use_bytes -= size;
        --p.stats.in_use_blocks;
        --p.stats.system_allocs;
      }
      throw_out_of_memory(bytes);  // the size asked for, not its class
    }
  }
}

void deallocate(void* block, std::size_t bytes) noexcept {
  if (!block) return;
  const SizeClass c = size_class(bytes);
  if (c.index < kThreadClasses) {
    if (ThreadCache* tc = thread_cache()) {
      std::lock_guard lock(tc->mutex);
      if (tc->counts[c.index] < thread_blocks(c.index)) {
        auto* b = static_cast<FreeBlock*>(block);
        b->next = tc->lists[c.index];
        tc->lists[c.index] = b;
        ++tc->counts[c.index];
        tc->bytes += static_cast<std::int64_t>(c.bytes);
        ++tc->blocks;
        TG_POISON(reinterpret_cast<char*>(b) + sizeof(FreeBlock), c.bytes - sizeof(FreeBlock));
        return;
      }
    }
  }
  const auto size = static_cast<std::int64_t>(c.bytes);
  Pool& p = pool();
  {
    std::lock_guard lock(p.mutex);
    p.stats.in_use_bytes -= size;
    --p.stats.in_use_blocks;
    if (p.stats.in_use_bytes + p.stats.cached_bytes + size <= p.effective_limit()) {
      auto* b = static_cast<FreeBlock*>(block);
      b->next = p.lists[c.index];
      p.lists[c.index] = b;
      TG_POISON(reinterpret_cast<char*>(b) + sizeof(FreeBlock), c.bytes - sizeof(FreeBlock));
      p.stats.cached_bytes += size;
      ++p.stats.cached_blocks;
      return;
    }
    ++p.stats.system_frees;
  }
  system_free(block, c.bytes);
}

CacheStats cache_stats() {
  Registry& r = registry();
  std::lock_guard registry_lock(r.mutex);
  Pool& p = pool();
  CacheStats s;
  {
    std::lock_guard lock(p.mutex);
    s = p.stats;
    s.limit = p.effective_limit();
  }
  for (ThreadCache* tc = r.first; tc; tc = tc->next) {  // parked blocks: in use for the pool, cached here
    std::lock_guard lock(tc->mutex);
    s.in_use_bytes -= tc->bytes;
    s.in_use_blocks -= tc->blocks;
    s.cached_bytes += tc->bytes;
    s.cached_blocks += tc->blocks;
    s.hits += tc->hits;
  }
  return s;
}

namespace {

/// Every thread's parked blocks go back to the pool.
void return_all_parked() {
  Registry& r = registry();
  std::lock_guard registry_lock(r.mutex);
  for (ThreadCache* tc = r.first; tc; tc = tc->next) return_parked(*tc);
}

}  // namespace

std::int64_t cached_bytes() { return cache_stats().cached_bytes; }

void empty_cache() {
  return_all_parked();
  Pool& p = pool();
  FreeBlock* all;
  {
    std::lock_guard lock(p.mutex);
    all = p.take_all();
  }
  free_list(all);
}

void set_cache_limit(std::int64_t bytes) {
  return_all_parked();  // so that the trim below reaches every cached block
  Pool& p = pool();
  FreeBlock* excess;
  {
    std::lock_guard lock(p.mutex);
    p.limit = bytes < 0 ? -1 : bytes;
    excess = p.take_to_fit(0);  // trim to the new limit at once
  }
  free_list(excess);
}

std::int64_t cache_limit() { return cache_stats().limit; }

}  // namespace tg::memory
