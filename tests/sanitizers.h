#pragma once
// What a test does differently in a build under a sanitizer (scripts/test.sh's second and third builds: ASan with
// UBSan, and TSan), where every memory access is checked and the randomized tests' loops run 5 to 10 times slower.
//
// - property_cases(n): a randomized test runs its first n seeds or cases in the normal build and the first quarter
//   of them under the sanitizers. Those still send every path the test reaches through the sanitizers' checks;
//   the normal build keeps the full count for the search for a counterexample.
// - SANITIZED: tests of packaging (the Debian package, the installed library's consumer) skip themselves under the
//   sanitizers, which have no bearing on what they check; the normal build runs them.

#include <cstdint>

namespace canopy::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool SANITIZED = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool SANITIZED = true;
#else
inline constexpr bool SANITIZED = false;
#endif
#else
inline constexpr bool SANITIZED = false;
#endif

constexpr std::uint64_t property_cases(std::uint64_t n) noexcept {
    return SANITIZED ? (n + 3) / 4 : n;
}

} // namespace canopy::testing
