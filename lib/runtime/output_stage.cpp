#include "runtime/output_stage.hpp"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <utility>

namespace ember::runtime {
namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// A thinking model writes newlines around its reasoning ("<think>\n...\n</think>\n\n"): each
// stream drops the whitespace it starts with.
std::string skip_leading_space(std::string text, bool& started) {
  if (started) return text;
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  text.erase(0, i);
  started = !text.empty();
  return text;
}

void begin_reasoning(ReasoningTrack& rt, Clock::time_point now) {
  rt.inside = true;  // the markers themselves are in neither text
  rt.text_started = false;
  rt.start = now;
}

void end_reasoning(ReasoningTrack& rt, Clock::time_point now) {
  rt.inside = false;
  rt.closed = rt.over = true;
  rt.text_started = false;
  rt.end = now;
}

// Marker tokens to force, in order (ReasoningTrack::forced is taken from its back).
void queue_markers(ReasoningTrack& rt, std::initializer_list<const std::vector<std::int32_t>*> parts) {
  for (auto part = std::rbegin(parts); part != std::rend(parts); ++part)
    rt.forced.insert(rt.forced.end(), (*part)->rbegin(), (*part)->rend());
}

// The marker token forced next, if any: a channel format's turn opens its reasoning channel
// (with a budget of 0, an empty one and the answer's header), and past
// SamplingParams::reasoning_budget the closing marker (and the answer's header) is forced
// instead of sampled.
std::optional<std::int32_t> forced_marker(Sequence& seq, Clock::time_point now) {
  ReasoningTrack& rt = seq.reasoning;
  const int budget = seq.sampling.reasoning_budget;
  if (rt.forced.empty() && rt.channels() && !rt.inside && !rt.over) {
    const std::vector<std::int32_t> close{rt.close};
    if (budget == 0) {
      queue_markers(rt, {&rt.open, &close, &rt.answer});
      rt.closed = rt.over = true;
    } else {
      queue_markers(rt, {&rt.open});
      begin_reasoning(rt, now);
    }
  } else if (rt.forced.empty() && rt.inside && budget >= 0 && seq.completion.reasoning_tokens >= budget) {
    const std::vector<std::int32_t> close{rt.close};
    queue_markers(rt, {&close, &rt.answer});
    end_reasoning(rt, now);
  }
  if (rt.forced.empty()) return std::nullopt;
  const std::int32_t id = rt.forced.back();
  rt.forced.pop_back();
  return id;
}

}  // namespace

OutputStage::OutputStage(const tokenizer::Tokenizer& tokenizer, Scheduler& scheduler, ResponseCache& response_cache,
                         const EngineLock& lock, int vocab, int context_length)
    : tokenizer_(tokenizer),
      scheduler_(scheduler),
      response_cache_(response_cache),
      lock_(lock),
      vocab_(vocab),
      context_length_(context_length) {}

void OutputStage::on_token(Sequence& seq, float* logits) {
  const auto now = Clock::now();
  if (!seq.first_token) seq.first_token = now;
  seq.last_token = now;
  ReasoningTrack& rt = seq.reasoning;
  if (rt.inside && !rt.start) rt.start = now;  // a prompt that ended inside the reasoning
  float logprob = 0;
  std::vector<TokenLogprob> top;
  const bool want_top = seq.sampling.top_logprobs > 0;
  const std::optional<std::int32_t> marker = forced_marker(seq, now);
  // A grammar restricts the choice of an answer token to the tokens it allows (the sampler
  // masks the row, or asks about its best candidates only); reasoning is free.
  if (seq.constraint && !marker && !rt.inside &&
      seq.sampling.close_at_limit) {  // the tokens left to close the structure in
    int left = seq.sampling.max_tokens - seq.generated();
    if (!seq.shift_on_full) left = std::min(left, context_length_ - static_cast<int>(seq.tokens.size()));
    seq.constraint->set_tokens_left(left);
  }
  const std::int32_t id =
      marker ? *marker
             : seq.sampler.sample(logits, seq.tokens, seq.sampling.logprobs ? &logprob : nullptr,
                                  want_top ? &top : nullptr, rt.inside ? nullptr : seq.constraint.get());

  const auto t0 = Clock::now();
  // A structure closed early for the limit (SamplingParams::close_at_limit) ends as `length`.
  const FinishReason done = seq.constraint && seq.constraint->steered() ? FinishReason::length : FinishReason::stop;
  if (!marker && tokenizer_.is_end_of_generation(id) && !seq.sampling.ignore_eos) {
    finish(seq, done);
  } else {
    seq.tokens.push_back(id);
    seq.completion.tokens.push_back(id);
    if (seq.sampling.logprobs) seq.completion.logprobs.push_back(logprob);
    if (want_top) seq.completion.top_logprobs.push_back(std::move(top));
    const float* lp = seq.sampling.logprobs ? &seq.completion.logprobs.back() : nullptr;
    const std::vector<TokenLogprob>* tp = want_top ? &seq.completion.top_logprobs.back() : nullptr;
    bool stopped = false;
    if (marker) {
      emit(seq, {}, &id, 1, false, lp, tp, ChunkStream::reasoning);
    } else if (rt.open.size() == 1 && id == rt.open[0] && !rt.inside && !rt.over) {
      begin_reasoning(rt, now);
      emit(seq, {}, &id, 1, false, lp, tp, ChunkStream::reasoning);
    } else if (rt.inside && id == rt.close) {
      end_reasoning(rt, now);
      queue_markers(rt, {&rt.answer});  // a channel format's answer follows on its final channel
      emit(seq, {}, &id, 1, false, lp, tp, ChunkStream::reasoning);
    } else if (rt.inside) {
      ++seq.completion.reasoning_tokens;
      const std::string text = skip_leading_space(seq.decoder.push(id), rt.text_started);
      seq.completion.reasoning += text;
      emit(seq, text, &id, 1, false, lp, tp, ChunkStream::reasoning);
    } else {
      rt.over = true;
      if (seq.constraint) seq.constraint->accept(id);
      std::string piece = seq.decoder.push(id);
      if (rt.closed) piece = skip_leading_space(std::move(piece), rt.text_started);
      const StopMatcher::Result r = seq.stops.push(piece);
      seq.completion.text += r.text;
      emit(seq, r.text, &id, 1, false, lp, tp);
      stopped = r.stopped;
      if (stopped) finish(seq, FinishReason::stop, /*discard_held_text=*/true);
    }
    if (!stopped) {
      // A cancel_soon() from the callback just run ends the request here, as returning false does.
      if (seq.cancel_requested || seq.cancel_soon.load()) finish(seq, FinishReason::cancelled);
      // A complete grammar allows only an end token next: finish without computing it.
      else if (seq.constraint && !rt.inside && rt.forced.empty() && seq.constraint->complete())
        finish(seq, done);
      else if (seq.generated() >= seq.sampling.max_tokens)
        finish(seq, FinishReason::length);
      else if (static_cast<int>(seq.tokens.size()) >= context_length_ && !seq.shift_on_full)
        finish(seq, FinishReason::context);
    }
  }
  seq.response_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
}

void OutputStage::sample_rows(const ScheduledSequence& s, float* logits) {
  Sequence& seq = *s.sequence;
  const auto row = [&](std::size_t i) {
    return logits + (static_cast<std::size_t>(s.logit_index) + i) * static_cast<std::size_t>(vocab_);
  };
  on_token(seq, row(0));
  // Draft token i is accepted when the token sampled at its place, from the logits of the row
  // before it, is that token; then its row's K/V is the token's own and its logits give the next
  // token. This is the standard acceptance rule for a draft that proposes one token with
  // certainty (accepted with probability p(token); otherwise the sample is drawn from p without
  // it), and as every row is sampled in order with the sequence's own sampler and RNG, the
  // output is token for token the one without speculation, greedy or seeded.
  std::size_t accepted = 0;
  while (accepted < s.draft.size() && seq.state == SequenceState::running && seq.tokens.back() == s.draft[accepted]) {
    scheduler_.advance(seq, 1);
    ++accepted;
    on_token(seq, row(accepted));
  }
  if (!s.draft.empty()) {
    const int proposed = static_cast<int>(s.draft.size()), kept = static_cast<int>(accepted);
    seq.draft_length =
        kept == proposed ? std::min(seq.sampling.speculative_tokens, seq.draft_length + 2) : std::max(1, kept + 1);
  }
  seq.completion.speculative_proposed += static_cast<int>(s.draft.size());
  seq.completion.speculative_accepted += static_cast<int>(accepted);
}

void OutputStage::emit(Sequence& seq, const std::string& text, const std::int32_t* tokens, std::size_t token_count,
                       bool last, const float* logprobs, const std::vector<TokenLogprob>* top_logprobs,
                       ChunkStream stream) {
  if (!seq.on_chunk) return;
  Chunk chunk;
  chunk.text = text;
  chunk.stream = stream;
  chunk.tokens = tokens;
  chunk.token_count = token_count;
  chunk.logprobs = logprobs;
  chunk.top_logprobs = top_logprobs;
  chunk.completion = last ? &seq.completion : nullptr;
  bool go_on = true;
  try {
    lock_.run_callback([&] { go_on = seq.on_chunk(chunk); });
  } catch (const std::exception& e) {
    // A throwing callback must not unwind through the engine step; it stops its request.
    seq.completion.error = std::string("the stream callback threw an exception: ") + e.what();
    go_on = false;
  } catch (...) {
    seq.completion.error = "the stream callback threw an exception";
    go_on = false;
  }
  if (!go_on && !last) seq.cancel_requested = true;
}

void OutputStage::finish(Sequence& seq, FinishReason reason, bool discard_held_text) {
  if (seq.reasoning.inside) {  // ended inside the reasoning: what the decoder holds is reasoning
    seq.completion.reasoning += seq.decoder.flush();
    seq.reasoning.end = Clock::now();
  }
  if (!discard_held_text) {
    // Release the text held back for incomplete UTF-8 or a possible stop string.
    std::string tail = seq.stops.push(seq.decoder.flush()).text;
    tail += seq.stops.flush();
    seq.completion.text += tail;
    seq.pending_tail = std::move(tail);
  }
  seq.completion.finish_reason = reason;
  seq.completion.closed_early = seq.constraint && seq.constraint->steered();
  seq.state = SequenceState::finished;
}

void OutputStage::serve_from_response_cache(const std::shared_ptr<Sequence>& seq, Completion hit) {
  const int prompt_tokens = seq->completion.prompt_tokens;
  seq->completion = std::move(hit);
  seq->completion.prompt_tokens = prompt_tokens;
  seq->completion.cached_prompt_tokens = prompt_tokens;
  seq->completion.from_response_cache = true;
  seq->completion.speculative_proposed = seq->completion.speculative_accepted = 0;  // nothing computed
  seq->completion.timings = {};
  seq->first_scheduled = seq->first_token = seq->last_token = Clock::now();
  const Completion& c = seq->completion;
  if (!c.reasoning.empty()) emit(*seq, c.reasoning, nullptr, 0, false, nullptr, nullptr, ChunkStream::reasoning);
  emit(*seq, c.text, c.tokens.data(), c.tokens.size(), false, c.logprobs.empty() ? nullptr : c.logprobs.data(),
       c.top_logprobs.empty() ? nullptr : c.top_logprobs.data());
  seq->state = SequenceState::finished;
  finalize(seq);
}

void OutputStage::finalize(const std::shared_ptr<Sequence>& seq) {
  scheduler_.remove(seq);  // releases its blocks; published ones stay in the prefix cache
  if (seq->embedding) {    // not a request: no text, no callback, no request totals
    if (seq->completion.finish_reason == FinishReason::stop) ++totals_.embedding_sequences;
    mark_done(*seq);
    return;
  }
  Completion& c = seq->completion;
  // A callback that returned false or threw (emit), or the host's cancel(), stops its request
  // `cancelled` (ember.hpp), whatever else ended it in the same step: the chunk that completes a
  // stop string, the last token, a response-cache hit. A failure keeps its `error`.
  if (seq->cancel_requested && c.finish_reason != FinishReason::error) c.finish_reason = FinishReason::cancelled;
  while (!c.reasoning.empty() && is_space(c.reasoning.back())) c.reasoning.pop_back();
  ++totals_.requests_finished;
  totals_.prompt_tokens += static_cast<std::uint64_t>(c.prompt_tokens);
  totals_.prompt_tokens_reused += static_cast<std::uint64_t>(c.cached_prompt_tokens);
  totals_.generated_tokens += c.tokens.size();
  totals_.speculative_proposed += static_cast<std::uint64_t>(c.speculative_proposed);
  totals_.speculative_accepted += static_cast<std::uint64_t>(c.speculative_accepted);
  if (!seq->response_key.empty() && !c.from_response_cache) response_cache_.insert(seq->response_key, c);
  const auto end = Clock::now();
  c.generated_tokens = static_cast<int>(c.tokens.size());
  Timings& t = c.timings;
  t.load_ms = load_ms_;
  if (seq->first_scheduled)
    t.queue_ms = ms_between(seq->submitted, *seq->first_scheduled);
  else
    t.queue_ms = ms_between(seq->submitted, end);
  if (seq->first_token) {
    t.prefill_ms = ms_between(*seq->first_scheduled, *seq->first_token);
    t.time_to_first_token_ms = ms_between(seq->submitted, *seq->first_token);
    t.decode_ms = ms_between(*seq->first_token, *seq->last_token);
    if (c.generated_tokens > 1) t.time_per_output_token_ms = t.decode_ms / (c.generated_tokens - 1);
  }
  t.response_ms = seq->response_seconds * 1000.0;
  if (seq->reasoning.start) t.reasoning_ms = ms_between(*seq->reasoning.start, seq->reasoning.end.value_or(end));
  const auto t0 = Clock::now();
  // What the last chunk's completion shows: up to its delivery (the callback's own time is
  // added below, for the completion wait() returns).
  t.total_ms = std::max(ms_between(seq->submitted, t0), 1e-6);
  emit(*seq, seq->pending_tail, nullptr, 0, /*last=*/true);
  // The callback is done: dropping it now breaks the cycle a host creates when the callback
  // captures the request's own handle (handle -> sequence -> callback -> handle).
  seq->on_chunk = nullptr;
  t.response_ms += ms_between(t0, Clock::now());
  t.total_ms = std::max(ms_between(seq->submitted, Clock::now()), 1e-6);
  mark_done(*seq);
}

void OutputStage::mark_done(Sequence& seq) {
  {
    std::lock_guard lock(finished_mutex_);
    seq.done.store(true, std::memory_order_release);
  }
  finished_cv_.notify_all();
}

void OutputStage::wait_done(const Sequence& seq) {
  std::unique_lock lock(finished_mutex_);
  finished_cv_.wait(lock, [&] { return seq.done.load(std::memory_order_acquire); });
}

void OutputStage::add_totals(EngineStats& stats) const {
  stats.requests_finished = totals_.requests_finished;
  stats.prompt_tokens = totals_.prompt_tokens;
  stats.prompt_tokens_reused = totals_.prompt_tokens_reused;
  stats.generated_tokens = totals_.generated_tokens;
  stats.speculative_proposed = totals_.speculative_proposed;
  stats.speculative_accepted = totals_.speculative_accepted;
  stats.embedding_sequences = totals_.embedding_sequences;
}

}  // namespace ember::runtime
