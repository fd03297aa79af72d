#!/usr/bin/env python3
"""Token-id goldens of the default model's tokenizer, from llama.cpp (llama-cpp-python).

Reads tests/data/tokenizer/corpus.json (writes it first with --write-corpus) and writes
tests/data/tokenizer/smollm2_goldens.json: for every corpus string the ids llama.cpp gives with
parse_special false and true, BOS not added. Run with the reference venv:
    /root/.cache/ember/venv-ref/bin/python tests/reference/make_tokenizer_goldens.py [--write-corpus]
Corpus entries are {"text": str} or, for bytes that are not valid UTF-8, {"hex": str}.
"""
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "tokenizer")
MODEL = os.environ.get("EMBER_MODEL",
                       os.path.expanduser("~/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf"))

PROSE = [
    "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
    "It's a beautiful day, isn't it? We'll see, they've said they'd come.",
    "I'M SHOUTING BECAUSE IT'S LOUD. YOU'RE RIGHT, WE'LL GO.",
    "Dr. Smith's patients weren't happy -- they'd waited 3 hours!",
    "  leading spaces", "trailing spaces   ", "multiple   spaces   between   words",
    "Tabs\tbetween\twords", "Line one\nLine two\nLine three", "Windows\r\nline\r\nendings",
    "Mixed \t \n whitespace \n\n\n\t\t  run", "\n\n\n", "\t", " ", "  ", "    ", "\n \n \n",
    "a", "I", "OK", "e.g. i.e. etc. vs.", "Mr. and Mrs. O'Neil's dog's bone",
    "rock 'n' roll", "'quoted' \"double\" `backtick`", "'s 't 're 've 'm 'll 'd",
    "don't won't can't shouldn't y'all", "It'S mIxEd CaSe'Ll 'Re",
    "supercalifragilisticexpialidocious", "antidisestablishmentarianism",
    "The year 2024 had 366 days; 1,000,000 people; 3.14159 is pi.",
    "Call 555-123-4567 or +1 (800) 555 0199.", "Version v1.2.3-rc.4+build.5",
    "email@example.com https://example.com/path?q=1&r=2#frag",
    "C:\\Users\\name\\file.txt", "/usr/local/bin/python3", "50% off! $19.99 or €17,50 or £15",
    "¿Qué tal? ¡Muy bien!", "naïve café résumé coöperate", "Straße, Größe, Übermaß",
    "Ελληνικά: Γειά σου κόσμε", "Русский: Привет, мир! Как дела?", "Українська мова",
    "עברית: שלום עולם", "العربية: مرحبا بالعالم", "فارسی: سلام دنیا",
    "हिन्दी: नमस्ते दुनिया", "বাংলা: হ্যালো বিশ্ব", "தமிழ்: வணக்கம் உலகம்", "ไทย: สวัสดีชาวโลก",
    "Tiếng Việt: Xin chào thế giới", "Türkçe: Merhaba dünya, ığüşöç",
    "Polski: Zażółć gęślą jaźń", "Čeština: Příliš žluťoučký kůň", "Íslenska: Þetta er prófun",
    "中文：你好，世界！今天天气很好。", "我爱北京天安门", "繁體中文：這是一個測試。",
    "日本語：こんにちは世界。カタカナとひらがな。", "東京都渋谷区", "ｶﾀｶﾅ ﾊﾝｶｸ", "ＡＢＣ１２３",
    "한국어: 안녕하세요 세계", "조선글 한글", "ᄀᄁᄂ combining jamo",
    "Emoji: 😀😃😄😁 🙂", "👍🏽 skin tone", "👨‍👩‍👧‍👦 family ZWJ", "🏳️‍🌈 rainbow flag",
    "🇺🇸🇬🇧🇯🇵 flags", "❤️ heart with VS16", "1️⃣ keycap", "🧑🏿‍🚀 astronaut",
    "Math: ∑ ∫ √ ∞ ≠ ≤ ≥ ± × ÷ ∂ ∇", "Arrows → ← ↑ ↓ ⇒", "Box ┌─┐│└┘", "Music ♩♪♫♬",
    "Superscripts x² y³ ½ ¾ ⅓ Ⅻ", "Roman Ⅰ Ⅱ Ⅲ Ⅳ", "Circled ① ② ③", "Arabic digits ٠١٢٣٤٥٦٧٨٩",
    "Devanagari digits ०१२३", "Full-width ０１２３", "Zero\u200bwidth\u200bspace",
    "Non\u00a0breaking\u00a0space", "Ideographic\u3000space", "En\u2002em\u2003thin\u2009spaces",
    "Soft\u00adhyphen", "Line\u2028separator", "Para\u2029separator", "NEL\u0085char",
    "Control \u0001\u0002\u001f chars", "Bell\u0007and\u001bescape", "Null\u0000byte",
    "Combining e\u0301 a\u0300 n\u0303", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇ text", "Private use \ue000\uf8ff",
    "Surrogate-free 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕄𝕒𝕥𝕙", "Ancient 𓀀𓀁 hieroglyphs", "Noncharacter \ufdd0\uffff",
    "Replacement \ufffd char", "BOM \ufeff at start", "Direction \u202emarks\u202c here",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "import numpy as np\nx = np.arange(10).reshape(2, 5)\nprint(x.T @ x)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"Hello, %s!\\n\", \"world\");\n\treturn 0;\n}\n",
    "template <typename T>\nstd::vector<T> f(const T& x) { return {x, x}; }\n",
    "fn main() {\n    let v: Vec<i32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "func main() {\n\tfmt.Println(\"hi\")\n\tif err != nil { return }\n}\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n",
    "public static void main(String[] args) { System.out.println(args.length); }",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><head><title>T</title></head><body><p class=\"x\">Hi</p></body></html>",
    "{\"key\": [1, 2.5, true, null], \"nested\": {\"a\": \"b\"}}",
    "key: value\nlist:\n  - one\n  - two\n", "[section]\nname = \"value\"\ncount = 3\n",
    "#!/bin/bash\nfor f in *.txt; do echo \"$f\"; done | sort -u > out.log 2>&1\n",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=1;c>>=2;d&=e|f^g;", "if (a&&b||!c) { x = a?b:c; }",
    "    indented with four spaces\n        and eight\n\t\tand two tabs",
    "// comment\n/* block\n   comment */\n# hash comment\n-- sql comment",
    "\\begin{equation} E = mc^2 \\end{equation}", "$$\\frac{a}{b} + \\sqrt{x^2}$$",
    "diff --git a/f b/f\n@@ -1,3 +1,3 @@\n-old\n+new\n", "0x1F 0b1010 0o17 1e-9 6.02e23 .5 5.",
    "a=b==c!=d<=e>=f<g>h", "...;;;:::,,,!!!???", "___init___ __dunder__ snake_case camelCase",
    "PascalCase SCREAMING_CASE kebab-case", "if x:\n\tpass\nelse:\n\t\tpass\n",
]

NUMBERS = ["0", "7", "42", "123", "1234", "12345", "123456", "1234567890",
           "3.14159265358979323846", "1,234,567.89", "-273.15", "+42", "1e100", "2^64 = 18446744073709551616",
           "007", "000000000", "9" * 50, "12 34 56", "1 2 3 4 5", "v2", "x86_64", "A1B2C3",
           "1st 2nd 3rd 4th", "10:30 PM", "2024-01-15T10:30:00Z", "192.168.0.1", "$1,000,000.00"]

SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>",
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
            "<|im_start|>system\nYou are helpful.<|im_end|>",
            "text<|im_end|>more text", "<|im_start|><|im_start|><|im_end|>",
            "<|im_start", "im_start|>", "<|im_start|", "< |im_start| >", "<|IM_START|>",
            "<repo_name>ember<file_sep>main.cpp<filename>x", "<jupyter_code>print(1)<jupyter_output>1",
            "<gh_stars>100", "<issue_start>bug<issue_comment>fix<issue_closed>", "<empty_output>",
            " <|im_end|> ", "\n<|im_end|>\n", "<|endoftext|><|endoftext|>", "<s>[INST] hi [/INST]",
            "<start_of_turn>user", "<|eot_id|>", "<|im_end|>😀<|im_start|>日本"]

# Not "f4908080": it decodes (leniently) past U+10FFFF and llama.cpp aborts on it.
INVALID_HEX = ["ff", "fe", "c0", "c080", "c3", "c328", "a0a1", "e282", "e228a1", "f09f", "f09f98",
               "f0288cbc", "eda080", "edbfbf", "fffe", "80", "bf", "c0af",
               "e08080", "48656c6c6fff776f726c64", "61ff62fe63", "e4bda0e5a5bdff",
               "f09f9880f09f", "2020ff2020", "ffffffff", "c3a9c3", "3132ff3334",
               "e29c93e29c", "41c2", "0a0aff0a"]


def generated_strings():
    rng = random.Random(20240611)
    out = []
    # Long whitespace runs and mixes.
    for n in (1, 2, 3, 5, 8, 16, 33):
        out.append("x" + " " * n + "y")
        out.append("x" + "\n" * n + "y")
        out.append(" " * n)
    for pattern in (" \t", "\t ", " \n", "\n ", "\r\n", " \r\n ", "\t\n\t"):
        out.append("a" + pattern * 4 + "b")
    # Random mixes of pieces from every class.
    pieces = ["the", " the", "The", " ", "  ", "\n", "\t", "'s", "'ll", "1", "23", "456", "7890",
              ".", ",", "!", "?", "...", "--", "()", "{}", "日本", "中文", "한국", "😀", "👍🏽",
              "é", "ß", "Привет", "مرحبا", "नमस्ते", "#", "$", "%", "&&", "=>", "::", "\u00a0",
              "<|im_end|>", "<|im_start|>", "_", "__", "x²", "½"]
    for _ in range(150):
        k = rng.randint(1, 12)
        out.append("".join(rng.choice(pieces) for _ in range(k)))
    # Long prose, long words, repetitions.
    out.append(" ".join(PROSE[:20]))
    out.append("\n\n".join(CODE[:6]))
    out.append("ab" * 200)
    out.append("Hello " * 100)
    out.append("日本語" * 50)
    out.append("😀" * 40)
    return out


def build_corpus():
    entries = [{"text": ""}]
    for s in PROSE + CODE + NUMBERS + SPECIALS + generated_strings():
        entries.append({"text": s})
    for h in INVALID_HEX:
        entries.append({"hex": h})
    return {"description": "Tokenizer golden corpus: prose in many scripts, code, numbers, "
                           "whitespace, emoji, special-token text, invalid UTF-8 (hex).",
            "strings": entries}


def entry_bytes(entry):
    return bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode("utf-8")


def main():
    corpus_path = os.path.join(DATA, "corpus.json")
    if "--write-corpus" in sys.argv or not os.path.exists(corpus_path):
        os.makedirs(DATA, exist_ok=True)
        with open(corpus_path, "w", encoding="utf-8") as f:
            json.dump(build_corpus(), f, ensure_ascii=False, indent=1)
            f.write("\n")
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)["strings"]

    import llama_cpp
    llm = llama_cpp.Llama(model_path=MODEL, vocab_only=True, verbose=False)
    cases = []
    for i, entry in enumerate(corpus):
        data = entry_bytes(entry)
        cases.append({"plain": llm.tokenize(data, add_bos=False, special=False),
                      "special": llm.tokenize(data, add_bos=False, special=True)})
    out = {"model": os.path.basename(MODEL), "generator": "llama-cpp-python " + llama_cpp.__version__,
           "note": "cases[i] are the ids of corpus.json strings[i]", "cases": cases}
    path = os.path.join(DATA, "smollm2_goldens.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}: {len(cases)} strings")


if __name__ == "__main__":
    main()
