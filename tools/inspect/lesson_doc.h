// A small document model for qkv explain: sections of notes and tables, rendered
// either as aligned plain text for a terminal or as JSON with the same content.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace qkv::tools {

struct Cell {
  std::string text;       // as printed
  double number = 0;      // full precision, for JSON
  bool is_number = false;
};

Cell num(double v, int decimals = 4);  // printed with `decimals` places
Cell txt(std::string s);

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
};

struct Block {
  bool is_table = false;
  std::string note;
  Table table;
};

struct Section {
  std::string id, title;
  std::vector<Block> blocks;
  void note(std::string s);
  Table& table(std::string title, std::vector<std::string> columns);
};

struct Doc {
  std::vector<Section> sections;
  Section& section(std::string id, std::string title);
};

void render_text(const Doc& doc, FILE* out);
void render_json(const Doc& doc, FILE* out);

}  // namespace qkv::tools
