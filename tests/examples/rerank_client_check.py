#!/usr/bin/env python3
"""ember-server's /v1/rerank against llama.cpp's rank-pooling golden (test_server_rerank.sh).

    rerank_client_check.py BASE_URL GOLDEN_JSON

Standard library only: the shape llama-server answers (results with index and relevance_score,
highest first, top_n of them, usage), /rerank as its other path, `texts` as the documents'
other name, and 400s naming the field for bad bodies.
"""
import json
import sys
import urllib.error
import urllib.request

base, golden_path = sys.argv[1], sys.argv[2]
failures = []


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


with open(golden_path, encoding="utf-8") as f:
    golden = json.load(f)

for case in golden["cases"]:
    docs = [p["document"] for p in case["pairs"]]
    want = [p["scores"][0] for p in case["pairs"]]
    status, r = post("/v1/rerank", {"model": "x", "query": case["query"], "documents": docs})
    expect(status == 200 and r.get("object") == "list", f"rerank '{case['query']}': 200, a list")
    results = r.get("results", [])
    expect(sorted(x["index"] for x in results) == list(range(len(docs))), "every document once, by index")
    scores = [x["relevance_score"] for x in results]
    expect(scores == sorted(scores, reverse=True), "results highest score first")
    worst = max(abs(x["relevance_score"] - want[x["index"]]) for x in results)
    expect(worst <= 1e-4, f"scores within 1e-4 of llama.cpp's rank pooling (worst {worst:.2e})")
    tokens = sum(len(p["tokens"]) for p in case["pairs"])
    expect(r.get("usage") == {"prompt_tokens": tokens, "total_tokens": tokens}, f"usage: {tokens} pair tokens")

case = golden["cases"][0]
docs = [p["document"] for p in case["pairs"]]
status, top = post("/rerank", {"query": case["query"], "documents": docs, "top_n": 2})
_, full = post("/v1/rerank", {"query": case["query"], "documents": docs})
expect(status == 200 and top["results"] == full["results"][:2], "/rerank and top_n 2: the best two")
print("example response:", json.dumps(top))
# 'texts' asks for Text Embeddings Inference's shape, as llama-server answers it: a bare list.
status, tei = post("/v1/rerank", {"query": case["query"], "texts": docs, "top_n": 2, "return_text": True})
want_tei = [{"index": x["index"], "score": x["relevance_score"], "text": docs[x["index"]]} for x in full["results"][:2]]
expect(status == 200 and tei == want_tei, "'texts': TEI's list of index, score and text")
for body, field in (({"documents": ["a"]}, "query"), ({"query": "q"}, "documents"),
                    ({"query": "q", "documents": []}, "documents"), ({"query": "q", "documents": [1]}, "documents"),
                    ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
                    ({"query": "q", "documents": ["a"], "return_text": 1}, "return_text"),
                    ({"query": "q", "documents": ["a"], "echo": True}, "echo")):
    status, err = post("/v1/rerank", body)
    expect(status == 400 and err.get("error", {}).get("param") == field, f"bad body refused naming '{field}'")
print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
