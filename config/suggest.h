#pragma once
// Close-match hints for misspelt names: config keys ("chip" -> "chips") and CLI commands ("stauts" -> "status").
//
// Thread safety: pure functions.

#include <optional>
#include <span>
#include <string_view>

namespace canopy::config {

// The candidate closest to `word` when it is close enough to be a likely misspelling: equal but for
// letter case, or within an edit distance of 2 that is less than half the word's length. nullopt
// otherwise.
std::optional<std::string_view> closest_match(std::string_view word, std::span<const std::string_view> candidates);

} // namespace canopy::config
