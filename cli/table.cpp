#include "cli/table.h"

#include <algorithm>
#include <cassert>

namespace canopy::cli {

std::size_t display_width(std::string_view utf8) noexcept {
    return static_cast<std::size_t>(
        std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xc0) != 0x80; }));
}

std::string printable(std::string_view text) {
    static constexpr char HEX[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\t') {
            out += "\\t";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            out += {'\\', 'x', HEX[c >> 4], HEX[c & 0xf]};
        } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                   static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
            // U+0080..U+009F in UTF-8.
            const auto code = static_cast<unsigned char>(text[++i]);
            out += {'\\', 'u', '0', '0', HEX[code >> 4], HEX[code & 0xf]};
        } else {
            out += static_cast<char>(c);
        }
    }
    return out;
}

void Table::add_row(std::vector<std::string> cells) {
    assert(cells.size() == columns_.size());
    cells.resize(columns_.size());
    for (auto& cell : cells) {
        cell = printable(cell);
    }
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
