#pragma once
// error_within: error_of with a deadline, for calls that could block forever (opening a FIFO
// blocks until a writer comes). The call runs on its own thread; past the deadline the test fails
// and `unblock` (e.g. opening the FIFO's other end) is called so the thread can end and be joined.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tg::testing {

/// The what() of the std::exception `f` throws ("(no exception)" if none). If `f` has not returned
/// after `seconds`, adds a test failure naming `label`, calls `unblock` and waits for `f`.
inline std::string error_within(double seconds, const std::string& label, const std::function<void()>& f,
                                const std::function<void()>& unblock) {
  std::promise<std::string> result;
  auto done = result.get_future();
  std::thread worker([&] {
    try {
      f();
      result.set_value("(no exception)");
    } catch (const std::exception& e) {
      result.set_value(e.what());
    }
  });
  if (done.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    ADD_FAILURE() << label << ": still blocked after " << seconds << " s";
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) unblock();
  }
  worker.join();
  return done.get();
}

/// Opens the FIFO at `path` for writing and closes it at once: a reader blocked in open() or
/// read() on it returns (with end of file).
inline void unblock_fifo_reader(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
}

}  // namespace tg::testing
