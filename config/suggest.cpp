#include "config/suggest.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <vector>

namespace canopy::config {
namespace {

char lower(char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// Levenshtein distance over ASCII-lowered bytes.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    std::iota(row.begin(), row.end(), std::size_t{0});
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
            diagonal = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
        }
    }
    return row[b.size()];
}

} // namespace

std::optional<std::string_view> closest_match(std::string_view word, std::span<const std::string_view> candidates) {
    std::optional<std::string_view> best;
    std::size_t best_distance = 3;
    for (const std::string_view candidate : candidates) {
        const std::size_t distance = edit_distance(word, candidate);
        const bool close = distance == 0 || (distance < best_distance && 2 * distance < word.size());
        if (close) {
            best = candidate;
            best_distance = distance;
        }
    }
    return best;
}

} // namespace canopy::config
