// One Engine::generate call as an object: the queue of waiting sequences, the
// live slots, and the named steps of an iteration — admit waiting sequences and
// prefill them, decode one token for every live slot, choose the tokens, and
// at a host sync read what the rows produced, apply the stop rules and retire
// the finished. Private to the engine (engine.h states the contract).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/slot_forward.h"
#include "hpcrl/rollout/stop_rules.h"
#include "rollout/decode_workspace.h"
#include "rollout/device_rows.h"
#include "rollout/fixed_decode_step.h"

namespace hpcrl::rollout {

// The ep group whose ranks must run the same number of forwards (every MoE
// layer is a collective over it); null when the model needs no lockstep.
dist::CommPtr ep_lockstep(const model::DecoderModel& model);

class GenerationRun {
 public:
  // Queues the call's samples in its order (a paused one with its prompt and
  // tokens as the context to prefill), to decode on `workspace` (of the call's
  // layout, begun for it: decode_workspace.h). `prompts`, `options`, `params`
  // and `workspace` must outlive the run.
  GenerationRun(model::DecoderModel& model, const io::Tokenizer* tokenizer, const EngineOptions& options,
                DecodeWorkspace& workspace, const std::vector<std::vector<int32_t>>& prompts, GenerationCall call,
                const SamplingParams& params);

  // Iterates until no rank of the ep group has work left, or the call pauses;
  // each list ordered by (prompt_index, sample_index).
  GenerationResult run();
  const GenerateStats& stats() const { return stats_; }

 private:
  struct Sequence {
    const std::vector<int32_t>* prompt_ids = nullptr;  // what is prefilled: the prompt, or `resumed`
    std::shared_ptr<const std::vector<int32_t>> resumed;  // a paused sample's prompt + tokens so far
    Sample out;
    int64_t prompt_length = 0;  // of the prompt alone: out.tokens[i] sits at position prompt_length + i
    int64_t unsynced = 0;  // tokens produced on the device since the last host sync (some may be overshoot)
    int64_t inserted = 0;  // tokens of out.tokens inserted after turns (not sampled)
    bool ends_turn = false;  // the last token read ends a turn: the row parks at this sync
    int64_t ticket = -1;     // while parked: its call
    int64_t steps() const { return int64_t(out.tokens.size()) + unsynced; }  // its next token's index
    int64_t draws() const { return steps() - inserted; }  // its next sampled token's index (the draw's key)
    // A tool's reply joins the tokens (log-prob 0, marked inserted).
    void append_reply(const std::vector<int32_t>& reply);
  };
  static Sequence queued(const std::vector<std::vector<int32_t>>& prompts, Sample sample);

  // One iteration (the place for a check between decode steps); false once no
  // rank of the ep group has a sequence left.
  bool step();
  // Waiting sequences taken into free slots by one iteration.
  struct Admission {
    std::vector<Sequence> fresh;        // prefilled now: each distinct prompt's first sample, then the others
    std::vector<Sequence> from_prefix;  // samples of the group prompt kept in the prefix slot: copy it
    std::vector<Sequence> cached;       // paused with their cache kept: copied in, nothing prefilled
    std::vector<const std::vector<int32_t>*> prompts;  // the distinct prompts of `fresh`
    std::vector<int64_t> prompt_of;                    // fresh[f] is a sample of prompts[prompt_of[f]]
    int64_t longest = 0, chunk = 0;                    // prompt positions, and per prefill forward
    int64_t forwards() const { return prompts.empty() ? 0 : (longest + chunk - 1) / chunk; }
  };
  // Takes waiting sequences for the free slots: those of the group prompt kept
  // in the prefix slot will copy its keys/values and first-token logits; those
  // paused with their cache will copy it back; the rest will be prefilled, each
  // distinct prompt once, as many prompts as the prefill's attention budget admits.
  Admission admit();
  // Prefills the admission and chooses its first tokens, padded with idle
  // forwards to `group_forwards` (the most any rank of the ep group runs).
  void prefill(Admission admission, int64_t group_forwards);
  // Whether the admission's fresh prompts run as the fixed prefill (fixed_prefill.h), which chooses their
  // first tokens on the device, rather than SlotForward::prefill.
  bool fixed_prefill_takes(const Admission& a) const;
  // After an admission that split the group at the head of the queue: keeps
  // that prompt's prefilled keys/values (from one of the `fresh` slots after
  // `first`, whose first-token logits are `logits`' rows) for the group's
  // remaining samples.
  void keep_group_prefix(int64_t first, int64_t fresh, const at::Tensor& logits);
  // Rows [first, first + cached.size()) take their kept caches back; each decodes on from its last token.
  void restore_cached(std::vector<Sequence> cached, int64_t first);
  int64_t prefix_slot() const { return slot_count_; }
  void decode();
  // Where a sequence's next draw sits (its prompt's key, its sample, its draw index).
  DrawKey draw_key(const Sequence& s) const;
  // Live rows [first, active) start on the device (DeviceRows::start) from their host state.
  void start_rows(int64_t first);
  // Chooses one token for live rows [first, first + logits.size(0)), on the device.
  void choose(const at::Tensor& logits, int64_t first);
  // When a row has `interval` unread tokens, or reached max_new_tokens (it must
  // end before its cache slot overflows): reads the rows' tokens, applies the stop
  // rules (what a row produced after its end is dropped) and retires the
  // finished rows.
  void sync_if_due();
  void sync();
  // Moves finished rows to done_; the last live row fills each hole.
  void retire();
  // A sample is done: counts the prompts whose samples are all done, reports progress.
  void finished(Sample out);
  // Whether every rank of the ep group has reached the call's pause_after_groups.
  bool pause_due() const;
  // Reads the rows' last tokens and hands every unfinished sequence back (paused_).
  void pause();
  // Element-wise OR of flags over the ep group (identity without lockstep).
  std::vector<int32_t> any_over_ep(std::vector<int32_t> flags) const;

  // Multi-turn (generation_turns.cpp). Parked rows hold the top slots:
  // parked_[i] lives in slot slot_count_ - 1 - i, live rows in [0, active_.size()).
  int64_t free_slots() const { return slot_count_ - int64_t(active_.size() + parked_.size()); }
  // Rows whose last token ended a turn leave the decoding rows for the top slots; their calls start.
  void park_turns();
  // Each iteration of a multi-turn call: takes the replies and prefills them
  // (take_replies, resume), the ranks of an ep group running as many forwards
  // as the one with the most.
  void resume_replies();
  // Rows taking their replies, in the order of their slots after the live rows.
  struct Resumed {
    std::vector<Sequence> rows;              // with the reply's tokens appended (marked inserted)
    std::vector<std::vector<int32_t>> fed;   // what each row's cache is extended by: its last sampled token, the reply
    void add(Sequence s, const std::vector<int32_t>& reply);
    // Rows [begin, end) extended together: as many as one prefill's tokens hold.
    std::vector<std::pair<size_t, size_t>> batches() const;
  };
  // The reply to parked row `s`, taken from replies_ (its reward added to the
  // row's); "length" when it and one sampled token after it do not fit max_new_tokens.
  TurnReply taken_reply(Sequence& s);
  // Takes the replies every rank of the tp group has (waiting for one when no
  // row can decode or be admitted): their rows end, or come back to resume.
  Resumed take_replies();
  // Row parked_[i] leaves the parked slots, its cache moved to slot `to` (< 0: dropped).
  Sequence unpark(size_t i, int64_t to);
  // At a pause: waits for every parked row's reply, which ends the row or is
  // appended to its tokens (marked inserted); the row then pauses with the
  // others (its cache is not kept: a continuation prefills prompt + tokens).
  void finish_calls();
  // Prefills the replies into the rows' caches, one forward per batch (r.batches()), then
  // idle forwards up to `group_forwards` (another ep rank's count); the rows
  // decode on from their first token after it.
  void resume(Resumed r, const std::vector<std::pair<size_t, size_t>>& batches, int64_t group_forwards);
  // The tickets of parked_ (in order) whose reply every rank of the tp group has.
  std::vector<bool> ready_over_tp() const;

  const EngineOptions& options_;
  const SamplingParams& params_;
  const StopRules stop_;
  const dist::CommPtr lockstep_;
  const int64_t local_heads_;
  std::deque<Sequence> pending_;
  const int64_t total_;       // sequences of this call
  const int64_t slot_count_;
  KvSlots& slots_;  // slot_count_ live slots, plus the prefix slot when groups can split
  const std::vector<int32_t>* prefix_prompt_ = nullptr;  // the prompt the prefix slot holds
  at::Tensor prefix_logits_;                              // [1, V] its first-token logits
  SlotForward& forward_;
  const int64_t sync_interval_;  // decode steps between host syncs
  DeviceRows& rows_;
  FixedDecodeStep* const fixed_;           // DecodeStep::fixed or ::graphs; null: dynamic steps
  FixedPrefill* const fixed_prefill_;      // with fixed_
  const StepLauncher* const launcher_;     // theirs
  const int64_t captures_before_, replays_before_;  // the launcher's counts when this call began
  std::vector<Sequence> active_;  // active_[r] lives in slot r
  std::vector<Sample> done_, paused_;
  std::vector<int64_t> unfinished_of_prompt_;  // samples of each prompt in this call not yet done
  int64_t complete_prompts_ = 0;               // prompts whose every sample in this call is done
  const int64_t pause_after_groups_;
  const bool keep_paused_cache_;
  TurnHandler* const turns_;
  const dist::CommPtr tp_;                 // its ranks take replies together
  std::vector<Sequence> parked_;           // rows waiting for their call's reply
  std::map<int64_t, TurnReply> replies_;   // replies polled, by ticket, not yet taken
  int64_t next_ticket_ = 0;
  GenerateStats stats_;
};

}  // namespace hpcrl::rollout
