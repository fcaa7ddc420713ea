// A rank that dies or stalls while the other waits in a collective (tests/dist/fault_test.cmake):
//   mpirun -np 2 dist_fault die     rank 1 exits without a word before the allreduce
//   mpirun -np 2 dist_fault stall   rank 1 sleeps far past TG_DIST_TIMEOUT instead of joining
// Rank 0 must not hang: mpirun ends the job (die) or rank 0's bounded wait aborts it (stall).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "autograd/dist.h"

int main(int argc, char** argv) {
  tg::dist::Context mpi(&argc, &argv);
  const std::string mode = argc > 1 ? argv[1] : "";
  tg::Tensor t = tg::Tensor::ones({1000}, tg::DType::f32);
  tg::dist::allreduce_sum(t);  // one healthy collective first
  if (tg::dist::rank() == 1) {
    if (mode == "die") ::_exit(3);
    if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(120));
  }
  tg::dist::allreduce_sum(t);
  std::printf("rank %d: finished (no fault injected)\n", tg::dist::rank());
  return 0;
}
