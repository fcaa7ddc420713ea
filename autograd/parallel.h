#pragma once
// Thread-count control for every parallel kernel. Results never depend on the count: kernels
// split work in fixed-size blocks and combine partial results in a fixed order.

namespace tg {

/// Limits tapegrad's kernels to `n` threads (0 = all hardware threads). Process-wide.
void set_num_threads(int n);

/// The number of threads kernels may use now.
int num_threads();

}  // namespace tg
