#pragma once
// A scratch directory per test: <temp>/<prefix>_<test name>_<pid>, created on the call.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace tg::models::testing {

/// `fresh`: remove what an earlier call (or run) left there first.
inline std::filesystem::path per_test_dir(const std::string& prefix, bool fresh) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    (prefix + "_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
  if (fresh) std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tg::models::testing
