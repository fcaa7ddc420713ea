#pragma once
// error_of: the message of the exception a call throws, for tests that assert on its text.
//
//   EXPECT_EQ(tg::testing::error_of<std::invalid_argument>([&] { make_task("sort"); }), "...");
#include <exception>
#include <string>
#include <utility>

namespace tg::testing {

/// The what() of the E that f() throws, or "(no exception)" if it returns normally. An exception
/// of another type is not caught (the test fails with it).
template <class E = std::exception, class F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace tg::testing
