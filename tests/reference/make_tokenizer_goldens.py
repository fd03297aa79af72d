#!/usr/bin/env python3
"""Tokenizer goldens from llama.cpp (llama-cpp-python, vocab_only=True) for every model it finds.

Reads tests/data/tokenizer/corpus.json (writes it first with --write-corpus) and writes, for each
model below whose file exists, tests/data/tokenizer/<name>_goldens.json:
  - cases[i]: the ids llama.cpp gives corpus string i with parse_special false ("plain") and true
    ("special"), BOS not added; "plain_text"/"special_text" where llama_detokenize of those ids
    (rendering control tokens in the special case) differs from the string itself;
  - with_bos: the ids of the first 40 strings with add_bos=True, special=True;
  - eog: every id llama_vocab_is_eog calls end of generation;
  - type_changes: [id, type] for every token whose llama.cpp attributes, as a GGUF token type,
    differ from tokenizer.ggml.token_type (llama.cpp retypes tokens by their text);
  - bos, eos, add_bos, vocab_size.
Models: smollm2 ($EMBER_MODEL, else ~/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf) and gemma3
($EMBER_GEMMA3_MODEL, else ~/.cache/ember/gemma-3-270m-q4_k_m.gguf); --models a,b picks some.
Run with the reference venv:
    ~/.cache/ember/venv-ref/bin/python tests/reference/make_tokenizer_goldens.py [--write-corpus]
Corpus entries are {"text": str} or, for bytes that are not valid UTF-8, {"hex": str}.
"""
import ctypes
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "tokenizer")
CACHE = os.path.expanduser("~/.cache/ember")
# name: (environment variable, default file, golden file)
MODELS = {
    "smollm2": ("EMBER_MODEL", "SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2_goldens.json"),
    "gemma3": ("EMBER_GEMMA3_MODEL", "gemma-3-270m-q4_k_m.gguf", "gemma3_goldens.json"),
}

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

# Gemma 3's special and user-defined tokens (control tokens, the chat format, HTML tags, runs of
# spaces, tabs and newlines), its space mark written in text, and look-alikes that must not match.
GEMMA = ["<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>",
         "[multimodal]", "</s>", "<s>", "text</s>more</s>", "<start_of_image>", "<end_of_image>",
         "<image_soft_token>", "<unused0>", "<unused99>", "<unused6241>", "<unused6242>",
         "<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
         "<bos><start_of_turn>user\nYou are terse.\n\nWhat is 2+2?<end_of_turn>\n"
         "<start_of_turn>model\n4<end_of_turn>\n<start_of_turn>model\n",
         "abc<start_of_turn>def<end_of_turn>ghi", "<start_of_turn><end_of_turn><start_of_turn>",
         "<start_of_turn", "end_of_turn>", "<start_of_turn >", "<START_OF_TURN>", "< start_of_turn>",
         "  <end_of_turn>  ", "\n<start_of_turn>model\n", "<end_of_turn>\n\n\n<eos>",
         "<table><tr><td>1</td><td>2</td></tr></table>", "<h1>Title</h1>\n<h2>Sub</h2>",
         "<b>bold</b> <i>it</i> <u>u</u> <strong>s</strong> <em>e</em> <code>x</code>",
         "<div><span>x</span><a>link</a><img></div>", "<html><body><ul><li>a</li></ul></body></html>",
         "<blockquote>q</blockquote><sub>2</sub><sup>3</sup><bbox>", "<td><th><tr>", "<tdd>", "<t d>",
         "<0x41><0xFF>", "\u2581", "\u2581\u2581hello\u2581world", "\u2581 mixed \u2581",
         " " * 40, "\t" * 40, "\n" * 40, "x" + "\t" * 33 + "y", "x" + " " * 32 + "y",
         "\t \t  \t   \t", "a \n b \t c", "word   ", "\r\n\r\n", "\r", " \n\n ", "\n\n\n\n\n\n",
         "def f():\n\tif x:\n\t\treturn 1\n\n\n\nclass C:\n    pass\n",
         "Ünïcödé 日本語 🙂\ttab", "한국어와 中文 和 日本語 mixed with English.",
         "😀😃😄😁🙂🙃😉😊😇🥰😍🤩😘😗☺️😚😙🥲😋😛😜🤪😝🤑🤗🤭🫢🫣🤫🤔"]

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
    for s in PROSE + CODE + NUMBERS + SPECIALS + GEMMA + generated_strings():
        entries.append({"text": s})
    for h in INVALID_HEX:
        entries.append({"hex": h})
    return {"description": "Tokenizer golden corpus: prose in many scripts, code, numbers, "
                           "whitespace, emoji, special-token text, invalid UTF-8 (hex).",
            "strings": entries}


def entry_bytes(entry):
    return bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode("utf-8")


# llama_token_attr bits (llama.h) -> the GGUF token type they stand for. A control bit wins:
# llama.cpp treats a token with it as control whatever else it has (e.g. a user-defined "</s>"
# promoted to end of generation).
ATTR_UNKNOWN, ATTR_UNUSED, ATTR_NORMAL, ATTR_CONTROL, ATTR_USER_DEFINED, ATTR_BYTE = (
    1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5)


def attr_type(attr):
    for bit, gguf_type in ((ATTR_CONTROL, 3), (ATTR_USER_DEFINED, 4), (ATTR_UNKNOWN, 2),
                           (ATTR_BYTE, 6), (ATTR_NORMAL, 1), (ATTR_UNUSED, 5)):
        if attr & bit:
            return gguf_type
    return 0


def detokenize(llama_cpp, vocab, ids, special):
    """llama_detokenize: remove_special=False, unparse_special=special."""
    arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
    size = 64 + 64 * len(ids)
    while True:
        buf = (ctypes.c_char * size)()
        n = llama_cpp.llama_detokenize(vocab, arr, len(ids), buf, size, False, special)
        if n >= 0:
            return bytes(buf[:n])
        size = -n


def text_or_hex(data):
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"hex": data.hex()}


def make_goldens(llama_cpp, name, path, corpus):
    from gguf import GGUFReader
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    cases = []
    for entry in corpus:
        data = entry_bytes(entry)
        case = {"plain": llm.tokenize(data, add_bos=False, special=False),
                "special": llm.tokenize(data, add_bos=False, special=True)}
        for key, ids, special in (("plain_text", case["plain"], False),
                                  ("special_text", case["special"], True)):
            decoded = detokenize(llama_cpp, vocab, ids, special)
            if decoded != data:
                case[key] = text_or_hex(decoded)
        cases.append(case)
    n_vocab = llm.n_vocab()
    field = GGUFReader(path).fields["tokenizer.ggml.token_type"]
    gguf_types = [int(field.parts[i][0]) for i in field.data]
    type_changes = []
    for i in range(n_vocab):
        t = attr_type(llama_cpp.llama_vocab_get_attr(vocab, i))
        if t != gguf_types[i]:
            type_changes.append([i, t])
    return {"model": os.path.basename(path), "generator": "llama-cpp-python " + llama_cpp.__version__,
            "note": "cases[i] are the ids of corpus.json strings[i]; see make_tokenizer_goldens.py",
            "vocab_size": n_vocab, "bos": llama_cpp.llama_vocab_bos(vocab),
            "eos": llama_cpp.llama_vocab_eos(vocab),
            "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
            "eog": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
            "type_changes": type_changes,
            "with_bos": [llm.tokenize(entry_bytes(e), add_bos=True, special=True) for e in corpus[:40]],
            "cases": cases}


def main():
    corpus_path = os.path.join(DATA, "corpus.json")
    if "--write-corpus" in sys.argv or not os.path.exists(corpus_path):
        os.makedirs(DATA, exist_ok=True)
        with open(corpus_path, "w", encoding="utf-8") as f:
            json.dump(build_corpus(), f, ensure_ascii=False, indent=1)
            f.write("\n")
    with open(corpus_path, encoding="utf-8") as f:
        corpus = json.load(f)["strings"]
    names = list(MODELS)
    if "--models" in sys.argv:
        names = sys.argv[sys.argv.index("--models") + 1].split(",")

    import llama_cpp
    for name in names:
        env, default, golden = MODELS[name]
        path = os.environ.get(env) or os.path.join(CACHE, default)
        if not os.path.exists(path):
            print(f"skipped {name}: no {path} (set {env} or run scripts/fetch-model.sh)")
            continue
        out = make_goldens(llama_cpp, name, path, corpus)
        out_path = os.path.join(DATA, golden)
        with open(out_path, "w", encoding="utf-8") as f:
            json.dump(out, f, separators=(",", ":"), ensure_ascii=False)
            f.write("\n")
        print(f"wrote {out_path}: {len(out['cases'])} strings, eog {out['eog']}, "
              f"{len(out['type_changes'])} retyped tokens")


if __name__ == "__main__":
    main()
