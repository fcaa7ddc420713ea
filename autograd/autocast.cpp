// Autocast state (thread-local, as torch's) and the bf16 weight cache.
#include "autograd/autocast.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "autograd/kernels/bf16_weights.h"
#include "autograd/kernels/gemm_bf16.h"
#include "autograd/tensor.h"

namespace tg::autocast {

namespace {

constexpr int kSamples = 16;

/// One cached weight in one orientation. Valid while its storage lives at the same address, no
/// backward has accumulated into the weight's gradient since it was packed (the hook sets
/// `stale`), and the sampled elements are unchanged.
struct Entry {
  std::weak_ptr<Storage> storage;
  const void* data = nullptr;
  std::int64_t K = 0, N = 0, ldb = 0;
  bool trans = false;
  std::shared_ptr<const kernels::bf16::PackedB> packed;
  std::shared_ptr<kernels::bf16::LazyPacked> other;
  std::shared_ptr<std::atomic<bool>> stale = std::make_shared<std::atomic<bool>>(false);
  HookHandle hook;
  std::uint32_t samples[kSamples] = {};
};

struct State {
  bool enabled = false;
  bool cache = true;
  int depth = 0;  // Guards open on this thread, enabled or not (the cache lives while > 0)
  std::vector<Entry> entries;
  std::int64_t hits = 0, packs = 0;
};

thread_local State t_state;

/// Each thread's cache registers its own hook on a shared parameter (the decoders' worker threads
/// each open a Guard), and a parameter's hook list is not thread-safe: registering and removing
/// cache hooks is serialised here. Rare: once per weight per outermost Guard.
std::mutex g_hook_mutex;

void remove_hook(HookHandle& hook) {
  std::lock_guard lock(g_hook_mutex);
  hook.remove();
}

void sample(const Tensor& w, std::uint32_t* out) {
  const float* p = w.data<float>();
  const std::int64_t n = w.numel();
  for (int s = 0; s < kSamples; ++s) {
    const std::int64_t i = n <= 1 ? 0 : s * (n - 1) / (kSamples - 1);
    std::memcpy(&out[s], p + (n == 0 ? 0 : i), n == 0 ? 0 : 4);
  }
}

void pack_into(Entry& e, const Tensor& w) {
  // The old copies go back to the caching allocator first, so that the new ones reuse their blocks
  // (a step's graph, which may hold them, is gone by the next step's forward).
  e.packed.reset();
  e.other.reset();
  e.packed = std::make_shared<const kernels::bf16::PackedB>(
      kernels::bf16::pack_b(e.trans, e.K, e.N, w.data<float>(), e.ldb));
  e.other = std::make_shared<kernels::bf16::LazyPacked>();
  e.stale->store(false, std::memory_order_relaxed);
  sample(w, e.samples);
  ++t_state.packs;
}

}  // namespace

Guard::Guard(Precision precision, bool enabled, bool cache_enabled)
    : prev_enabled_(t_state.enabled), prev_cache_(t_state.cache) {
  t_state.enabled = enabled && precision == Precision::bf16;
  t_state.cache = cache_enabled;
  ++t_state.depth;
  if (t_state.enabled && !bf16_hardware()) {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      std::fprintf(stderr, "tapegrad: bf16 requested, but this CPU has no avx512_bf16: products run the %s\n",
                   bf16_path());
  }
}

Guard::~Guard() {
  t_state.enabled = prev_enabled_;
  t_state.cache = prev_cache_;
  if (--t_state.depth == 0) clear_cache();
}

bool is_enabled() { return t_state.enabled; }
bool bf16_hardware() { return kernels::bf16::hardware(); }
const char* bf16_path() { return kernels::bf16::path_name(kernels::bf16::default_path()); }

void clear_cache() {
  for (Entry& e : t_state.entries) remove_hook(e.hook);
  t_state.entries.clear();
}

CacheStats cache_stats() {
  CacheStats s;
  for (const Entry& e : t_state.entries) {
    ++s.entries;
    s.bytes += static_cast<std::int64_t>(e.packed->bytes());
  }
  s.hits = t_state.hits;
  s.packs = t_state.packs;
  return s;
}

}  // namespace tg::autocast

namespace tg::kernels::bf16 {

bool autocast_applies(const Tensor& a, const Tensor& b) {
  return autocast::t_state.enabled && a.dtype() == DType::f32 && b.dtype() == DType::f32;
}

CachedWeight cached_weight(const Tensor& w, bool trans_b, std::int64_t K, std::int64_t N, std::int64_t ldb) {
  using autocast::Entry;
  auto& st = autocast::t_state;
  if (!st.enabled || !st.cache || st.depth == 0 || w.dtype() != DType::f32 || !w.is_leaf() || !w.requires_grad())
    return {};
  const void* data = w.data<float>();
  const Storage* storage = w.impl()->storage.get();
  for (Entry& e : st.entries) {
    if (e.data != data || e.K != K || e.N != N || e.ldb != ldb || e.trans != trans_b) continue;
    if (e.storage.lock().get() != storage) continue;  // the address now belongs to another buffer
    std::uint32_t now[autocast::kSamples];
    autocast::sample(w, now);
    if (e.stale->load(std::memory_order_relaxed) || std::memcmp(now, e.samples, sizeof now) != 0)
      autocast::pack_into(e, w);
    else
      ++st.hits;
    return {e.packed, e.other};
  }
  std::erase_if(st.entries, [](Entry& e) {
    if (!e.storage.expired()) return false;
    autocast::remove_hook(e.hook);
    return true;
  });
  Entry e;
  e.storage = w.impl()->storage;
  e.data = data, e.K = K, e.N = N, e.ldb = ldb, e.trans = trans_b;
  {
    std::lock_guard lock(autocast::g_hook_mutex);
    e.hook = Tensor(w).register_post_accumulate_grad_hook(
        [stale = e.stale](Tensor&) { stale->store(true, std::memory_order_relaxed); });
  }
  autocast::pack_into(e, w);
  st.entries.push_back(std::move(e));
  return {st.entries.back().packed, st.entries.back().other};
}

}  // namespace tg::kernels::bf16
