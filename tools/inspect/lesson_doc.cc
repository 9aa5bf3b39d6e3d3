#include "tools/inspect/lesson_doc.h"

#include <algorithm>
#include <cmath>

#include "tools/args.h"

namespace qkv::tools {

namespace {

// Display width of UTF-8 text (code points; the lesson's text has no wide characters).
size_t width(const std::string& s) {
  size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(const std::string& s, size_t w, bool right) {
  const size_t n = width(s);
  const std::string fill(w > n ? w - n : 0, ' ');
  return right ? fill + s : s + fill;
}

void json_number(FILE* out, double v) {
  if (std::isfinite(v)) {
    std::fprintf(out, "%.17g", v);
  } else {
    std::fputs("null", out);
  }
}

}  // namespace

Cell num(double v, int decimals) {
  Cell c;
  c.text = fixed(v, decimals);
  if (c.text == "-" + fixed(0.0, decimals)) c.text.erase(0, 1);
  c.number = v;
  c.is_number = true;
  return c;
}

Cell txt(std::string s) {
  Cell c;
  c.text = std::move(s);
  return c;
}

void Section::note(std::string s) {
  Block b;
  b.note = std::move(s);
  blocks.push_back(std::move(b));
}

Table& Section::table(std::string title, std::vector<std::string> columns) {
  Block b;
  b.is_table = true;
  b.table.title = std::move(title);
  b.table.columns = std::move(columns);
  blocks.push_back(std::move(b));
  return blocks.back().table;
}

Section& Doc::section(std::string id, std::string title) {
  sections.push_back(Section{std::move(id), std::move(title), {}});
  return sections.back();
}

void render_text(const Doc& doc, FILE* out) {
  for (const Section& s : doc.sections) {
    std::fprintf(out, "\n== %s ==\n", s.title.c_str());
    for (const Block& b : s.blocks) {
      if (!b.is_table) {
        std::fprintf(out, "%s\n", b.note.c_str());
        continue;
      }
      const Table& t = b.table;
      std::vector<size_t> w(t.columns.size());
      for (size_t c = 0; c < t.columns.size(); ++c) w[c] = width(t.columns[c]);
      for (const auto& row : t.rows) {
        for (size_t c = 0; c < row.size() && c < w.size(); ++c) w[c] = std::max(w[c], width(row[c].text));
      }
      if (!t.title.empty()) std::fprintf(out, "\n%s\n", t.title.c_str());
      std::string line;
      for (size_t c = 0; c < t.columns.size(); ++c) line += (c ? "  " : "  ") + pad(t.columns[c], w[c], c > 0);
      std::fprintf(out, "%s\n", line.c_str());
      line = "";
      for (size_t c = 0; c < t.columns.size(); ++c) line += "  " + std::string(w[c], '-');
      std::fprintf(out, "%s\n", line.c_str());
      for (const auto& row : t.rows) {
        line = "";
        for (size_t c = 0; c < row.size() && c < w.size(); ++c) {
          line += "  " + pad(row[c].text, w[c], row[c].is_number);
        }
        std::fprintf(out, "%s\n", line.c_str());
      }
    }
  }
}

void render_json(const Doc& doc, FILE* out) {
  std::fputs("{\"sections\": [", out);
  for (size_t i = 0; i < doc.sections.size(); ++i) {
    const Section& s = doc.sections[i];
    std::fprintf(out, "%s\n {\"id\": \"%s\", \"title\": \"%s\", \"notes\": [", i ? "," : "", json_escape(s.id).c_str(),
                 json_escape(s.title).c_str());
    bool first = true;
    for (const Block& b : s.blocks) {
      if (b.is_table) continue;
      std::fprintf(out, "%s\"%s\"", first ? "" : ", ", json_escape(b.note).c_str());
      first = false;
    }
    std::fputs("], \"tables\": [", out);
    first = true;
    for (const Block& b : s.blocks) {
      if (!b.is_table) continue;
      const Table& t = b.table;
      std::fprintf(out, "%s\n  {\"title\": \"%s\", \"rows\": [", first ? "" : ",", json_escape(t.title).c_str());
      first = false;
      for (size_t r = 0; r < t.rows.size(); ++r) {
        std::fputs(r ? ", {" : "{", out);
        for (size_t c = 0; c < t.rows[r].size() && c < t.columns.size(); ++c) {
          std::fprintf(out, "%s\"%s\": ", c ? ", " : "", json_escape(t.columns[c]).c_str());
          const Cell& cell = t.rows[r][c];
          if (cell.is_number) {
            json_number(out, cell.number);
          } else {
            std::fprintf(out, "\"%s\"", json_escape(cell.text).c_str());
          }
        }
        std::fputs("}", out);
      }
      std::fputs("]}", out);
    }
    std::fputs("]}", out);
  }
  std::fputs("\n]}\n", out);
}

}  // namespace qkv::tools
