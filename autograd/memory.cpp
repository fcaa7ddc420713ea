// The caching allocator (autograd/memory.h). One process-wide pool: an intrusive free list per
// size class (the list link lives in the free block itself, so caching allocates nothing), behind
// one lock. Blocks come from ::operator new(size, align_val_t) one by one, so any block can be
// given back on its own (cache limit, empty_cache) and a replaced global operator new sees every
// system allocation.
//
// Why one lock and no per-thread caches: blocks are freed on other threads than the one that
// allocated them (a tensor made on the main thread dies in a TBB task, or the reverse), which a
// global pool handles with no extra machinery, and a cache hit costs 15-25 ns per
// allocate/deallocate pair here, lock included (bench_ops BM_CachingAllocator): an op takes ~5
// blocks and costs 220-400 ns in all (BM_TinyOpForwardBackward), so per-thread caches would save
// about 2-3% of a workload-A step (~5,600 blocks). Kernel threads allocate almost nothing, so the
// lock is rarely contended, which is why it is a spin lock: an uncontended pthread mutex pair
// cost ~5% of batch-1 decoding (perf), an atomic exchange and a store a fraction of that.
#include "autograd/memory.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
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

namespace tg::memory {

namespace {

constexpr std::size_t kSmallStep = 64;   // small classes: multiples of 64 B ...
constexpr std::size_t kSmallMax = 1024;  // ... up to 1 KiB
constexpr int kSmallClasses = static_cast<int>(kSmallMax / kSmallStep);
constexpr int kLargeLog2Min = 10;        // large classes: 4 per power of two above 2^10
constexpr int kClasses = kSmallClasses + (64 - kLargeLog2Min) * 4;
// Default limit on in-use + cached bytes: 1.25x the peak in use, at least 64 MiB. Measured on
// bench_seq2seq B (rnnsearch 256/256, vocab 8000): no limit keeps 1.5x the peak in use reserved
// (RSS 426 MiB against glibc's 399), 1.25x gives RSS 358 MiB for a few system allocations per
// step, 1.0x thrashes (4157 system allocations against 1915 and a slower step).
constexpr std::int64_t kMinDefaultLimit = std::int64_t{64} << 20;

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

SizeClass size_class(std::size_t bytes) {
  if (bytes <= kSmallMax) {
    const int c = bytes == 0 ? 0 : static_cast<int>((bytes - 1) / kSmallStep);
    return {c, (static_cast<std::size_t>(c) + 1) * kSmallStep};
  }
  if (bytes > (std::size_t{1} << 62)) throw std::bad_alloc();
  const int k = 63 - __builtin_clzll(bytes - 1);  // 2^k <= bytes - 1 < 2^(k+1), k >= 10
  const std::size_t base = std::size_t{1} << k, step = base >> 2;
  const std::size_t j = (bytes - 1 - base) / step + 1;  // 1..4
  return {kSmallClasses + (k - kLargeLog2Min) * 4 + static_cast<int>(j - 1), base + j * step};
}

struct FreeBlock {
  FreeBlock* next;
};

struct Pool {
  SpinLock mutex;
  FreeBlock* lists[kClasses] = {};
  std::int64_t list_bytes[kClasses] = {};  // block size of each class, for empty_cache
  CacheStats stats;
  std::int64_t limit = -1;  // < 0: default

  std::int64_t effective_limit() const {
    return limit >= 0 ? limit : std::max(kMinDefaultLimit, stats.peak_in_use_bytes + stats.peak_in_use_bytes / 4);
  }
  /// Unlinks cached blocks, largest classes first, until `need` more bytes fit under the limit
  /// (or the cache is empty); the caller frees them outside the lock.
  FreeBlock* take_to_fit(std::int64_t need) {
    FreeBlock* out = nullptr;
    const std::int64_t cap = effective_limit();
    for (int c = kClasses - 1; c >= 0 && stats.in_use_bytes + stats.cached_bytes + need > cap; --c) {
      while (lists[c] && stats.in_use_bytes + stats.cached_bytes + need > cap) {
        FreeBlock* b = lists[c];
        lists[c] = b->next;
        stats.cached_bytes -= list_bytes[c];
        --stats.cached_blocks;
        ++stats.system_frees;
        b->next = out;
        out = b;
      }
    }
    return out;
  }
  /// Unlinks every cached block; the caller frees them outside the lock.
  FreeBlock* take_all() {
    FreeBlock* all = nullptr;
    for (int c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = lists[c]) {
        lists[c] = b->next;
        b->next = all;
        all = b;
        ++stats.system_frees;
      }
    }
    stats.cached_bytes = 0;
    stats.cached_blocks = 0;
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

void* system_allocate(std::size_t bytes) { return ::operator new(bytes, std::align_val_t{kAlignment}); }
void system_free(void* p) noexcept { ::operator delete(p, std::align_val_t{kAlignment}); }

void free_list(FreeBlock* b) noexcept {
  while (b) {
    FreeBlock* next = b->next;
    TG_UNPOISON(b, sizeof(FreeBlock));  // the rest is left to the system allocator's own bookkeeping
    system_free(b);
    b = next;
  }
}

}  // namespace

std::size_t size_class_bytes(std::size_t bytes) { return size_class(bytes).bytes; }

void* allocate(std::size_t bytes) {
  const SizeClass c = size_class(bytes);
  const auto size = static_cast<std::int64_t>(c.bytes);
  Pool& p = pool();
  FreeBlock* evicted;
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
    ++p.stats.system_allocs;
    p.list_bytes[c.index] = size;
    // Room for the new block under the limit: cached blocks of other classes go back first.
    evicted = p.take_to_fit(0);
    p.stats.peak_reserved_bytes =
        std::max(p.stats.peak_reserved_bytes, p.stats.in_use_bytes + p.stats.cached_bytes);
  }
  free_list(evicted);
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
      std::lock_guard lock(p.mutex);
      p.stats.in_use_bytes -= size;
      --p.stats.in_use_blocks;
      --p.stats.system_allocs;
      throw;
    }
  }
}

void deallocate(void* block, std::size_t bytes) noexcept {
  if (!block) return;
  const SizeClass c = size_class(bytes);
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
  system_free(block);
}

CacheStats cache_stats() {
  Pool& p = pool();
  std::lock_guard lock(p.mutex);
  CacheStats s = p.stats;
  s.limit = p.effective_limit();
  return s;
}

std::int64_t cached_bytes() { return cache_stats().cached_bytes; }

void empty_cache() {
  Pool& p = pool();
  FreeBlock* all;
  {
    std::lock_guard lock(p.mutex);
    all = p.take_all();
  }
  free_list(all);
}

void set_cache_limit(std::int64_t bytes) {
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
