// The caching allocator (autograd/memory.h): size classes, reuse, alignment, accounting,
// empty_cache, the cache limit, the per-thread caches, and blocks freed on another thread than the
// one that allocated them.
// Other tests in this executable leave blocks in the cache, so the checks here use differences.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/gradcheck.h"
#include "autograd/memory.h"
#include "autograd/ops_elementwise.h"
#include "autograd/parallel.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/tape.h"
#include "autograd/tensor.h"

using namespace tg;

namespace {

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % memory::kAlignment == 0; }

/// Restores the default cache limit when a test ends, even on failure.
struct LimitGuard {
  ~LimitGuard() { memory::set_cache_limit(-1); }
};

}  // namespace

TEST(CachingAllocator, SizeClasses) {
  EXPECT_EQ(memory::size_class_bytes(0), 64u);
  EXPECT_EQ(memory::size_class_bytes(1), 64u);
  EXPECT_EQ(memory::size_class_bytes(64), 64u);
  EXPECT_EQ(memory::size_class_bytes(65), 128u);
  EXPECT_EQ(memory::size_class_bytes(1000), 1024u);
  EXPECT_EQ(memory::size_class_bytes(1024), 1024u);
  EXPECT_EQ(memory::size_class_bytes(1025), 1280u);
  EXPECT_EQ(memory::size_class_bytes(2048), 2048u);
  EXPECT_EQ(memory::size_class_bytes(2049), 2560u);
  EXPECT_EQ(memory::size_class_bytes(4000), 4096u);
  EXPECT_EQ(memory::size_class_bytes(1u << 20), 1u << 20);
  EXPECT_EQ(memory::size_class_bytes((1u << 20) + 1), (1u << 20) + (1u << 16));  // finer from 1 MiB
  EXPECT_EQ(memory::size_class_bytes((1u << 21) + 1), (1u << 21) + (1u << 17));
  // Above 1 KiB a class wastes at most 25% (6.25% from 1 MiB) and never exceeds the next power of two.
  std::mt19937_64 rng(0);
  for (int i = 0; i < 10000; ++i) {
    const std::size_t n = 1025 + rng() % (std::size_t{1} << 34);
    const std::size_t c = memory::size_class_bytes(n);
    ASSERT_GE(c, n);
    ASSERT_LE(c, n + (n > (std::size_t{1} << 20) ? n / 16 : n / 4)) << n;
    ASSERT_EQ(c % 64, 0u);
    ASSERT_EQ(memory::size_class_bytes(c), c);  // a class size is its own class
  }
}

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameClass) {
  memory::empty_cache();  // so that the thread's own cache has room and no older block of the class
  void* a = memory::allocate(1000);
  const auto before = memory::cache_stats();
  memory::deallocate(a, 1000);
  void* b = memory::allocate(1010);  // same class (1024 B): the block just freed
  const auto after = memory::cache_stats();
  EXPECT_EQ(b, a);
  EXPECT_EQ(after.system_allocs, before.system_allocs);
  EXPECT_EQ(after.hits, before.hits + 1);
  memory::deallocate(b, 1010);
}

TEST(CachingAllocator, BlocksAreAlignedAndUsable) {
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t n : {0, 1, 8, 63, 64, 65, 100, 1000, 1025, 5000, 100000, 3 << 20}) {
    void* p = memory::allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned(p)) << n;
    std::memset(p, 0xab, memory::size_class_bytes(n));  // the whole class is usable
    blocks.emplace_back(p, n);
  }
  for (auto [p, n] : blocks) memory::deallocate(p, n);
  // Tensor buffers and views are aligned as well.
  for (std::int64_t n : {1, 3, 17, 1000}) EXPECT_TRUE(aligned(Tensor::empty({n}).data<float>()));
}

TEST(CachingAllocator, LiveAndCachedBytesAreAccounted) {
  const auto live = memory::live_bytes();
  const auto buffers = memory::live_buffers();
  const auto s0 = memory::cache_stats();
  memory::CacheStats s1;
  {
    Tensor t = Tensor::empty({1000}, DType::f32);  // 4000 B, class 4096
    EXPECT_EQ(memory::live_bytes(), live + 4000);
    EXPECT_EQ(memory::live_buffers(), buffers + 1);
    s1 = memory::cache_stats();
    EXPECT_EQ(s1.in_use_blocks, s0.in_use_blocks + 3);  // buffer, handle, storage record
    EXPECT_GE(s1.in_use_bytes, s0.in_use_bytes + 4096 + 128);
    EXPECT_GE(s1.peak_in_use_bytes, s1.in_use_bytes);
  }
  EXPECT_EQ(memory::live_bytes(), live);
  EXPECT_EQ(memory::live_buffers(), buffers);
  const auto s2 = memory::cache_stats();
  EXPECT_EQ(s2.in_use_bytes, s0.in_use_bytes);
  EXPECT_EQ(s2.in_use_blocks, s0.in_use_blocks);
  // The three blocks went to the cache, not back to the system.
  EXPECT_EQ(s2.cached_bytes, s1.cached_bytes + (s1.in_use_bytes - s2.in_use_bytes));
  EXPECT_EQ(s2.cached_blocks, s1.cached_blocks + 3);
  EXPECT_EQ(s2.system_frees, s1.system_frees);
  EXPECT_EQ(s2.cached_bytes, memory::cached_bytes());
}

TEST(CachingAllocator, EmptyCacheReleasesCachedBlocksOnly) {
  Tensor kept = Tensor::full({256}, 7.0);
  { Tensor dropped = Tensor::zeros({4096}); }
  EXPECT_GE(memory::cached_bytes(), 4096 * 4);
  const auto before = memory::cache_stats();
  memory::empty_cache();
  const auto after = memory::cache_stats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.cached_blocks, 0);
  EXPECT_EQ(after.system_frees, before.system_frees + before.cached_blocks);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  for (double v : kept.to_vector<double>()) ASSERT_EQ(v, 7.0);  // live tensors are untouched
  // The next allocation of a freed class comes from the system again.
  { Tensor again = Tensor::zeros({4096}); }
  EXPECT_GT(memory::cache_stats().system_allocs, after.system_allocs);
}

// Blocks from 1 MiB are mapped from the kernel and unmapped when they go back. A block that waited
// in the cache (poisoned under ASan), was unmapped and whose addresses come back in a new mapping
// must be fully usable: under ASan this wrote into a range still marked poisoned.
TEST(CachingAllocator, LargeBlocksGoBackAndTheirAddressesComeBackUsable) {
  memory::empty_cache();
  constexpr std::size_t kLarge = std::size_t{3} << 20;
  for (int round = 0; round < 3; ++round) {
    const auto before = memory::cache_stats();
    auto* p = static_cast<unsigned char*>(memory::allocate(kLarge));
    std::memset(p, round, memory::size_class_bytes(kLarge));
    memory::deallocate(p, kLarge);  // cached (and poisoned under ASan)
    EXPECT_EQ(memory::cache_stats().cached_bytes, before.cached_bytes + static_cast<std::int64_t>(memory::size_class_bytes(kLarge)));
    memory::empty_cache();          // unmapped
    const auto after = memory::cache_stats();
    EXPECT_EQ(after.cached_bytes, 0);
    EXPECT_EQ(after.system_frees, before.system_frees + 1);
  }
}

// From 1 MiB, allocate_at_least takes a cached block up to two classes larger when its own class
// has none, reports its size, and the block goes back to the cache under that size.
TEST(CachingAllocator, AllocateAtLeastReusesASlightlyLargerCachedBlock) {
  memory::empty_cache();
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t big = memory::size_class_bytes(2 * kMiB + 1);  // 2 MiB + 1/16: one class up from 2 MiB
  ASSERT_GT(big, 2 * kMiB);
  void* a = memory::allocate(big);
  memory::deallocate(a, big);
  const auto before = memory::cache_stats();
  std::size_t got = 0;
  void* b = memory::allocate_at_least(2 * kMiB, &got);
  EXPECT_EQ(b, a);
  EXPECT_EQ(got, big);
  std::memset(b, 7, got);  // all of it is usable
  const auto during = memory::cache_stats();
  EXPECT_EQ(during.system_allocs, before.system_allocs);
  EXPECT_EQ(during.in_use_bytes, before.in_use_bytes + static_cast<std::int64_t>(big));
  EXPECT_EQ(during.cached_bytes, before.cached_bytes - static_cast<std::int64_t>(big));
  memory::deallocate(b, got);
  EXPECT_EQ(memory::cache_stats().cached_bytes, before.cached_bytes);
  // Its own class first; allocate() takes exactly its class; small sizes never move up.
  void* c = memory::allocate_at_least(2 * kMiB + 1, &got);
  EXPECT_EQ(c, a);
  EXPECT_EQ(got, big);
  memory::deallocate(c, got);
  const auto before_exact = memory::cache_stats();
  void* d = memory::allocate(2 * kMiB);  // not a hit: a is resized to 2 MiB instead
  EXPECT_EQ(memory::cache_stats().hits, before_exact.hits);
  EXPECT_EQ(memory::cache_stats().remaps, before_exact.remaps + 1);
  memory::deallocate(d, 2 * kMiB);
  void* small = memory::allocate(5000);
  memory::deallocate(small, 5000);
  void* e = memory::allocate_at_least(4000, &got);
  EXPECT_EQ(got, memory::size_class_bytes(4000));
  memory::deallocate(e, got);
  // Three classes up is too far for a hit: f is resized into a new 2 MiB block.
  memory::empty_cache();
  const std::size_t far = memory::size_class_bytes(2 * kMiB + 3 * (kMiB / 8) + 1);
  void* f = memory::allocate(far);
  memory::deallocate(f, far);
  const auto before_far = memory::cache_stats();
  void* g = memory::allocate_at_least(2 * kMiB, &got);
  EXPECT_EQ(got, 2 * kMiB);
  EXPECT_EQ(memory::cache_stats().system_allocs, before_far.system_allocs + 1);
  EXPECT_EQ(memory::cache_stats().remaps, before_far.remaps + 1);
  memory::deallocate(g, got);
  memory::empty_cache();
}

// A mapped block (from 1 MiB) that no cached block of its class or the next two can serve is made
// from the cached mapped block nearest in size, resized by the kernel: its pages come along with
// their contents (a fresh mapping would read as zeros), and the accounting is that of freeing the
// cached block and mapping a new one. Smaller blocks never take a mapped block.
TEST(CachingAllocator, AMappedBlockIsResizedFromACachedOneOfAnotherClass) {
  memory::empty_cache();
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  auto* a = static_cast<unsigned char*>(memory::allocate(4 * kMiB));
  std::memset(a, 0x5A, 4 * kMiB);
  memory::deallocate(a, 4 * kMiB);

  // Shrinking: 2 MiB from the cached 4 MiB block.
  const auto before = memory::cache_stats();
  auto* b = static_cast<unsigned char*>(memory::allocate(2 * kMiB));
  const auto shrunk = memory::cache_stats();
  EXPECT_EQ(shrunk.remaps, before.remaps + 1);
  EXPECT_EQ(shrunk.system_allocs, before.system_allocs + 1);
  EXPECT_EQ(shrunk.system_frees, before.system_frees + 1);
  EXPECT_EQ(shrunk.cached_bytes, before.cached_bytes - static_cast<std::int64_t>(4 * kMiB));
  EXPECT_EQ(shrunk.in_use_bytes, before.in_use_bytes + static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(b[4096], 0x5A);  // the start holds the free list's link
  EXPECT_EQ(b[2 * kMiB - 1], 0x5A);
  memory::deallocate(b, 2 * kMiB);

  // Growing: 6 MiB from the cached 2 MiB block; the first 2 MiB keep their bytes, all 6 are usable.
  auto* c = static_cast<unsigned char*>(memory::allocate(6 * kMiB));
  EXPECT_EQ(memory::cache_stats().remaps, before.remaps + 2);
  EXPECT_EQ(c[4096], 0x5A);
  EXPECT_EQ(c[2 * kMiB - 1], 0x5A);
  std::memset(c, 0x3C, 6 * kMiB);
  EXPECT_EQ(c[6 * kMiB - 1], 0x3C);
  memory::deallocate(c, 6 * kMiB);

  // A block below 1 MiB leaves the cached mapped block alone.
  const auto mapped_cached = memory::cache_stats();
  void* small = memory::allocate(100000);
  EXPECT_EQ(memory::cache_stats().remaps, mapped_cached.remaps);
  EXPECT_EQ(memory::cache_stats().cached_bytes, mapped_cached.cached_bytes);
  memory::deallocate(small, 100000);

  // Nothing mapped in the cache: a fresh mapping.
  memory::empty_cache();
  const auto empty = memory::cache_stats();
  void* d = memory::allocate(3 * kMiB);
  EXPECT_EQ(memory::cache_stats().remaps, empty.remaps);
  EXPECT_EQ(memory::cache_stats().system_allocs, empty.system_allocs + 1);
  memory::deallocate(d, 3 * kMiB);
  memory::empty_cache();
}

// Random sizes around and above 1 MiB, freed in random order: every block is of the request's class
// or (from 1 MiB) at most two classes up, its last byte is writable, and in-use bytes come back to
// where they started.
TEST(CachingAllocator, AllocateAtLeastKeepsTheAccountingUnderRandomUse) {
  memory::empty_cache();
  const auto before = memory::cache_stats();
  std::mt19937 gen(1);
  std::vector<std::pair<unsigned char*, std::size_t>> live;
  for (int i = 0; i < 2000; ++i) {
    if (live.size() < 24 && gen() % 3 != 0) {
      std::size_t want = (std::size_t{1} << 20) + gen() % (std::size_t{3} << 20);
      if (gen() % 4 == 0) want = 64 + gen() % 100000;
      std::size_t got = 0;
      auto* p = static_cast<unsigned char*>(memory::allocate_at_least(want, &got));
      const std::size_t own = memory::size_class_bytes(want);
      if (own < (std::size_t{1} << 20)) {
        ASSERT_EQ(got, own);
      } else {  // its own class or one of the next two
        ASSERT_GE(got, own);
        ASSERT_LE(got, memory::size_class_bytes(memory::size_class_bytes(own + 1) + 1));
      }
      p[0] = 1;
      p[got - 1] = 2;
      live.emplace_back(p, got);
    } else if (!live.empty()) {
      const std::size_t k = gen() % live.size();
      EXPECT_EQ(live[k].first[live[k].second - 1], 2);
      memory::deallocate(live[k].first, live[k].second);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  for (const auto& [p, n] : live) memory::deallocate(p, n);
  EXPECT_EQ(memory::cache_stats().in_use_bytes, before.in_use_bytes);
  memory::empty_cache();
}

TEST(CachingAllocator, LimitSendsExcessBlocksBackToTheSystem) {
  // Blocks above 64 KiB: smaller ones may be parked in the thread's cache, outside the limit
  // (ThreadCachesParkSmallBlocksOutsideTheLimit).
  constexpr std::size_t kBig = 100000, kHuge = 1 << 20;
  LimitGuard guard;
  memory::set_cache_limit(0);
  EXPECT_EQ(memory::cached_bytes(), 0);  // lowering the limit trims the cache at once
  const auto before = memory::cache_stats();
  void* p = memory::allocate(kBig);
  memory::deallocate(p, kBig);
  const auto after = memory::cache_stats();
  EXPECT_EQ(after.cached_bytes, 0);
  EXPECT_EQ(after.system_frees, before.system_frees + 1);
  EXPECT_EQ(memory::cache_limit(), 0);
  // The limit counts blocks in use and cached together.
  memory::set_cache_limit(memory::cache_stats().in_use_bytes + static_cast<std::int64_t>(kHuge));
  p = memory::allocate(kBig);
  memory::deallocate(p, kBig);
  EXPECT_EQ(memory::cached_bytes(), static_cast<std::int64_t>(memory::size_class_bytes(kBig)));
  // A new block that does not fit next to the cached ones evicts them first.
  void* huge = memory::allocate(kHuge);
  EXPECT_EQ(memory::cached_bytes(), 0);
  memory::deallocate(huge, kHuge);
  EXPECT_LE(memory::cache_stats().in_use_bytes + memory::cached_bytes(), memory::cache_limit());
  memory::set_cache_limit(-1);
  EXPECT_GE(memory::cache_limit(), std::int64_t{64} << 20);  // the default
}

TEST(CachingAllocator, ThreadCachesParkSmallBlocksOutsideTheLimit) {
  LimitGuard guard;
  memory::set_cache_limit(0);  // also returns every thread's parked blocks
  ASSERT_EQ(memory::cached_bytes(), 0);
  // Classes up to 64 KiB: a thread keeps 256 KiB worth of freed blocks per class (8 to 64 blocks)
  // for itself, counted as cached; of the 40 KiB class, 8.
  const std::size_t n = 40000, cls = memory::size_class_bytes(n);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(memory::allocate(n));
  const auto s0 = memory::cache_stats();
  for (void* b : blocks) memory::deallocate(b, n);
  const auto s1 = memory::cache_stats();
  EXPECT_EQ(s1.cached_blocks, 8);
  EXPECT_EQ(s1.cached_bytes, static_cast<std::int64_t>(8 * cls));
  EXPECT_EQ(s1.system_frees, s0.system_frees + 2);  // the two beyond 8 met the limit of 0
  EXPECT_EQ(s1.in_use_blocks, s0.in_use_blocks - 10);
  // Reuse comes from the thread's own blocks: no system allocation, counted as hits.
  void* again = memory::allocate(n);
  const auto s2 = memory::cache_stats();
  EXPECT_EQ(s2.system_allocs, s1.system_allocs);
  EXPECT_EQ(s2.hits, s1.hits + 1);
  memory::deallocate(again, n);
  // Another thread's parked blocks are counted, and empty_cache returns them too.
  std::mutex m;
  std::condition_variable cv;
  bool parked = false, release = false;
  std::thread other([&] {
    void* q = memory::allocate(3000);
    memory::deallocate(q, 3000);
    std::unique_lock lock(m);
    parked = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return parked; });
  }
  EXPECT_EQ(memory::cache_stats().cached_blocks, 9);
  memory::empty_cache();
  const auto s3 = memory::cache_stats();
  EXPECT_EQ(s3.cached_blocks, 0);
  EXPECT_EQ(s3.cached_bytes, 0);
  {
    std::lock_guard lock(m);
    release = true;
  }
  cv.notify_all();
  other.join();
  EXPECT_EQ(memory::cache_stats().in_use_blocks, s3.in_use_blocks);
}

TEST(CachingAllocator, BlocksFreedOnAnotherThread) {
  memory::empty_cache();  // this thread's cache holds no block of a's class
  const auto s0 = memory::cache_stats();
  // Allocated here, freed there (parked until that thread exits), reused here.
  void* a = memory::allocate(777);
  std::thread([a] { memory::deallocate(a, 777); }).join();
  void* b = memory::allocate(777);
  EXPECT_EQ(b, a);
  memory::deallocate(b, 777);
  // Tensors made on one thread and dropped on another (TBB tasks, a data-loading thread).
  std::vector<Tensor> made;
  std::thread([&] {
    for (int i = 0; i < 100; ++i) made.push_back(Tensor::full({i + 1}, i));
  }).join();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(made[static_cast<std::size_t>(i)].at({i}), i);
  made.clear();
  // Two threads allocating and freeing concurrently, each block checked for corruption.
  auto churn = [](unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<std::pair<unsigned char*, std::size_t>> held;
    for (int i = 0; i < 20000; ++i) {
      if (held.size() < 64 && (held.empty() || rng() % 2)) {
        const std::size_t n = 1 + rng() % 20000;
        auto* p = static_cast<unsigned char*>(memory::allocate(n));
        std::memset(p, static_cast<int>(n & 0xff), n);
        held.emplace_back(p, n);
      } else {
        const std::size_t k = rng() % held.size();
        auto [p, n] = held[k];
        for (std::size_t j = 0; j < n; j += 97)
          if (p[j] != static_cast<unsigned char>(n & 0xff)) return false;
        memory::deallocate(p, n);
        held[k] = held.back();
        held.pop_back();
      }
    }
    for (auto [p, n] : held) memory::deallocate(p, n);
    return true;
  };
  bool ok1 = false, ok2 = false;
  std::thread t1([&] { ok1 = churn(1); }), t2([&] { ok2 = churn(2); });
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1);
  EXPECT_TRUE(ok2);
  const auto s1 = memory::cache_stats();
  EXPECT_EQ(s1.in_use_blocks, s0.in_use_blocks);
  EXPECT_EQ(s1.in_use_bytes, s0.in_use_bytes);
}

TEST(CachingAllocator, PoolAllocatorServesStandardContainers) {
  PooledVector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i);
  EXPECT_EQ(v[999], 999);
  EXPECT_TRUE(aligned(v.data()));
  auto shared = std::allocate_shared<std::vector<int>>(PoolAllocator<std::vector<int>>(), 3, 5);
  EXPECT_EQ((*shared)[2], 5);
}
