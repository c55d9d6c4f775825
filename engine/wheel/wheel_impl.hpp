// engine/wheel/wheel_impl.hpp — how the hierarchical timing wheel works: the out-of-line members
// of WheelCore<Policy>, one concept a file (construction and clear, the occupancy bitmaps, cancel
// and reschedule, cascading, running due timers, advance()), and the invariants they all keep.
// Included only by the two files that compile them, once per policy: engine/wheel/wheel.cpp (the
// standalone Wheel) and engine/core/shard_wheel.cpp (an Engine shard's wheel).
//
// Invariants (checked by assertions in debug builds and by tests/wheel_model_test.cpp outside).
// Each has a short name, which the code cites beside its number: I1 the tick in process, I2 slot
// placement, I3 the due slot, I4 occupancy, I5 sub-list bits, I6 the summary word, I7 the next
// event, I8 the pace mark, I9 no event before, I10 linked means pending, I11 a queued move.
//   I1  cur_ is the tick being processed. Every timer due before cur_ has run; the ones due at cur_
//       have run or sit in the batch slot (a pass cut short by its limit, or by a throw), or,
//       while step() runs them in place, in level-0 slot cur_ % S (for the callbacks' duration
//       only: outside a pass that slot is empty, by I2). A pass
//       that reaches its limit still moves cur_ on to the first tick with callbacks waiting (or to
//       its target), so cur_ lags behind target_ only where something is due. Both may also lag
//       behind now_'s tick after inline advance() calls, which met nothing on the way (I9: no event before)
//       and moved only now_: nothing is linked in that stretch (a link due in it counts as due and goes to
//       the due slot, due_now(): now_'s tick is below lag_window_end_), and it lies before the next unit
//       boundary, so catch_up() may move both to now_'s tick at any time, and advance_slow() does before it
//       runs late timers.
//   I2  Let S = kSlots and b = kLevelBits. A node in level-0 slot i has due in (cur_, cur_ + S)
//       and due % S == i. A node in level L >= 1 has (due >> bL) - (cur_ >> bL) in [1, S - 1], in
//       the slot of that unit % S. So level L's slot for the current unit cur_ >> bL is empty: it
//       was moved down at the boundary that started the unit.
//   I3  The due slot holds timers scheduled (or rescheduled) at or before cur_ (outside advance(),
//       or by callbacks, which must not run in the pass that scheduled them), and periodic timers
//       re-armed (or rescheduled) at a tick at or before target_ (behind by a period: they run one
//       period per call). The next advance() merges them into the late slot and runs the late slot
//       first, then the batch. Nothing enters the late slot while it runs, so no call runs a timer
//       twice.
//   I4  occupied_ bit s is set iff slot s has a node; count_[s] >= the number of nodes in slot s.
//   I5  ways_[s] bit w is set iff sub-list w of slot s has a node, so occupied_ bit s is set iff
//       ways_[s] != 0.
//   I6  nonempty_words_ bit w is set iff occupied_[w] != 0: every change of occupied_ goes through
//       set_occupied() / clear_occupied(), or clears it whole (clear()).
//   I7  next_event_ <= next_event_tick(): the first tick after cur_ at which a level-0 slot fires
//       or an upper-level slot's unit starts is never before it. step() sets it exactly whenever
//       cur_ reaches it (so after a pass it lies past cur_); link() lowers it to the event of the
//       slot it fills; a move down to level 0 leaves it (the slot the node left has an event at or
//       before the node's due); unlinks and cancels leave it, which can only make it early (then
//       advance() takes the full path, lands on the early tick with nothing to do, and sets it
//       again).
//   I8  pace_at_ is finite whenever an upper level's look-ahead slot (that of unit (cur_ >> bL) + 1)
//       has a node: link() lowers it to cur_ + 1 for a node linked there, and plan_pace() sets it
//       from the look-ahead slots wherever cur_ moves across a unit boundary (a pass, a quiet
//       advance() that crosses one) and after every pace(). It may be finite with no such node (a
//       cancel emptied the slot): pace() then finds nothing, and plan_pace() makes it UINT64_MAX.
//   I9  no_event_before_ <= no_event_before(): the least of next_event_, pace_at_ and the start of the
//   level-1
//       unit after cur_'s, or 0 while the due, late or batch slot holds a node; and 0 throughout
//       a pass and while unlinks or moves are queued. no_event_before_ns_ == no_event_before_ * tick. So an
//       advance() to a now before no_event_before_ns_ meets nothing on its way, and its inline case
//       only moves now_ on. link() lowers it with the two bounds (and zeroes it for the due slot;
//       move_down() runs only where it is 0 or is set exactly afterwards, so a move to level 0
//       leaves it), queueing and step() zero it (outside advance(), a cancel or move that ends a
//       lag steps), advance_slow() and clear() set it exactly; everything else only raises what it
//       is made of.
//       And no_event_before_ <= lag_window_end_, which only those two and a pass or step set (I1: the tick in
//       process).
//   I10 A linked node (pprev != nullptr) holds a live callable and is pending (a periodic node only
//       between its runs: it is unlinked while it runs, state running), except: a node
//       cancelled by Wheel::cancel() (or by an Engine shard's owner, ShardWheel::cancel_own)
//       waiting in unlink_queue_ (callable gone; the queue is flushed
//       before anything walks the lists), and, in an Engine, a node another thread cancelled
//       (state kCancelled, callable alive) until its shard retires it or a walk meets it.
//   I11 A node whose due has the kMoving bit is pending, in move_queue_ and still in the slot of
//       its deadline before the reschedule() that queued it, not of its due: I2 holds for it only
//       once flush_moves() has moved it, which every walk, advance() and next_deadline() does
//       first. Moves are queued only while cur_ == target_ outside a pass, and nothing changes
//       cur_ or target_ before the queue is flushed. In an Engine's shard only its owner queues
//       moves (ShardWheel::move_own), outside a pass; a move applied meanwhile to a queued node
//       (ShardWheel::move) only changes its flagged due.
#pragma once

#include "wheel/advance.hpp"
#include "wheel/cancel.hpp"
#include "wheel/cascade.hpp"
#include "wheel/fire.hpp"
#include "wheel/lifecycle.hpp"
#include "wheel/occupancy.hpp"
