#include "cli/table.h"

#include <algorithm>
#include <cassert>

namespace canopy::cli {

std::size_t display_width(std::string_view utf8) noexcept {
    return static_cast<std::size_t>(
        std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

void Table::add_row(std::vector<std::string> cells) {
    assert(cells.size() == columns_.size());
    cells.resize(columns_.size());
    rows_.push_back(std::move(cells));
}

std::vector<bool> Table::shown_columns() const {
    std::vector<bool> shown(columns_.size(), true);
    for (std::size_t c = 0; c < columns_.size(); ++c) {
        if (columns_[c].optional) {
            shown[c] = std::any_of(rows_.begin(), rows_.end(), [c](const auto& row) { return !row[c].empty(); });
        }
    }
    return shown;
}

std::string Table::render_line(const std::vector<std::string>& cells, const std::vector<bool>& shown,
                               const std::vector<std::size_t>& width) const {
    std::string out;
    bool first = true;
    for (std::size_t c = 0; c < cells.size(); ++c) {
        if (!shown[c]) {
            continue;
        }
        const std::string pad(width[c] - display_width(cells[c]), ' ');
        out += first ? "" : "  ";
        out += columns_[c].align == Align::RIGHT ? pad + cells[c] : cells[c] + pad;
        first = false;
    }
    out.erase(out.find_last_not_of(' ') + 1);
    return out + "\n";
}

std::string Table::render() const {
    const std::vector<bool> shown = shown_columns();
    std::vector<std::size_t> width(columns_.size(), 0);
    std::vector<std::string> headers;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
        headers.push_back(columns_[c].header);
        width[c] = display_width(columns_[c].header);
        for (const auto& row : rows_) {
            width[c] = std::max(width[c], display_width(row[c]));
        }
    }
    std::string text = render_line(headers, shown, width);
    for (const auto& row : rows_) {
        text += render_line(row, shown, width);
    }
    return text;
}

} // namespace canopy::cli
