package activity

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// slot is one known counter, alone on its cache line: concurrent Adds of
// different metrics do not contend.
type slot struct {
	v atomic.Uint64
	_ [56]byte
}

// hourMetric is a count's key: the hour (hours since the Unix epoch) and
// the metric.
type hourMetric struct {
	hour   int64
	metric string
}

// A slot packs the hour it counts (its number since the Unix epoch) in its
// top tagBits bits and that hour's count in the others: one atomic
// compare-and-swap both checks that the slot still counts the caller's hour
// and counts, so a count always lands in the hour its Add read from the
// clock, even as another Add moves the slot on to the next hour.
const (
	countBits = 40
	countMask = 1<<countBits - 1
	tagBits   = 64 - countBits
	maxTag    = 1<<tagBits - 1 // the year 3883
)

func pack(hour int64, count uint64) uint64  { return uint64(hour)<<countBits | count }
func unpack(v uint64) (hour int64, n int64) { return int64(v >> countBits), int64(v & countMask) }

// Add counts n more of metric in the current hour, in memory (Run writes
// it). For the known metrics (Creates, Replays, Conflicts, Pending) it takes
// no lock and allocates nothing; another metric is counted under a mutex. A
// count of 0 or less, and a name that is not valid (see ErrInvalidMetric),
// count nothing: counters only go up.
func (r *Recorder) Add(metric string, n int64) {
	if n <= 0 {
		return
	}
	if i := slotOf(metric); i >= 0 {
		r.add(i, n)
		return
	}
	if !validMetric(metric) {
		return
	}
	h := hourOf(r.cfg.Now())
	r.mu.Lock()
	r.hold(hourMetric{h, metric}, n)
	r.mu.Unlock()
}

// ObserveIdempotency counts one guard decision (the Guard's Observe
// signature): replayed in Replays, in_progress and mismatch in Conflicts,
// pending in Pending, anything else in none. Every guarded operation counts
// (the licenses routes and the vendor's webhooks alike).
func (r *Recorder) ObserveIdempotency(_, outcome string) {
	switch outcome {
	case "replayed":
		r.add(iReplays, 1)
	case "in_progress", "mismatch":
		r.add(iConflicts, 1)
	case "pending":
		r.add(iPending, 1)
	}
}

// add counts n of the known metric i in the hour the clock says now.
func (r *Recorder) add(i int, n int64) {
	h := hourOf(r.cfg.Now())
	s := &r.slots[i].v
	if h < 1 || h > maxTag {
		r.slow(i, h, n) // a clock before 1970 or past the slot's range
		return
	}
	for {
		v := s.Load()
		tag, c := unpack(v)
		if tag != h || uint64(c)+uint64(n) > countMask {
			r.slow(i, h, n)
			return
		}
		if s.CompareAndSwap(v, v+uint64(n)) {
			return
		}
	}
}

// slow counts n of the known metric i in hour h when its slot counts
// another hour: it moves the slot on to h when h is later (holding what the
// slot counted for its hour), and holds n for h when h is earlier (an Add
// that read the clock before the hour turned and counts after another
// moved the slot on). A count too large for the slot is held too.
func (r *Recorder) slow(i int, h, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.slots[i].v
	for {
		v := s.Load()
		tag, c := unpack(v)
		switch {
		case h < 1 || h > maxTag || tag > h || tag == h && uint64(c)+uint64(n) > countMask:
			r.hold(hourMetric{h, known[i]}, n)
			return
		case tag == h:
			if s.CompareAndSwap(v, v+uint64(n)) {
				return
			}
		default: // tag < h: the slot moves on to h
			if s.CompareAndSwap(v, pack(h, uint64(n))) {
				if c > 0 {
					r.hold(hourMetric{tag, known[i]}, c)
				}
				return
			}
		}
	}
}

// hold adds n to the held count of k; r.mu is held.
func (r *Recorder) hold(k hourMetric, n int64) {
	r.held[k] += n
	if len(r.held) > maxHeld+maxHeld/4 { // trimmed in steps, not at each new key
		r.trim()
	}
}

// trim drops the oldest hours held past maxHeld, counting what it drops
// for the next flush's warning; r.mu is held.
func (r *Recorder) trim() {
	if len(r.held) <= maxHeld {
		return
	}
	keys := make([]hourMetric, 0, len(r.held))
	for k := range r.held {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b hourMetric) int { return cmp.Compare(a.hour, b.hour) })
	for _, k := range keys[:len(keys)-maxHeld] {
		r.dropped += r.held[k]
		delete(r.held, k)
	}
}
