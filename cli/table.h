#pragma once
// Table: plain-text columns for human output, aligned by display width (UTF-8 code points, so tree
// drawing characters count as one column each).
//
// Columns are separated by two spaces; no line has trailing spaces. An optional column is left out when
// every cell of it is empty.
//
// Thread safety: a value type; one thread at a time.

#include <string>
#include <string_view>
#include <vector>

namespace canopy::cli {

// The number of code points in a UTF-8 string (bytes that are not continuation bytes).
std::size_t display_width(std::string_view utf8) noexcept;

// `text` as a terminal shows it without obeying any of it: the C0 controls and DEL become \t, \n, \r or \xNN
// and the C1 controls (U+0080..U+009F, which terminals may take for the start of an escape sequence) \u0080..
// \u009f; everything else, non-ASCII letters and tree drawing included, is unchanged. Text the daemon sends (task
// names, error messages, a remote host's worker tree) is another user's or another host's, so human output passes
// it through this: it stays on its line and cannot move the cursor, recolour or retitle the terminal.
std::string printable(std::string_view text);

class Table {
public:
    enum class Align { LEFT, RIGHT };
    struct Column {
        std::string header;
        Align align = Align::LEFT;
        bool optional = false;
    };

    explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

    // Each cell is shown as printable(cell). REQUIRES: cells.size() equals the number of columns.
    void add_row(std::vector<std::string> cells);

    bool empty() const noexcept { return rows_.empty(); }

    // The header line and one line per row, each ending in '\n'.
    std::string render() const;

private:
    std::vector<bool> shown_columns() const;
    std::string render_line(const std::vector<std::string>& cells, const std::vector<bool>& shown,
                            const std::vector<std::size_t>& width) const;

    std::vector<Column> columns_;
    std::vector<std::vector<std::string>> rows_;
};

} // namespace canopy::cli
