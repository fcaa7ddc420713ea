#pragma once
// Live tensor memory, for tests and diagnostics (memory must not grow across training steps).
#include <cstdint>

namespace tg::memory {
/// Bytes held by all tensor buffers alive in the process.
std::int64_t live_bytes();
/// Number of tensor buffers alive in the process.
std::int64_t live_buffers();
}  // namespace tg::memory
