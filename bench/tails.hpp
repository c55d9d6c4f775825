// bench/tails.hpp — the per-call tail mode of tickwheel-bench (tails.cpp).
#pragma once

namespace tickwheel_bench {

// Times single schedule, cancel and advance calls, each on its own, at 10k and 1M pending, on the
// wheel and on the heap baseline, each with and without a reserve; prints p50, p99, p99.9, p99.99
// and max per operation (medians over `runs` runs) and the minor page faults each phase took.
// `thp_off` only labels the output (the caller has applied it). Returns the process exit status:
// 1 if a queue lost a timer (a cancel of a pending timer failed, or the firing count is off).
int run_tails(int runs, bool thp_off);

}  // namespace tickwheel_bench
